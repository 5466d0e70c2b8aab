package main

import (
	"context"
	"errors"

	"github.com/trainrun/trainrun/checkpoint"
)

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
