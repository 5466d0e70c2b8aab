package main

import (
	"context"
	"fmt"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// `trainrun ckpt compress` and `trainrun ckpt restore` (issue 17): the
// store's lossless compression of committed checkpoints, on demand.

const ckptCompressHelp = `  compress TAG|--all [--workers N]
                       compress a committed checkpoint's tensor files losslessly (TAG), or every
                       committed one but the newest (--all: the pass trainrun run makes after
                       each commit); a file keeps its name with .trz and verifies as before
  restore TAG [--to DIR] [--workers N]
                       decompress TAG: in place (the store keeps it raw), or into DIR with the
                       exact bytes the trainer wrote (node-local staging, or a copy to inspect)`

func runCkptCompress(ctx context.Context, env *runEnv, args []string) error {
	var o ckptFlags
	var all bool
	var workers int
	fs := newFlags("ckpt compress", "ckpt compress TAG|--all [--workers N] [--ckpt-dir DIR]", env.stdout)
	o.AddFlags(fs, env)
	fs.BoolVar(&all, "all", false, "every committed checkpoint except the newest (it stays raw for the fastest resume)")
	fs.IntVar(&workers, "workers", 0, "parallel coders (default: all cores)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if all == (fs.NArg() == 1) || fs.NArg() > 1 {
		return usageErrorf("ckpt compress needs exactly one TAG or --all (got %d arguments)", fs.NArg())
	}
	if workers < 0 {
		return usageErrorf("--workers %d: want a number of coders, or 0 for all cores", workers)
	}
	s, err := o.open()
	if err != nil {
		return err
	}
	co := checkpoint.CompressOptions{Workers: workers}
	var res []checkpoint.CompressResult
	if all {
		res, err = s.CompressRetained(ctx, co)
	} else {
		var r checkpoint.CompressResult
		r, err = s.Compress(ctx, fs.Arg(0), co)
		res = append(res, r)
	}
	for _, r := range res {
		fmt.Fprintf(env.stdout, "%s: %d files compressed, %s stored for %s (%.1f%%) in %.1fs\n", r.Tag, r.Files,
			units.Bytes(r.StoredBytes), units.Bytes(r.RawBytes), 100*float64(r.StoredBytes)/float64(max(r.RawBytes, 1)), r.Elapsed.Seconds())
	}
	if all && len(res) == 0 && err == nil {
		fmt.Fprintln(env.stdout, "nothing to compress (the newest checkpoint stays raw)")
	}
	if err != nil {
		return withCode(exitcode.Checkpoint, err)
	}
	return nil
}

func runCkptRestore(ctx context.Context, env *runEnv, args []string) error {
	var o ckptFlags
	var to string
	var workers int
	fs := newFlags("ckpt restore", "ckpt restore TAG [--to DIR] [--workers N] [--ckpt-dir DIR]", env.stdout)
	o.AddFlags(fs, env)
	fs.StringVar(&to, "to", "", "write the checkpoint's files under DIR instead of decompressing in place")
	fs.IntVar(&workers, "workers", 0, "parallel decoders (default: all cores)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("ckpt restore needs exactly one TAG (got %d arguments)", fs.NArg())
	}
	if workers < 0 {
		return usageErrorf("--workers %d: want a number of decoders, or 0 for all cores", workers)
	}
	s, err := o.open()
	if err != nil {
		return err
	}
	n, err := s.Restore(ctx, fs.Arg(0), to, workers)
	if err != nil {
		return withCode(exitcode.Checkpoint, err)
	}
	where := s.TagDir(fs.Arg(0)) + " (in place)"
	if to != "" {
		where = to
	}
	fmt.Fprintf(env.stdout, "%s: %s restored to %s, checked against the manifest's xxh64\n", fs.Arg(0), units.Bytes(n), where)
	return nil
}
