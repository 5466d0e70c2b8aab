// Package snapshot owns the built-in machine snapshots: compact, transcribed
// descriptions of real machines (topo/snapshot/machines/*.spec, each with the
// public source of every fact) and the generator that expands one into a
// sysfs/procfs tree on disk, so `trainrun topo --machine NAME` and the tests
// read a captured tree exactly as they read /sys.
//
// Specs are text and the tree is built at run time because sysfs is mostly
// symlinks and PCI addresses contain ':', neither of which survives a Go
// module zip. The package imports nothing of trainrun.
package snapshot
