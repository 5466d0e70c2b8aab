// Package scale holds the scale benchmark (make bench-scale) and its
// unit-level guard, in test files only: N simulated ranks (1k, 4k, 16k) of
// fake shims in a child process speak the real control channel
// (internal/launch's client, Msg and Parse) to the real server in another
// child process, the controller's side, which writes the real launch files
// and counts what it handles; the shims write done markers and shards into a
// real checkpoint store, whose commit is timed and whose file-system calls
// are counted with strace. Nothing here is compiled into trainrun.
//
//	make bench-scale    # TRAINRUN_SCALE_N=1024,4096 narrows it; TRAINRUN_SCALE_DIR=DIR picks the disk
//
// test/README.md has the figures and what they do and do not cover.
package scale
