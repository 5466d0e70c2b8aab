// Package obs owns what trainrun says about a run's life to the outside:
// Prometheus metrics on a private registry (served over HTTP, written as a
// node_exporter textfile, pushed to a Pushgateway), webhooks, the run's event
// log in the job directory (JOBDIR/events.jsonl) and the report and timeline
// built from that log.
//
// The controller (package main, `trainrun run`) tells it each event of the
// run through one method, Observer.Observe(Event); nothing here decides
// anything about the run, and nothing here may delay the job: pushes and
// webhooks run in the background while the job runs, and Close, called as
// the controller exits, spends at most Config.ExitBound on the final push and
// the pending webhooks, whatever the network does.
//
// Counters are the run's, not the process's: every incarnation of a requeued
// job is a new controller process, so New replays the earlier incarnations'
// events from the log into the counters and histograms, and a series such as
// trainrun_requeues_total keeps counting across requeues.
//
// # Progress protocol (trainer -> trainrun)
//
// The trainer reports its progress through the same directory the checkpoint
// handshake uses: rank 0 rewrites JOBDIR/launch/progress atomically (write a
// temporary file in the same directory, then rename) with one line
//
//	STEP TOKENS UNIX_TIME
//
// STEP is the optimizer step just finished (an integer), TOKENS the tokens
// trained since the job's first start (an integer, 0 if unknown) and
// UNIX_TIME when the step finished (seconds, decimals allowed). The
// controller reads it every second; observed step time and MFU come only
// from these lines (contrib/trainer/trainrun_client.py:
// Checkpointer.report_progress). Lines that do not parse are ignored.
package obs
