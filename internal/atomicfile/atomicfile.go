// Package atomicfile replaces a file so that a reader sees the old content or
// the whole new one, never a part: a temporary file in the same directory,
// written, closed and renamed over the target. With Durable it is also
// crash-safe: the file is fsynced before the rename and the directory after
// it (restic's recipe; google/renameio gives the atomic rename and the file
// fsync but not the directory's, and cannot stop between the steps, which
// the checkpoint store's crash test needs: Hook).
//
// The temporary file is removed on every error path; a crash can leave one
// behind, named "." + base + TempInfix + random, which owners of a
// directory can recognise and sweep (the checkpoint store does, with its own
// infix).
package atomicfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultTempInfix sits between the target's name and the random suffix of
// the temporary file unless TempInfix says otherwise.
const DefaultTempInfix = ".tmp-"

// An Option changes how a file is written.
type Option interface{ apply(*config) }

type config struct {
	durable bool
	hook    func(step string)
	infix   string
	chown   bool
	uid     int
	gid     int
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Durable fsyncs the file before it is renamed into place and the directory
// after, so that the new content survives a crash of the node once the
// write returns. Without it the replacement is atomic but may be lost, or
// (on some file systems) appear empty, after a power failure.
func Durable() Option { return optionFunc(func(c *config) { c.durable = true }) }

// Hook calls f after each step: "temp-written", "temp-synced" (Durable
// only), "renamed", "dir-synced" (Durable only). Crash tests kill the writer
// there.
func Hook(f func(step string)) Option { return optionFunc(func(c *config) { c.hook = f }) }

// TempInfix names the temporary file "." + base + infix + random.
func TempInfix(infix string) Option { return optionFunc(func(c *config) { c.infix = infix }) }

// Owner gives the file to uid:gid (through the open descriptor, before it is
// renamed into place, so the target never exists with another owner). Root
// uses it for files that belong to a job's user.
func Owner(uid, gid int) Option {
	return optionFunc(func(c *config) { c.chown, c.uid, c.gid = true, uid, gid })
}

// WriteFile replaces path with data, mode perm (exactly: the umask does not
// apply), through a temporary file in path's directory, which must exist.
// Errors name path and the step that failed.
func WriteFile(path string, data []byte, perm os.FileMode, opts ...Option) error {
	c := config{infix: DefaultTempInfix}
	for _, o := range opts {
		o.apply(&c)
	}
	step := func(s string) {
		if c.hook != nil {
			c.hook(s)
		}
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+c.infix+"*")
	if err != nil {
		return fmt.Errorf("write %s: create a temporary file in %s: %w", path, dir, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if c.chown {
		if err := f.Chown(c.uid, c.gid); err != nil {
			return fail(err)
		}
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	step("temp-written")
	if c.durable {
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("fsync: %w", err))
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: close: %w", path, err)
	}
	if c.durable {
		step("temp-synced")
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: rename into place: %w", path, err)
	}
	step("renamed")
	if !c.durable {
		return nil
	}
	if err := SyncDir(dir); err != nil {
		return err
	}
	step("dir-synced")
	return nil
}

// WriteJSON is WriteFile of v as indented JSON with a final newline.
func WriteJSON(path string, v any, perm os.FileMode, opts ...Option) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WriteFile(path, append(b, '\n'), perm, opts...)
}

// SyncDir makes the entries of dir (creations, renames, removals) durable.
// On Linux a directory opened read-only can be fsynced; on NFS the server has
// already committed namespace operations (they are synchronous), and on
// Lustre/GPFS fsync of a directory is accepted and orders the metadata.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s to fsync it: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w; the file system may not persist renames: check the mount", dir, err)
	}
	return nil
}
