package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/trainrun/trainrun/internal/safefs"
)

// The store's metadata directories (.trainrun and staging, trash, corrupt
// under it) are opened without following a symbolic link, and everything
// that renames into them or removes from them works relative to the
// verified descriptor (issue 12, finding 8: a .trainrun/trash link to
// someone's home made emptying the trash remove everything there).

var metaSubdirs = []string{"staging", "trash", "corrupt"}

// openMeta opens .trainrun/<sub> ("" for .trainrun itself) of the store,
// creating the missing ones (mode 0755) when create is set. A symbolic link
// or a file in their place is an error naming it. Without create, a missing
// directory wraps fs.ErrNotExist.
func (s *Store) openMeta(sub string, create bool) (*os.File, error) {
	elems := []string{metaDir}
	if sub != "" {
		elems = append(elems, sub)
	}
	d, err := safefs.OpenDir(s.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range elems {
		if create {
			if err := unix.Mkdirat(int(d.Fd()), e, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				d.Close()
				return nil, fmt.Errorf("create %s: %w; the checkpoint directory must be writable by the job", filepath.Join(d.Name(), e), err)
			}
		}
		nd, err := safefs.OpenDir(d.Name(), e)
		d.Close()
		if err != nil {
			return nil, err
		}
		d = nd
	}
	return d, nil
}

// checkMeta refuses a store whose metadata directories are symbolic links
// or files: it Lstats .trainrun and its subdirectories (a missing one is
// fine). Staging in particular is committed from: a link there would let
// whoever controls its target inject a checkpoint.
func (s *Store) checkMeta() error {
	p := filepath.Join(s.dir, metaDir)
	for _, q := range append([]string{p}, filepath.Join(p, metaSubdirs[0]), filepath.Join(p, metaSubdirs[1]), filepath.Join(p, metaSubdirs[2])) {
		fi, err := os.Lstat(q)
		if errors.Is(err, fs.ErrNotExist) {
			if q == p {
				return nil
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("checkpoint store: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("checkpoint store: %s is not a directory (%s); the store's metadata directories are plain directories, so trainrun refuses to follow or use it: remove it", q, fi.Mode().Type())
		}
	}
	return nil
}

// renameInto moves dir (a checkpoint in the store or in staging) to
// .trainrun/<sub>/<name> with renameat between verified descriptors, then
// fsyncs both directories.
func (s *Store) renameInto(dir, sub, name string) error {
	var from *os.File
	var err error
	if filepath.Dir(dir) == s.dir {
		from, err = safefs.OpenDir(s.dir)
	} else {
		from, err = s.openMeta("staging", false)
	}
	if err != nil {
		return err
	}
	defer from.Close()
	if filepath.Join(from.Name(), filepath.Base(dir)) != dir {
		return fmt.Errorf("move %s: not a checkpoint of the store %s", dir, s.dir)
	}
	to, err := s.openMeta(sub, true)
	if err != nil {
		return err
	}
	defer to.Close()
	if err := unix.Renameat(int(from.Fd()), filepath.Base(dir), int(to.Fd()), name); err != nil {
		return &os.LinkError{Op: "rename", Old: dir, New: filepath.Join(to.Name(), name), Err: err}
	}
	if err := from.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", from.Name(), err)
	}
	if err := to.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", to.Name(), err)
	}
	return nil
}
