// Package safefs holds the few file-system primitives trainrun uses where
// another local user could have prepared the path first: directories it
// creates for a job's user (job dir, launch/, node-local checkpoint dirs),
// files it reads that a user could replace with a link, a FIFO or a huge
// file, and removal that must never follow a planted symbolic link.
//
// The ownership rule, in one place: a directory trainrun creates for a user
// is created fresh with Mkdir (mode 0700), or an existing one is accepted
// only when it is a real directory (not a symbolic link), owned by the
// effective uid, and not writable by group or others (mode & 022 == 0).
// Anything else was possibly made by someone else to plant files in it; the
// error says so and what to do.
//
// It imports only the standard library and golang.org/x/sys/unix (Linux).
package safefs
