package main

import (
	_ "github.com/spf13/pflag"
	_ "github.com/trainrun/trainrun/checkpoint"
	_ "github.com/trainrun/trainrun/internal/slurm"
	_ "github.com/trainrun/trainrun/topo"
	_ "github.com/trainrun/trainrun/topo/nvml"
	_ "github.com/trainrun/trainrun/wrapper/internal/health"
	_ "github.com/trainrun/trainrun/wrapper/internal/launch"
)

func main() {}
