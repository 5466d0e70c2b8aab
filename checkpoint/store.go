package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ErrNoCheckpoint is returned (wrapped) by Latest when nothing committed verifies.
var ErrNoCheckpoint = errors.New("no committed checkpoint")

// Options tune a Store. The zero value is usable.
type Options struct {
	// WorldSize is the number of ranks List and Complete expect when the
	// caller gives none; 0 takes it from the last incarnation in the history.
	WorldSize int
	// Workers is the number of parallel I/O streams for hashing and
	// draining (default 8: parallel file systems need several streams).
	Workers int
	// ChunkBytes is the hash and copy unit (default DefaultChunkBytes).
	ChunkBytes int64
	// Now is the clock (default time.Now).
	Now func() time.Time
	// DeferHash makes Commit of a checkpoint written in place record the
	// files' sizes only, without reading their bytes, so that commit time
	// does not grow with the checkpoint's size; Seal adds the checksums
	// afterwards (the controller runs it in the background). Until then
	// Verify checks sizes, markers and presence only. Drained checkpoints
	// always get their checksums, computed during the copy.
	DeferHash bool
}

// Store is one checkpoint directory (CKPT_DIR). All its I/O goes through
// it; it holds no global state, so stores in different directories are
// independent.
type Store struct {
	dir  string
	opts Options
	// hook, when set (tests only), runs at every durable step so that the
	// crash test can kill the process exactly there. The drain's workers
	// call it concurrently.
	hook func(step string)
	// fault, when set (tests only), is asked before each atomic file write
	// ("commit:manifest", "pointer", ...): an error it returns is the
	// write's, as a full or failing file system would return it.
	fault func(what string) error
	// budget, when set, is how many manifest bytes committed() may still
	// read: LatestCommitted's fallback runs in slurmstepd on every node, and
	// a store of a thousand 16 MiB manifests must not cost it minutes.
	budget *readBudget
}

// Open opens the store in dir, which must exist. It writes nothing.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, o Options) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("no checkpoint directory given: pass --ckpt-dir or set TRAINRUN_CKPT_DIR")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %v; create it (mkdir -p) or pass the right --ckpt-dir", dir, errString(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint directory %s is a file, not a directory; pass the directory that holds the checkpoints", dir)
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{dir: abs, opts: o}, nil
}

// Dir is the store's directory (absolute).
func (s *Store) Dir() string { return s.dir }

// TagDir is where the committed checkpoint tag lives (TRAINRUN_RESUME_DIR).
func (s *Store) TagDir(tag string) string { return s.tagDir(tag) }

func (s *Store) step(name string) {
	if s.hook != nil {
		s.hook(name)
	}
}

func (s *Store) mkMeta() error {
	if err := s.checkMeta(); err != nil {
		return err
	}
	d, err := s.openMeta("", true)
	if err != nil {
		return err
	}
	return d.Close()
}

// worldSize resolves the expected number of ranks: the argument, the option,
// or the last incarnation recorded in the history.
func (s *Store) worldSize(n int) int {
	if n > 0 {
		return n
	}
	if s.opts.WorldSize > 0 {
		return s.opts.WorldSize
	}
	h, _ := s.History().Load()
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].WorldSize > 0 {
			return h[i].WorldSize
		}
	}
	return 0
}
