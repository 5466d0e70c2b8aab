package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Mode is the mode MkdirOwn creates directories with.
const Mode fs.FileMode = 0o700

// MkdirOwn creates dir with mode 0700, or accepts it when it already exists
// and CheckOwnDir accepts it. Missing parents are created (0755, as MkdirAll
// would); only dir itself is checked. what names the directory in errors
// ("job directory", "--ckpt-local-dir").
func MkdirOwn(dir, what string) error {
	if parent := filepath.Dir(dir); parent != dir {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return fmt.Errorf("%s %s: create its parent: %w", what, dir, err)
		}
	}
	err := os.Mkdir(dir, Mode)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	return CheckOwnDir(dir, what)
}

// CheckOwnDir accepts dir only when it is a directory (Lstat: a symbolic link
// is refused), owned by the effective uid and not writable by group or
// others.
func CheckOwnDir(dir, what string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s %s is a symbolic link; trainrun uses only a real directory of your own there, since another user may have planted the link: remove it, or choose another path", what, dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s exists and is not a directory (%s); remove it, or choose another path", what, dir, fi.Mode().Type())
	}
	return checkOwner(fi, dir, what)
}

func checkOwner(fi fs.FileInfo, p, what string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s %s: cannot read its owner", what, p)
	}
	if me := os.Geteuid(); int(st.Uid) != me {
		return fmt.Errorf("%s %s already exists and belongs to uid %d, not to you (uid %d): another user may have created it to plant files in it; remove it (or ask its owner to), or choose another path",
			what, p, st.Uid, me)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s %s is writable by group or others (mode %04o): anyone who can write it could plant files trainrun trusts; run chmod go-w %s, or choose another path",
			what, p, perm, p)
	}
	return nil
}

// ErrTooLarge is wrapped by the reads when the file exceeds the limit.
var ErrTooLarge = errors.New("file larger than the limit")

// ReadFile reads path, which must be a regular file of at most max bytes. It
// opens it with O_NOFOLLOW|O_NONBLOCK, so a symbolic link in the last
// component is refused and a FIFO or device planted there neither blocks nor
// is read; it reads at most max+1 bytes whatever the file claims. Errors wrap
// fs.ErrNotExist when the file is absent, and name the path, never its
// contents.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadLimit(f, path, max)
}

// ReadOwnFile is ReadFile for files that must also be the effective uid's
// own and not writable by group or others (what a process running as the
// user trusts enough to run a command with: launch files).
func ReadOwnFile(path, what string, max int64) ([]byte, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkOwner(fi, path, what); err != nil {
		return nil, err
	}
	return ReadLimit(f, path, max)
}

// OpenFile opens path read-only with O_NOFOLLOW|O_NONBLOCK and checks that
// it is a regular file.
func OpenFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link; trainrun reads only plain files there", path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s); trainrun reads only plain files there", path, fi.Mode().Type())
	}
	return f, nil
}

// ReadLimit reads r to its end, failing (wrapping ErrTooLarge) once more
// than max bytes came; name is for the error.
func ReadLimit(r io.Reader, name string, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w of %d bytes", name, ErrTooLarge, max)
	}
	return b, nil
}
