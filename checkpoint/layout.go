package checkpoint

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// PathRule is one row of the on-disk layout: a path pattern relative to the
// store's directory, who writes it, and what it means.
type PathRule struct {
	Pattern string
	Writer  string
	Meaning string
}

// Layout is the whole on-disk layout of a store, in one table. The path
// helpers below are the only code that builds these names; `trainrun ckpt
// --help` prints this table.
var Layout = []PathRule{
	{"<tag>/", "trainer (in place) or the commit's rename from staging",
		"one checkpoint; <tag> is one path element, not starting with '.', e.g. step-1200"},
	{DonePattern, "trainer (or the drain, after that rank's files are durable in staging)",
		"empty file: rank RANK's files are durable; the checkpoint is complete when all WORLD_SIZE exist"},
	{FailedPattern, "trainer whose save the disk refused (CAUSE: disk-full, quota, io-error)",
		"empty file: rank RANK's save failed; once every rank is done or failed the checkpoint is discarded"},
	{"<tag>/.trainrun/drained.<NODE>.json", "drain on node NODE",
		"the files NODE copied into staging with sizes and xxh64, written after they were fsynced"},
	{"<tag>/.trainrun/manifest.json", "commit",
		"every file's size and xxh64; a <tag>/ outside staging holding a manifest IS committed"},
	{".trainrun/latest", "commit, last of all",
		"pointer: the tag of the newest committed checkpoint (not CKPT_DIR/latest: DeepSpeed owns that name)"},
	{".trainrun/staging/<tag>/", "drain",
		"a checkpoint being drained from node-local storage; renamed to <tag>/ at commit"},
	{".trainrun/trash/<tag>.<unixnano>/", "prune, recover, quarantine",
		"removed atomically by rename, then deleted; anything here is garbage"},
	{".trainrun/corrupt/<tag>.<unixnano>/", "quarantine",
		"a committed checkpoint that failed verification, kept for inspection"},
	{".trainrun/history.jsonl", "controller",
		"one JSON event per line: each incarnation's start and end (cause, last committed tag, progress)"},
	{".trainrun/finished", "controller",
		"the run finished: never requeue it"},
	{".trainrun/compress", "controller (CkptCompress)",
		"the run's compression mode (archive, auto, always) for every drain of the store; absent: no"},
	{"<tag>/**/<name>.trz", "background compression, compress-on-drain",
		"<name> stored compressed (trz codec); the manifest keeps <name>'s size and xxh64 and adds the codec's"},
	{".trainrun/request", "trainrun ckpt request",
		"a checkpoint request the controller polls for and removes when it acts"},
	{"latest_checkpointed_iteration.txt + iter_NNNNNNN/", "Megatron-LM (native)",
		"a native checkpoint, complete when its iteration <= the tracker's"},
	{"<tag>/.metadata", "PyTorch DCP (native)", "a native checkpoint, complete once .metadata exists"},
	{"<tag>/{config.json,model*.safetensors,trainer_state.json}", "Hugging Face Trainer (native)",
		"a native checkpoint, complete once trainer_state.json and the model weights exist"},
	{"*.ckpt", "PyTorch Lightning (native)", "a single-file checkpoint: listed, never committed or pruned"},
	{"*.tmp-trainrun-*, *.part-trainrun", "store, drain",
		"temporary files of atomic writes; never part of a checkpoint"},
}

const (
	metaDir      = ".trainrun" // inside the store and inside each checkpoint
	manifestName = "manifest.json"
	doneMarker   = "done."
	drainedPfx   = "drained."
	partSuffix   = ".part-trainrun"
	tmpInfix     = ".tmp-trainrun-"
)

// The handshake's markers as help and messages name them to trainer
// authors (rows of Layout).
const (
	DonePattern   = "<tag>/" + metaDir + "/" + doneMarker + "<RANK>"
	FailedPattern = "<tag>/" + metaDir + "/" + failedMarker + "<RANK>.<CAUSE>"
)

func (s *Store) tagDir(tag string) string     { return filepath.Join(s.dir, tag) }
func (s *Store) stagingRoot() string          { return filepath.Join(s.dir, metaDir, "staging") }
func (s *Store) stagingDir(tag string) string { return filepath.Join(s.stagingRoot(), tag) }
func (s *Store) trashRoot() string            { return filepath.Join(s.dir, metaDir, "trash") }
func (s *Store) corruptRoot() string          { return filepath.Join(s.dir, metaDir, "corrupt") }
func (s *Store) pointerPath() string          { return filepath.Join(s.dir, metaDir, "latest") }
func (s *Store) historyPath() string          { return filepath.Join(s.dir, metaDir, "history.jsonl") }
func (s *Store) finishedPath() string         { return filepath.Join(s.dir, metaDir, "finished") }
func (s *Store) requestPath() string          { return filepath.Join(s.dir, metaDir, "request") }

// RequestPath is the file `trainrun ckpt request` writes for the controller.
func (s *Store) RequestPath() string { return s.requestPath() }

// PointerPath is the latest pointer's file (the tag of the newest committed
// checkpoint).
func (s *Store) PointerPath() string { return s.pointerPath() }

func ckptMeta(ckptDir string) string     { return filepath.Join(ckptDir, metaDir) }
func manifestPath(ckptDir string) string { return filepath.Join(ckptDir, metaDir, manifestName) }

// ManifestPath is the manifest of the checkpoint directory ckptDir: its
// presence is the commit.
func ManifestPath(ckptDir string) string { return manifestPath(ckptDir) }

// DoneMarkerPath is where rank writes its completion marker for the
// checkpoint directory ckptDir (the handshake's step 2).
func DoneMarkerPath(ckptDir string, rank int) string {
	return filepath.Join(ckptDir, metaDir, doneMarker+strconv.Itoa(rank))
}

func drainedPath(ckptDir, node string) string {
	return filepath.Join(ckptDir, metaDir, drainedPfx+node+".json")
}

// CheckTag says whether tag can name a checkpoint: one path element, not
// hidden (names starting with '.' belong to the store), printable.
func CheckTag(tag string) error {
	switch {
	case tag == "":
		return fmt.Errorf("empty checkpoint tag; use one directory name such as step-1200")
	case strings.HasPrefix(tag, "."):
		return fmt.Errorf("checkpoint tag %q starts with '.': such names are reserved for the store; use e.g. step-1200", tag)
	case strings.ContainsAny(tag, "/\\\x00\n"):
		return fmt.Errorf("checkpoint tag %q is not a single directory name; use e.g. step-1200", tag)
	case strings.Contains(tag, tmpInfix) || strings.HasSuffix(tag, partSuffix):
		return fmt.Errorf("checkpoint tag %q looks like a temporary file of the store", tag)
	}
	return nil
}

func checkNode(node string) error {
	if node == "" || strings.HasPrefix(node, ".") || strings.ContainsAny(node, "/\\\x00\n") {
		return fmt.Errorf("node name %q is not usable in a file name; pass the Slurm node name (SLURMD_NODENAME)", node)
	}
	return nil
}

// StepOf is the training step a tag names: its last run of decimal digits
// (step-1200, iter_0001200, checkpoint-1200, epoch=3-step=1200 all give 1200),
// or -1 when it has none. It orders checkpoints: a higher step is newer.
func StepOf(tag string) int64 {
	end := -1
	for i := len(tag) - 1; i >= 0; i-- {
		if tag[i] >= '0' && tag[i] <= '9' {
			end = i + 1
			break
		}
	}
	if end < 0 {
		return -1
	}
	start := end - 1
	for start > 0 && tag[start-1] >= '0' && tag[start-1] <= '9' {
		start--
	}
	n, err := strconv.ParseInt(tag[start:end], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// isTempName reports whether a name is a temporary file of the store or the
// drain (never a trainer's file).
func isTempName(name string) bool {
	return strings.Contains(name, tmpInfix) || strings.HasSuffix(name, partSuffix)
}
