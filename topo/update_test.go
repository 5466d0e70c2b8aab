package topo

import "flag"

// update rewrites golden files and, where scontrol runs, the captured Slurm
// outputs. One flag for the whole package's tests.
var update = flag.Bool("update", false, "rewrite golden files under testdata and, where scontrol runs, the captured Slurm outputs")
