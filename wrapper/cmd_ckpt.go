package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

func init() {
	register(&command{name: "ckpt", short: "list, verify, prune checkpoints; print the latest; request one", run: runCkpt})
}

// ckptNow is the clock of `ckpt list`'s age column (tests fix it).
var ckptNow = time.Now

const ckptSynopsis = "ckpt list|verify|prune|latest|request|drain|compress|restore [flags]"

func ckptHelp(w io.Writer) {
	fmt.Fprint(w, joinLines(
		"Usage: trainrun "+ckptSynopsis,
		"",
		"  list [--sizes-only]  every checkpoint: state, kind, step, ranks, files, size, age; latest marks the one",
		"                       a job would resume from, verified as ckpt latest does (FAILED: newer, skipped)",
		"  verify TAG|--all     reread every file and compare sizes and xxh64 with the manifest",
		"  prune --keep N [--keep-every STEPS] [--dry-run]",
		"                       delete committed checkpoints beyond the newest N (and one per STEPS steps);",
		"                       never the latest, never one not committed",
		"  latest               print the directory of the newest committed checkpoint that verifies",
		"  request [--then continue|stop|requeue] [--reason TEXT] [--queue]",
		"                       ask the running job's controller for a checkpoint now: writes",
		"                       CKPT_DIR/.trainrun/request, which the controller polls for and removes;",
		"                       exits 9 when the store's history shows no job running (--queue: write it anyway)",
		"  drain [--local DIR] [--node NAME] [--ranks LIST] [--keep-local] [--json]",
		"                       copy this node's finished node-local checkpoints into the store's staging",
		"                       (the job epilog's last pass); a tag is committed once every node drained it",
		ckptCompressHelp,
		"",
		"Every subcommand takes --ckpt-dir DIR (default $TRAINRUN_CKPT_DIR).",
		"",
		"States: committed (manifest written: durable, verifiable), complete (every rank marked done, not",
		"committed yet), incomplete (being written, or abandoned), staged / draining (in node-local drain),",
		"native / native-incomplete (a framework's own marker, without the handshake: a weaker guarantee).",
		"",
		"On-disk layout (relative to CKPT_DIR):",
	))
	for _, r := range checkpoint.Layout {
		fmt.Fprintf(w, "  %s\n      %s (by %s)\n", r.Pattern, r.Meaning, r.Writer)
	}
	writeExamples(w, "ckpt")
}

func runCkpt(ctx context.Context, env *runEnv, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		ckptHelp(env.stdout)
		if len(args) == 0 {
			return usageErrorf("ckpt needs a subcommand: list, verify, prune, latest or request")
		}
		return exitcode.ErrHelpShown
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "list":
		return runCkptList(ctx, env, rest)
	case "verify":
		return runCkptVerify(ctx, env, rest)
	case "prune":
		return runCkptPrune(ctx, env, rest)
	case "latest":
		return runCkptLatest(ctx, env, rest)
	case "request":
		return runCkptRequest(ctx, env, rest)
	case "drain":
		return runCkptDrain(ctx, env, rest)
	case "compress":
		return runCkptCompress(ctx, env, rest)
	case "restore":
		return runCkptRestore(ctx, env, rest)
	}
	return usageErrorf("ckpt %q: unknown subcommand; use list, verify, prune, latest, request, drain, compress or restore", sub)
}

// ckptFlags are the flags every ckpt subcommand shares.
type ckptFlags struct {
	dir   string
	world int
}

func (o *ckptFlags) AddFlags(fs *pflag.FlagSet, env *runEnv) {
	fs.StringVar(&o.dir, "ckpt-dir", env.getenv("TRAINRUN_CKPT_DIR"), "the checkpoint store (env TRAINRUN_CKPT_DIR)")
	fs.IntVar(&o.world, "world-size", 0, "ranks a checkpoint needs to be complete (default: the last run's, from the store's history)")
}

func (o *ckptFlags) open() (*checkpoint.Store, error) {
	if o.world < 0 {
		return nil, usageErrorf("--world-size %d: want the number of ranks, or 0 for the last run's", o.world)
	}
	s, err := checkpoint.OpenWith(o.dir, checkpoint.Options{WorldSize: o.world})
	if err != nil {
		return nil, withCode(exitcode.Usage, err)
	}
	return s, nil
}

// runCkptList is `trainrun ckpt list`: the checkpoints in the store, marked
// with the one a job started now would resume from.
func runCkptList(ctx context.Context, env *runEnv, args []string) error {
	var o ckptFlags
	var asJSON, sizesOnly bool
	var format string
	fs := newFlags("ckpt list", "ckpt list [--ckpt-dir DIR] [--world-size N] [--sizes-only] [--format table|json]", env.stdout)
	o.AddFlags(fs, env)
	fs.BoolVar(&sizesOnly, "sizes-only", false, "mark the latest after checking markers and sizes only (no rereading)")
	fs.BoolVar(&asJSON, "json", false, "print JSON, one object per checkpoint (--format json)")
	fs.StringVar(&format, "format", "table", "table, or json (a list of objects with raw_bytes and stored_bytes); text is table's old name, kept for one release")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch tableFormat(format, "text") {
	case "json":
		asJSON = true
	case "text":
	default:
		return usageErrorf("--format %q: use table or json", format)
	}
	if fs.NArg() > 0 {
		return usageErrorf("ckpt list takes no arguments, got %q", fs.Args())
	}
	s, err := o.open()
	if err != nil {
		return err
	}
	list, err := s.List()
	if err != nil {
		return err
	}
	resume, failed, err := resumeMarks(ctx, s, sizesOnly)
	if err != nil {
		return err
	}
	if asJSON {
		return writeCkptListJSON(env.stdout, list, resume, failed)
	}
	writeCkptListTable(env.stdout, s.Dir(), list, resume, failed)
	return nil
}

// writeCkptListJSON is `ckpt list --format json`: one object per
// checkpoint, resume marking the one a job started now resumes from and
// verify_error each newer committed one that fails.
func writeCkptListJSON(w io.Writer, list []checkpoint.Info, resume string, failed map[string]string) error {
	type row struct {
		Tag       string    `json:"tag"`
		Dir       string    `json:"dir"`
		State     string    `json:"state"`
		Kind      string    `json:"kind"`
		Step      int64     `json:"step"`
		Ranks     int       `json:"ranks"`
		WorldSize int       `json:"world_size"`
		Files     int       `json:"files"`
		Bytes     int64     `json:"bytes"`
		Raw       int64     `json:"raw_bytes"`    // the trainer's bytes (= bytes)
		Stored    int64     `json:"stored_bytes"` // on disk: less once compressed
		Time      time.Time `json:"time"`
		Latest    bool      `json:"latest"` // the .trainrun/latest pointer names it
		Note      string    `json:"note,omitempty"`
		// Added by issue 30: a job started now resumes from it (verified);
		// verify_error: a newer committed one that fails, skipped.
		Resume      bool   `json:"resume"`
		VerifyError string `json:"verify_error,omitempty"`
	}
	rows := []row{}
	for _, in := range list {
		rows = append(rows, row{in.Tag, in.Dir, string(in.State), string(in.Kind), in.Step, in.Ranks, in.WorldSize,
			in.Files, in.Bytes, in.Bytes, in.Stored, in.ModTime.UTC(), in.Latest, in.Note, in.Tag == resume, failed[in.Tag]})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// writeCkptListTable is `ckpt list`'s table of the checkpoints in dir, LATEST
// marking the one a job resumes from (FAILED the newer ones it skips), and
// the notes on failures and on what is not a committed trainrun checkpoint.
func writeCkptListTable(w io.Writer, dir string, list []checkpoint.Info, resume string, failed map[string]string) {
	if len(list) == 0 {
		fmt.Fprintf(w, "no checkpoints in %s\n", dir)
		return
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TAG\tSTATE\tKIND\tSTEP\tRANKS\tFILES\tSIZE\tSTORED\tAGE\tLATEST")
	now := ckptNow()
	var notes []string
	for _, in := range list {
		step, ranks, latest := "-", "-", ""
		if in.Step >= 0 {
			step = fmt.Sprint(in.Step)
		}
		if in.Kind == checkpoint.KindTrainrun {
			ranks = fmt.Sprint(in.Ranks)
			if in.WorldSize > 0 {
				ranks = fmt.Sprintf("%d/%d", in.Ranks, in.WorldSize)
			}
		}
		switch {
		case in.Tag == resume:
			latest = "latest"
		case failed[in.Tag] != "":
			latest = "FAILED"
			notes = append(notes, fmt.Sprintf("  %s: fails verification, a job resumes from %s: %s", in.Tag, cmp.Or(resume, "nothing (scratch)"), failed[in.Tag]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", in.Tag, in.State, in.Kind, step, ranks, in.Files,
			units.Bytes(in.Bytes), units.Bytes(in.Stored), age(now.Sub(in.ModTime)), latest)
		if in.Note != "" && (in.State != checkpoint.Committed || in.Kind != checkpoint.KindTrainrun) {
			notes = append(notes, fmt.Sprintf("  %s: %s", in.Tag, in.Note))
		}
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(line, " ")) // an empty LATEST column pads
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "Notes:")
		fmt.Fprintln(w, strings.Join(notes, "\n"))
	}
}

func runCkptVerify(ctx context.Context, env *runEnv, args []string) error {
	var o ckptFlags
	var all, sizes bool
	fs := newFlags("ckpt verify", "ckpt verify TAG|--all [--sizes-only] [--ckpt-dir DIR]", env.stdout)
	o.AddFlags(fs, env)
	fs.BoolVar(&all, "all", false, "verify every committed checkpoint")
	fs.BoolVar(&sizes, "sizes-only", false, "check markers and sizes, not checksums (no rereading)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if all == (fs.NArg() == 1) || fs.NArg() > 1 {
		return usageErrorf("ckpt verify needs exactly one TAG or --all (got %d arguments)", fs.NArg())
	}
	s, err := o.open()
	if err != nil {
		return err
	}
	tags := fs.Args()
	if all {
		list, err := s.List()
		if err != nil {
			return err
		}
		for _, in := range list {
			if in.State == checkpoint.Committed {
				tags = append(tags, in.Tag)
			}
		}
		if len(tags) == 0 {
			return withCode(exitcode.Checkpoint, fmt.Errorf("%s holds no committed checkpoint to verify", s.Dir()))
		}
	}
	level, how := checkpoint.Checksums, "sizes and xxh64 match"
	if sizes {
		level, how = checkpoint.Sizes, "sizes match (checksums not checked)"
	}
	// Each failure is said once, on stdout beside the ok lines; the error
	// only sums up and advises (issue 30: it repeated the first failure).
	var bad []string
	damaged := false
	for _, tag := range tags {
		m, err := s.Verify(ctx, tag, level)
		if err != nil {
			fmt.Fprintf(env.stdout, "%s: FAILED: %v\n", tag, err)
			bad = append(bad, tag)
			damaged = damaged || m.Seq > 0 // committed, now damaged
			continue
		}
		h := how
		if level == checkpoint.Checksums && !m.Sealed() {
			h = "sizes match (checksums not recorded yet: the checkpoint is being sealed)"
		}
		fmt.Fprintf(env.stdout, "%s: ok, %d files, %s, %s\n", tag, len(m.Files), units.Bytes(m.Bytes), h)
	}
	if len(bad) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s failed verification (see above)", strings.Join(bad, ", "))
	if damaged {
		msg += "; resume from an older checkpoint (trainrun ckpt latest finds it)"
	}
	return withCode(exitcode.Checkpoint, errors.New(msg))
}

func runCkptPrune(_ context.Context, env *runEnv, args []string) error {
	var o ckptFlags
	var keep int
	var every int64
	var dry bool
	fs := newFlags("ckpt prune", "ckpt prune --keep N [--keep-every STEPS] [--dry-run] [--ckpt-dir DIR]", env.stdout)
	o.AddFlags(fs, env)
	fs.IntVar(&keep, "keep", 0, "keep the newest N committed checkpoints (required, at least 1)")
	fs.Int64Var(&every, "keep-every", 0, "also keep the first checkpoint of every STEPS steps (for loss curves and scaling laws)")
	fs.BoolVar(&dry, "dry-run", false, "print what would be deleted, delete nothing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("ckpt prune takes no arguments, got %q", fs.Args())
	}
	if keep < 1 {
		return usageErrorf("--keep %d: keep at least 1 committed checkpoint (2 or more survives a corrupt newest one)", keep)
	}
	if every < 0 {
		return usageErrorf("--keep-every %d: want a step interval, or 0 for none", every)
	}
	s, err := o.open()
	if err != nil {
		return err
	}
	r := checkpoint.Retention{KeepLast: keep, KeepEvery: every}
	var del []string
	verb := "deleted"
	if dry {
		del, err = s.PrunePlan(r)
		verb = "would delete"
	} else {
		del, err = s.Prune(r)
	}
	for _, tag := range del {
		fmt.Fprintf(env.stdout, "%s %s\n", verb, tag)
	}
	if err != nil {
		return err
	}
	if len(del) == 0 {
		fmt.Fprintln(env.stdout, "nothing to prune")
	}
	return nil
}

func runCkptLatest(ctx context.Context, env *runEnv, args []string) error {
	var o ckptFlags
	var sizes, tagOnly bool
	fs := newFlags("ckpt latest", "ckpt latest [--sizes-only] [--tag] [--ckpt-dir DIR]", env.stdout)
	o.AddFlags(fs, env)
	fs.BoolVar(&sizes, "sizes-only", false, "verify markers and sizes only (no rereading)")
	fs.BoolVar(&tagOnly, "tag", false, "print the tag instead of the directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("ckpt latest takes no arguments, got %q", fs.Args())
	}
	s, err := o.open()
	if err != nil {
		return err
	}
	level := checkpoint.Checksums
	if sizes {
		level = checkpoint.Sizes
	}
	r, err := s.Latest(ctx, level)
	for _, sk := range r.Skipped {
		fmt.Fprintf(env.stderr, "trainrun: ckpt latest: skipped a newer checkpoint that fails verification: %v\n", sk)
	}
	if err != nil {
		if errors.Is(err, checkpoint.ErrNoCheckpoint) {
			return withCode(exitcode.Checkpoint, fmt.Errorf("%w: a job started now would start from scratch", err))
		}
		return err
	}
	if tagOnly {
		fmt.Fprintln(env.stdout, r.Tag)
	} else {
		fmt.Fprintln(env.stdout, r.Dir)
	}
	return nil
}

func runCkptRequest(_ context.Context, env *runEnv, args []string) error {
	var o ckptFlags
	var then, reason string
	fs := newFlags("ckpt request", "ckpt request [--then continue|stop|requeue] [--reason TEXT] [--queue] [--ckpt-dir DIR]", env.stdout)
	o.AddFlags(fs, env)
	fs.StringVar(&then, "then", "continue", "after the checkpoint: continue training, stop (no requeue) or requeue")
	fs.StringVar(&reason, "reason", "", "why, for the job's log")
	var queue bool
	fs.BoolVar(&queue, "queue", false, "write the request even when no job is running on the store: the next job to start checkpoints at once")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("ckpt request takes no arguments, got %q", fs.Args())
	}
	ok := false
	for _, t := range checkpoint.RequestThen {
		ok = ok || t == then
	}
	if !ok {
		return usageErrorf("--then %q: use one of %s", then, strings.Join(checkpoint.RequestThen, ", "))
	}
	s, err := o.open()
	if err != nil {
		return err
	}
	if why, err := requestListener(s); err != nil {
		return err
	} else if why != "" && !queue {
		return withCode(exitcode.Checkpoint, fmt.Errorf("%s (or pass --queue to leave it for the next job)", why))
	} else if why != "" {
		fmt.Fprintf(env.stderr, "trainrun: ckpt request: %s; queued for the next job (--queue)\n", why)
	}
	by := ""
	if u, err := user.Current(); err == nil {
		by = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		by += "@" + h
	}
	if err := s.PutRequest(checkpoint.Request{Then: then, Reason: reason, By: by}); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "checkpoint requested (then %s): the job's controller picks up %s within seconds\n", then, s.RequestPath())
	return nil
}

func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func runCkptDrain(ctx context.Context, env *runEnv, args []string) error {
	var o ckptFlags
	var local, node string
	var ranks []int
	var keepLocal, asJSON bool
	fs := newFlags("ckpt drain", "ckpt drain [--local DIR] [--node NAME] [--ranks LIST] [--keep-local] [--json] [--ckpt-dir DIR]", env.stdout)
	o.AddFlags(fs, env)
	fs.StringVar(&local, "local", env.getenv("TRAINRUN_CKPT_LOCAL_DIR"), "node-local checkpoint directory (env TRAINRUN_CKPT_LOCAL_DIR)")
	fs.StringVar(&node, "node", slurm.TaskFromEnv(env.getenv).Node, "this node's name for its drain record (env SLURMD_NODENAME; default the host name)")
	fs.IntSliceVar(&ranks, "ranks", nil, "this node's ranks: drain a tag only once all of them are done (default: any done rank, the last pass)")
	fs.BoolVar(&keepLocal, "keep-local", false, "keep the node-local copy after it is drained")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object: what was drained (tag, files, bytes, seconds) and what is left (the job epilog reads it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("ckpt drain takes no arguments, got %q", fs.Args())
	}
	if local == "" {
		return usageErrorf("ckpt drain: no node-local directory: pass --local DIR or set TRAINRUN_CKPT_LOCAL_DIR")
	}
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return usageErrorf("ckpt drain: no node name: pass --node NAME (%v)", err)
		}
		node = h
	}
	rep := checkpoint.DrainReport{Node: node, Local: local, Store: o.dir, Drained: []checkpoint.DrainedEntry{}, Left: []string{}}
	start := time.Now()
	var err error
	var s *checkpoint.Store
	if s, err = o.open(); err == nil {
		rep.Store = s.Dir()
		_, err = checkpoint.DrainAll(ctx, local, s, checkpoint.DrainAllOptions{
			DrainOptions: checkpoint.DrainOptions{Node: node}, Ranks: ranks, RemoveLocal: !keepLocal,
			Drained: func(tag string, r checkpoint.DrainResult) {
				rep.Drained = append(rep.Drained, checkpoint.DrainedEntry{Tag: tag, Files: r.Files, Bytes: r.Bytes, Copied: r.Copied, Seconds: r.Elapsed.Seconds()})
				if !asJSON {
					fmt.Fprintf(env.stdout, "drained %s from %s into %s (%d files, %s, %.2f s)\n", tag, local, s.Dir(), r.Files, units.Bytes(r.Bytes), r.Elapsed.Seconds())
				}
			}})
	}
	rep.Seconds = time.Since(start).Seconds()
	if ents, rerr := os.ReadDir(local); rerr == nil {
		for _, e := range ents {
			if e.IsDir() && checkpoint.CheckTag(e.Name()) == nil {
				rep.Left = append(rep.Left, e.Name())
			}
		}
	}
	if asJSON {
		if err != nil {
			rep.Error = err.Error()
		}
		if jerr := json.NewEncoder(env.stdout).Encode(rep); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		var ee *exitcode.Error
		if errors.As(err, &ee) {
			return err
		}
		return withCode(exitcode.Checkpoint, err)
	}
	if asJSON {
		return nil
	}
	if len(rep.Drained) == 0 {
		fmt.Fprintf(env.stdout, "nothing to drain in %s\n", local)
	} else {
		fmt.Fprintf(env.stdout, "%d checkpoint(s) drained in %s\n", len(rep.Drained), time.Since(start).Round(time.Millisecond))
	}
	if len(rep.Left) > 0 && !keepLocal {
		fmt.Fprintf(env.stdout, "left in %s: %s (not drained: not marked done by the ranks this pass waits for)\n", local, strings.Join(rep.Left, ", "))
	}
	return nil
}

// requestListener says whether a job's controller may be polling s for a
// `trainrun ckpt request`: "" when the newest incarnation in the store's
// history started and wrote no end (it is running, or was killed too hard
// to say so); otherwise why no job will pick the request up. A request no
// job reads would wait in the store and make the next job checkpoint at
// once (issue 30: `ckpt request` used to "succeed" with no job).
func requestListener(s *checkpoint.Store) (string, error) {
	if f, ok, err := s.Finished(); err != nil {
		return "", err
	} else if ok {
		return fmt.Sprintf("the run in %s finished (job %s, %s): no job will read the request; to train on from its checkpoint start a new run with --init-from %s/%s",
			s.Dir(), f.JobID, f.Time.UTC().Format(time.RFC3339), s.Dir(), tagOrPlaceholder(f.Tag)), nil
	}
	incs, err := s.History().Load()
	if err != nil {
		return "", err
	}
	if len(incs) == 0 {
		return fmt.Sprintf("no job has run on %s yet (its history is empty): no controller reads the request; start the job (trainrun run --ckpt-dir %s ...) first", s.Dir(), s.Dir()), nil
	}
	last := incs[len(incs)-1]
	if last.End.IsZero() {
		return "", nil
	}
	return fmt.Sprintf("no job is running on %s: the last one (job %s, restart %d) ended %s (%s); no controller reads the request until a job starts again",
		s.Dir(), last.JobID, last.Restart, last.End.UTC().Format(time.RFC3339), last.Cause), nil
}

func tagOrPlaceholder(s string) string {
	if s == "" {
		return "TAG"
	}
	return s
}

// resumeMarks is what `ckpt list` marks: the checkpoint a job started now
// would resume from, verified the way `trainrun run` and `ckpt latest` do
// (rereading its files unless sizesOnly), and the newer committed ones it
// skips because they fail, each with why. The .trainrun/latest pointer
// alone would name a checkpoint that fails (issue 30: list said "latest"
// of the checkpoint `ckpt latest` skipped).
func resumeMarks(ctx context.Context, s *checkpoint.Store, sizesOnly bool) (resume string, failed map[string]string, err error) {
	level := checkpoint.Checksums
	if sizesOnly {
		level = checkpoint.Sizes
	}
	r, err := s.Latest(ctx, level)
	if err != nil && !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return "", nil, err
	}
	failed = map[string]string{}
	for _, sk := range r.Skipped {
		failed[sk.Tag] = sk.Error()
	}
	if err != nil {
		return "", failed, nil
	}
	return r.Tag, failed, nil
}
