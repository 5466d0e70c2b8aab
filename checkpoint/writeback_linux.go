package checkpoint

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks Linux to begin writing [off, off+n) of f to storage
// without waiting (sync_file_range SYNC_FILE_RANGE_WRITE). It is only a hint:
// durability still comes from fsync.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
