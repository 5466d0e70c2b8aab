package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// modelExports are the plugin twins TRAINRUN_MODEL and TRAINRUN_BATCH of
// the model submit planned, exported with TRAINRUN_PLAN: `trainrun run` in
// the job then knows the model beside the plan file, so {megatron_args} is
// the plan's full set (the model's flags too) and the placement weighs the
// plan's traffic, as planning in the job does. None when the model was given
// by its shape (--layers ...) or its name holds a comma (sbatch --export
// separates variables with commas).
func modelExports(po *planOptions) []string {
	shape := po.Layers != 0 || po.Hidden != 0 || po.Heads != 0 || po.FFN != 0 || po.Vocab != 0 || po.Experts != 0
	if po.Model == "" || shape || po.SeqLen <= 0 || po.GlobalBatch <= 0 {
		return nil
	}
	model := po.Model
	if _, err := os.Stat(model); err == nil {
		if abs, err := filepath.Abs(model); err == nil {
			model = abs // a config.json: the job may start elsewhere
		}
	}
	if strings.ContainsAny(model, ",=") {
		return nil
	}
	return []string{"TRAINRUN_MODEL=" + model, fmt.Sprintf("TRAINRUN_BATCH=%dx%d", po.GlobalBatch, po.SeqLen)}
}
