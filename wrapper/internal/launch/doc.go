// Package launch is the contract between `trainrun run` (the controller, in
// the batch step) and `trainrun exec-task` (the shim, one per task of the
// step): the launch files, the control channel's messages, its server and
// client, the signal names both sides use, and the srun command line that
// starts the shims.
//
// # The control channel
//
// It exists because Slurm's signals take different paths to the batch shell
// and to the step: the shims hear what reaches the step (SIGTERM at
// preemption) and tell the controller within milliseconds; the controller
// asks each shim to signal its own training process, and only that process
// (never its data-loader workers, which `scancel --signal` to the step would
// reach).
//
// One text line per message (Msg.Encode, Parse):
//
//	shim → controller:  hello TOKEN RANK PID NODE STEPID
//	                    signal RANK NAME          (the shim received a signal)
//	                    exit RANK CODE            (the training process ended; CODE 128+n for signal n)
//	                    beat RANK STEP AGE_MS STEP_MS STATE PHASE
//	                                              (liveness: the trainer's last step, ms since it
//	                                              advanced, its recent step time, /proc state,
//	                                              train or save; about one per BeatInterval)
//	                    wait TOKEN RANK NODE STEPID
//	                                              (first, in a step started before its plan:
//	                                              the shim waits)
//	                    probed RANK               (while waiting, after a probe: DIR/<node>.json
//	                                              is written)
//	                    delivered RANK ID         (the checkpoint signal of request ID reached
//	                                              the training process)
//	controller → shim:  ckpt ID                   (send TRAINRUN_CKPT_SIGNAL once per ID)
//	                    stack ID                  (send the stack-dump signal once per ID)
//	                    probe                     (to the first shim that waits on a node:
//	                                              probe the node, then say probed)
//	                    go | abort                (to a waiting shim: the launch files are
//	                                              written, start the rank | exit 0; after go
//	                                              the same connection says hello)
//
// The server listens on the batch node's own address, not on every
// interface. Before a connection is read it must come from one of the
// allocation's node addresses, and, from this host, from a socket the job
// user owns (Peers); others and those beyond the pending caps are closed at
// once, never queued. An admitted connection must say hello with the job's
// token and a rank of the step within HelloTimeout, so that nobody on the
// network can hold the controller's sockets or speak for a rank.
package launch
