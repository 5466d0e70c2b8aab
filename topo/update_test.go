package topo

import "github.com/trainrun/trainrun/internal/golden"

// update: -update (internal/golden) rewrites the golden files and, where
// scontrol runs, the captured Slurm outputs.
var update = golden.Update
