// Command trainrun is the composition root: it reads Slurm's environment, builds
// the real adapters (sysfs, NVML, srun, scontrol), runs the planner and the
// checkpoint lifecycle, and owns signals and exit codes.
package main
