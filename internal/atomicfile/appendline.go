package atomicfile

import (
	"fmt"
	"os"
	"syscall"
)

// AppendLine adds line and a newline to the JSON-lines (or other
// line-oriented) file at path durably: one O_APPEND write, then fsync. A
// line a killed writer tore (no newline at the end of the file) is left
// alone and the new one starts on a line of its own, so a reader that skips
// lines it cannot parse loses only the torn one. A link at path is refused.
// With lock, an advisory flock keeps concurrent writers' lines whole where
// O_APPEND alone does not (NFS); a file system without locks gets the
// O_APPEND write alone. The file is created with mode perm.
func AppendLine(path string, line []byte, perm os.FileMode, lock bool) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	if lock && syscall.Flock(int(f.Fd()), syscall.LOCK_EX) == nil {
		defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	b := make([]byte, 0, len(line)+2)
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			b = append(b, '\n')
		}
	}
	b = append(append(b, line...), '\n')
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return nil
}
