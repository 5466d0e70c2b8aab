package run

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/plan/policy"
)

// The run controller's compression hooks (issue 17, CkptCompress): the logic
// is checkpoint.Background's; these are the call sites' one-liners.

// bgCompress holds each store's background pass (one controller per store).
var bgCompress sync.Map // store dir -> *checkpoint.Background

// compressKick starts the background compression of the retained older
// checkpoints after a commit (CkptCompress archive, auto or always); with
// wait, it also waits for the pass, as at the end of a finished run.
func (r *runner) compressKick(wait bool) {
	if r.ckpt.store == nil || r.cfg.compress == "" || r.cfg.compress == "no" {
		return
	}
	v, _ := bgCompress.LoadOrStore(r.ckpt.store.Dir(), r.ckpt.store.NewBackground(checkpoint.CompressOptions{}, r.logf))
	bg := v.(*checkpoint.Background)
	bg.Kick(context.Background())
	if wait {
		bg.Wait()
	}
}

// setCompressMode records the run's mode in the store, where every drain of
// its checkpoints (the shims, the epilog's) reads it.
func (r *runner) setCompressMode() {
	if err := r.ckpt.store.SetCompressMode(r.cfg.compress); err != nil {
		r.logf("warning: checkpoints will be drained raw: %v", err)
	}
}

// checkCompressMode validates --ckpt-compress.
func checkCompressMode(v string) error {
	if !slices.Contains(policy.CompressModes, v) {
		return usageErrorf("--ckpt-compress %q: use one of %s", v, strings.Join(policy.CompressModes, ", "))
	}
	return nil
}
