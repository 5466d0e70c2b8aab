// Package harness owns the real, throw-away Slurm cluster the end-to-end tests
// run against: one munged, one slurmctld and several slurmd (each emulating a
// node with fake GPUs) from the distribution's packages, all under a fresh
// temporary directory, all on loopback ports chosen free at start, so two
// clusters (two test packages, or a developer's run beside CI) can coexist.
//
// Start brings a cluster up and returns only when every node is idle (or fails
// fast with the node's reason and the daemons' logs); Stop kills everything the
// cluster started, verifies that nothing of it remains and removes the
// directory. Clients reach the cluster through Env (SLURM_CONF and friends);
// every command run through the Cluster has a deadline, and every failure names
// the command, its output and the tail of the daemon logs.
//
// Typical use (the e2e package's TestMain starts one cluster for all tests):
//
//	c, err := harness.Start(harness.Options{TopologyConf: "...", Logf: log.Printf})
//	defer c.Stop()
//	out, err := c.Run(ctx, "srun", "--immediate=30", "-N4", "--ntasks-per-node=8", "--gpus-per-node=8", "hostname")
//	id, err := c.SubmitBatch(ctx, "#!/bin/bash\nsrun true\n", "-N2", "-p", harness.HighPartition)
//	state, err := c.WaitJob(ctx, id, time.Minute, "COMPLETED")
//	log := c.JobOutput(id)
//
// Beside the cluster, StartPushgateway and StartPrometheus run Debian's
// prometheus-pushgateway and prometheus on free loopback ports.
//
// Choices that tests rely on, and why:
//
//   - Nodes are n1..nN with NodeAddr=127.0.0.1, one slurmd port each, started as
//     `slurmd -N nX` (Debian's Slurm is built with multiple-slurmd support);
//     spool, pid and log paths use %n.
//   - GPUs are character devices made with mknod (major 195, minors 0..7 per
//     node, as the NVIDIA driver numbers them) inside the cluster directory and
//     named by File= in gres.conf: slurmd refuses regular files and drains a
//     node whose gres.conf has no File=. Slurm then sets CUDA_VISIBLE_DEVICES,
//     SLURM_STEP_GPUS and friends exactly as on a GPU node.
//   - Each node declares 2 sockets x 16 cores (32 CPUs), like a small two-socket
//     GPU server, with GPUs 0-3 on socket 0 and 4-7 on socket 1 (gres.conf
//     Cores=). The machine running the tests may have 2 cores: without
//     SlurmdParameters=config_overrides slurmd would report the real count and
//     slurmctld would drain the node ("Low socket*core*thread count"); with it,
//     slurmd reports the configured shape and a step of 8 tasks with 8 GPUs per
//     node fits. CPUs are not bound (task/none), so oversubscribing the real
//     cores only costs time, and test jobs are small.
//   - ProctrackType=proctrack/linuxproc with TaskPlugin=task/none: it works on
//     any kernel and in containers, where cgroup v2 under slurmd 22.05 needs a
//     systemd/dbus scope that is often missing. (cgroup v1 with proctrack/cgroup
//     also worked on the project's machines.) linuxproc tracks a step's
//     processes by parentage, so it still reaches every descendant of a task.
//     CPU binding therefore cannot be observed here: srun --cpu-bind prints
//     "cluster configuration lacks support for cpu binding" and runs unbound
//     (SLURM_CPU_BIND_TYPE is still set), and task/affinity on the emulated
//     32-CPU shape fails the launch ("Unable to layout tasks on given cpus").
//   - PreemptType=preempt/partition_prio, PreemptMode=REQUEUE, JobRequeue=1,
//     partitions "low" (default, GraceTime=5) and "high" (higher PriorityTier)
//     on the same nodes, KillWait=5, and AuthInfo cred_expire=10, which is also
//     the delay before a requeued job may start again (default 120 s). Note
//     that slurmctld notices the end of a GraceTime only in its 30 s periodic
//     limit check: a preempted low job was killed and requeued 14-16 s after
//     the high job's submission here, and it may take up to GraceTime+30 s.
//     Give the low partition GraceTime=0 (Options.Partitions) where a test
//     needs preemption to be immediate.
//   - Options.Heterogeneous (testcluster -hetero) replaces low and high by two
//     partitions on typed GRES: "hopper" (the first half of the nodes,
//     Gres=gpu:h100:G, default) and "ampere" (the rest, gpu:a100:G), with
//     gres.conf Type= lines, for trainrun submit's choice among GPU types. The
//     default mode's configuration is unchanged (testdata/default.*).
//   - SchedulerParameters=batch_sched_delay=0 with a 1 s scheduler interval, so
//     a batch job starts in about a second.
//   - CommunicationParameters=NoCtldInAddrAny,NoInAddrAny, so the daemons bind
//     their ports to 127.0.0.1 rather than to every interface.
package harness
