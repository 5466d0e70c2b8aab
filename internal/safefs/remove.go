//go:build unix

package safefs

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// maxDepth bounds RemoveAllAt's recursion (each level holds one descriptor):
// checkpoint trees are a few levels deep.
const maxDepth = 256

// OpenDir opens base (following links: the caller named it), then each of
// elems relative to the previous directory with O_NOFOLLOW|O_DIRECTORY, so a
// symbolic link anywhere below base fails (ELOOP or ENOTDIR, wrapped with the
// path) instead of being followed. A missing element wraps fs.ErrNotExist.
func OpenDir(base string, elems ...string) (*os.File, error) {
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: base, Err: err}
	}
	p := base
	for _, e := range elems {
		p += "/" + e
		if e == "" || e == "." || e == ".." || strings.Contains(e, "/") {
			unix.Close(fd)
			return nil, fmt.Errorf("open %s: %q is not one directory name", p, e)
		}
		nfd, err := unix.Openat(fd, e, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return nil, linkErr(p, err)
		}
		fd = nfd
	}
	return os.NewFile(uintptr(fd), p), nil
}

func linkErr(p string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%s is not a directory (a symbolic link or a file: %v); trainrun's metadata directories are plain directories, so it is refused rather than followed: remove it", p, err)
	}
	return &os.PathError{Op: "open", Path: p, Err: err}
}

// RemoveAllAt removes name in the directory d and, when it is a directory,
// everything below it, relative to verified descriptors (openat with
// O_NOFOLLOW|O_DIRECTORY, unlinkat): a symbolic link is removed itself,
// never followed, whatever is swapped in while it runs. A missing name is
// not an error.
func RemoveAllAt(d *os.File, name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("remove %s/%q: not one entry name", d.Name(), name)
	}
	return removeAt(int(d.Fd()), d.Name(), name, 0)
}

func removeAt(dfd int, dname, name string, depth int) error {
	p := dname + "/" + name
	err := unix.Unlinkat(dfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return &os.PathError{Op: "unlinkat", Path: p, Err: err}
	}
	if depth >= maxDepth {
		return fmt.Errorf("remove %s: deeper than %d levels; remove it by hand", p, maxDepth)
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			// Swapped for a link or a file since the unlink: remove that.
			if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return &os.PathError{Op: "unlinkat", Path: p, Err: err}
			}
			return nil
		}
		return &os.PathError{Op: "openat", Path: p, Err: err}
	}
	dir := os.NewFile(uintptr(fd), p)
	defer dir.Close()
	// Entries removed while a directory is read may shift what a later read
	// returns: read it whole, remove, and read again until it is empty.
	for try := 0; ; try++ {
		if _, err := dir.Seek(0, 0); err != nil {
			return &os.PathError{Op: "seek", Path: p, Err: err}
		}
		ents, err := dir.ReadDir(-1)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := removeAt(fd, p, e.Name(), depth+1); err != nil {
				return err
			}
		}
		err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.ENOTEMPTY) || try == 3 {
			return &os.PathError{Op: "unlinkat", Path: p, Err: err}
		}
	}
}

// ReadFileAt is ReadFile of the entry name in the directory d: openat with
// O_NOFOLLOW|O_NONBLOCK, a regular file only, at most max bytes.
func ReadFileAt(d *os.File, name string, max int64) ([]byte, error) {
	p := d.Name() + "/" + name
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return nil, fmt.Errorf("read %s: not one entry name", p)
	}
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link; trainrun reads only plain files there", p)
		}
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s); trainrun reads only plain files there", p, fi.Mode().Type())
	}
	return ReadLimit(f, p, max)
}
