package launch

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/container"
)

var updatePyxis = flag.Bool("update-pyxis", false, "rewrite testdata/pyxis/*.golden")

// pyxisBinds are the mounts trainrun adds under pyxis (run's containerBinds
// makes them): the shim read-only, the job and checkpoint directories and
// the node-local directory writable, each at its host path.
var pyxisBinds = []container.Mount{
	{Src: "/opt/trainrun/bin/trainrun-shim", Dst: "/opt/trainrun/bin/trainrun-shim", Flags: []string{"ro"}},
	{Src: "/lustre/u/job-7", Dst: "/lustre/u/job-7"},
	{Src: "/lustre/u/ckpt", Dst: "/lustre/u/ckpt"},
	{Src: "/dev/shm/trainrun-7", Dst: "/dev/shm/trainrun-7"},
}

// TestPyxisSrunArgv fixes the exact srun command line for each of pyxis's
// options (names and spellings from container/testdata/pyxis-notes.md):
// one golden file per case, go test -update-pyxis rewrites them.
func TestPyxisSrunArgv(t *testing.T) {
	img := "nvcr.io#nvidia/pytorch:24.01-py3"
	cases := []struct {
		name  string
		flags map[string]string
		env   map[string]string
	}{
		{"image", map[string]string{"container-image": img}, nil},
		{"image-from-env", nil, map[string]string{"PYXIS_CONTAINER_IMAGE": img}},
		{"mounts", map[string]string{"container-image": img, "container-mounts": "/data:/data:ro+rprivate,/scratch"}, nil},
		{"workdir", map[string]string{"container-image": img, "container-workdir": "/workspace"}, nil},
		{"name", map[string]string{"container-image": img, "container-name": "nemo"}, nil},
		{"save", map[string]string{"container-image": img, "container-save": "/lustre/u/nemo.sqsh"}, nil},
		{"mount-home", map[string]string{"container-image": img, "container-mount-home": "yes"}, nil},
		{"no-mount-home", map[string]string{"container-image": img, "container-mount-home": "no"}, nil},
		{"remap-root", map[string]string{"container-image": img, "container-remap-root": "yes"}, nil},
		{"no-remap-root-env", map[string]string{"container-image": img}, map[string]string{"PYXIS_CONTAINER_REMAP_ROOT": "n"}},
		{"entrypoint", map[string]string{"container-image": img, "container-entrypoint": "yes", "container-entrypoint-log": "yes"}, nil},
		{"no-entrypoint", map[string]string{"container-image": img, "container-entrypoint": "no"}, nil},
		{"writable", map[string]string{"container-image": img, "container-writable": "yes"}, nil},
		{"readonly", map[string]string{"container-image": img, "container-writable": "no"}, nil},
		{"env", map[string]string{"container-image": img, "container-env": "NCCL_DEBUG,HF_HOME"}, nil},
		{"unshare", map[string]string{"container-image": img, "container-unshare": "ipc,uts"}, nil},
		{"flag-beats-env", map[string]string{"container-image": img, "container-workdir": "/flag"}, map[string]string{"PYXIS_CONTAINER_WORKDIR": "/env"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			flags := c.flags
			if flags == nil {
				flags = map[string]string{}
			}
			spec, err := container.Resolve(container.Given{Flags: flags, Getenv: func(k string) string { return c.env[k] }})
			if err != nil {
				t.Fatal(err)
			}
			argv, _ := SrunCommand(StepSpec{Self: "/opt/trainrun/bin/trainrun", Shim: "/opt/trainrun/bin/trainrun-shim", LaunchDir: "/lustre/u/job-7/launch",
				Nodes: 2, Tasks: 16, PerNode: 8, Extra: container.PyxisArgs(spec, pyxisBinds), Argv: []string{"python", "pretrain.py"}})
			got := strings.Join(argv, "\n") + "\n"
			path := filepath.Join("testdata", "pyxis", c.name+".golden")
			if *updatePyxis {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update-pyxis writes it)", err)
			}
			if got != string(want) {
				t.Errorf("srun argv, one per line:\n%s\nwant (%s):\n%s", got, path, want)
			}
		})
	}
}
