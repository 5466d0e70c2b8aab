// Package container owns how a training step runs in a container: pyxis's
// srun options (their names, environment twins and srun argv, from
// testdata/pyxis-notes.md), the runtime prefix for sites without pyxis
// (podman, apptainer, enroot: the command the shim starts the trainer
// with), the site's image rules (default image, allowed registries, mounts
// every job gets) and the srun options users may add (--srun-arg). Pure: no
// I/O, no exec; the shim (lean, static) and the run controller both use it.
package container
