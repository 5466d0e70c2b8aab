// Package slurm is trainrun's one client of Slurm: the only code that runs
// Slurm's client commands (scontrol, srun, scancel, sbatch, sinfo, squeue) or
// reads the SLURM_* environment of an allocation. Everything above it (the
// trainrun command, the SPANK plugin, the test harness) asks through it.
//
// # What it asks, and in which form
//
// Slurm 22.05, the version trainrun supports, has no --json for scontrol
// (`scontrol show job --json` prints "unrecognized option '--json'",
// testdata/show-job-json.stderr); squeue and sinfo have it, but nothing here
// needs them. So every call reads scontrol's text:
//
//	Client.Job        scontrol show job -o ID         one record (ParseRecord)
//	Client.NodeAddrs  scontrol show node -o NODELIST  one record per node
//	Client.Limits     scontrol show partition -o P    one record; GraceTime, PreemptMode
//	                  scontrol show config            "Key = value" lines; KillWait
//	Client.Topology   scontrol show topology          topo.ParseScontrolTopology
//	Client.Requeue    scontrol requeue ID
//	Client.KillStep   scancel --signal=KILL ID.STEP
//	Client.Partitions scontrol show partition -o      ParsePartitions
//	Client.Nodes      scontrol -d show node -o        ParseNodes: typed Gres, GresUsed
//	Client.TestOnly   sbatch --test-only ARGS         ParseTestOnly (its answer is on stderr)
//	Client.Submit     sbatch --parsable ARGS          the job id; sbatch's errors as printed
//	Client.Srun       srun ARGS (a short step run to completion: the probe)
//	StepCommand       srun ARGS (the training step, started and watched by the caller)
//
// # Errors, timeouts, fallbacks
//
// A failed command is an *Error (the command line, how it ended, what it
// printed on stderr); errors.Is(err, ErrNotFound) tells that the command is
// not installed. Each query is bounded by Client.Timeout (DefaultTimeout when
// zero). Nothing here decides what a failure means: the callers choose their
// fallback (the run controller treats an unreadable topology as one switch,
// `trainrun topo --cluster` fails).
//
// # Tests
//
// A Client runs commands through its Runner. Exec runs the real ones; tests
// pass Canned, which answers from outputs captured on the real Slurm 22.05
// of the e2e harness (testdata/capture.sh says how) and fails on anything
// else, so no unit test asks a site's Slurm about its job 42.
package slurm
