package run

import (
	"context"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// --container-image without --container-runtime needs pyxis in srun: a
// clear error naming the image and both ways out when srun --help does
// not list --container-image, none when it does.
func TestContainerImageNeedsPyxis(t *testing.T) {
	c, _, err := completeWith(t, []string{"--container-image", "nvcr.io#nvidia/pytorch:24.01-py3"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	c.shim = "/opt/trainrun/bin/trainrun-shim"
	without := &slurm.Canned{Out: map[string]string{"srun --help": "Usage: srun [OPTIONS(0)...]\n      --mpi=type   type of MPI being used\n"}}
	err = checkPyxis(context.Background(), &c, slurm.Client{Run: without.Run})
	if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "--container-image nvcr.io#nvidia/pytorch:24.01-py3: srun has no --container-image here (pyxis is not loaded") ||
		!strings.Contains(err.Error(), "--container-runtime podman|apptainer|enroot") {
		t.Errorf("without pyxis: %v (exit %d)", err, exitcode.Of(err))
	}
	with := &slurm.Canned{Out: map[string]string{"srun --help": "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n                              [pyxis] the image to use\n"}}
	if err := checkPyxis(context.Background(), &c, slurm.Client{Run: with.Run}); err != nil {
		t.Errorf("with pyxis: %v", err)
	}
	c.shim = ""
	if err := checkPyxis(context.Background(), &c, slurm.Client{Run: with.Run}); err == nil || !strings.Contains(err.Error(), "trainrun-shim is not installed") {
		t.Errorf("no lean shim: %v", err)
	}
	// A runtime prefix does not need pyxis; no container asks nothing.
	for _, args := range [][]string{{"--container-image", "localhost/t:1", "--container-runtime", "podman"}, nil} {
		c, _, err := completeWith(t, args, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		calls := &slurm.Canned{}
		if err := checkPyxis(context.Background(), &c, slurm.Client{Run: calls.Run}); err != nil || len(calls.Calls) > 0 {
			t.Errorf("%v: %v, srun asked %v", args, err, calls.Calls)
		}
	}
}

// The step's srun does not see PYXIS_CONTAINER_*: trainrun passes the
// options itself, or the step stays on the host.
func TestStepEnviron(t *testing.T) {
	got := stepEnviron([]string{"PATH=/bin", "PYXIS_CONTAINER_IMAGE=x", "PYXIS_CONTAINER_MOUNTS=/a", "PYXIS_RUNTIME_PATH=/run/pyxis"})
	if strings.Join(got, " ") != "PATH=/bin PYXIS_RUNTIME_PATH=/run/pyxis" {
		t.Errorf("%v", got)
	}
}

// The site's container rules reach the run: its image by default, its
// mounts and registries, its SrunArgs checked, the user's --srun-arg
// checked and in place of the site's.
func TestCompleteContainerPolicy(t *testing.T) {
	conf := "ContainerImage=nvcr.io\\#nvidia/pytorch:24.01-py3 ContainerMounts=/datasets:/datasets:ro ContainerRegistries=nvcr.io SrunArgs=--mpi=pmix UserOverride=SrunArgs\n"
	c, _, err := completeWith(t, nil, nil, conf)
	if err != nil {
		t.Fatal(err)
	}
	if c.container.Describe() != "nvcr.io#nvidia/pytorch:24.01-py3 (pyxis)" || len(c.container.Mounts) != 1 || strings.Join(c.srunArgs, " ") != "--mpi=pmix" {
		t.Errorf("site defaults: %s %v %v", c.container.Describe(), c.container.Mounts, c.srunArgs)
	}
	if c, _, err = completeWith(t, []string{"--srun-arg=--network=sn_all"}, nil, conf); err != nil || strings.Join(c.srunArgs, " ") != "--network=sn_all" {
		t.Errorf("user's --srun-arg: %v %v", c.srunArgs, err)
	}
	for _, tc := range []struct {
		args []string
		conf string
		want string
	}{
		{[]string{"--container-image", "docker.io#library/ubuntu:22.04"}, conf, "its registry docker.io is not one the site allows (ContainerRegistries=nvcr.io)"},
		{[]string{"--srun-arg=--ntasks=3"}, conf, `--srun-arg "--ntasks=3": trainrun sets srun's --ntasks itself`},
		{nil, "SrunArgs=--export=NONE\n", `trainrun.conf:1)) "--export=NONE": trainrun sets srun's --export itself`},
		{[]string{"--srun-arg=--mpi=pmix"}, "UserOverride=none\n", "does not let users override SrunArgs"},
		{[]string{"--container-workdir", "/w"}, "", "--container-workdir given without --container-image"},
		{[]string{"--container-image", "x", "--container-unshare", "net"}, "", "need the host's network namespace"},
	} {
		_, _, err := completeWith(t, tc.args, nil, tc.conf)
		if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v with %q: %v (exit %d), want %q", tc.args, tc.conf, err, exitcode.Of(err), tc.want)
		}
	}
}

// Under pyxis the step's srun carries the container options and
// trainrun's binds (the shim read-only, then the job directory, the store
// unless it lies inside the job directory, and the node-local directory's
// fixed part); with a runtime only the launch files carry the prefix.
func TestStepContainerArgs(t *testing.T) {
	c, _, err := completeWith(t, []string{"--container-image", "nvcr.io#nvidia/pytorch:24.01-py3", "--container-mounts", "/data:/data:ro", "--container-mounts", "/models", "--srun-arg=--mpi=pmix",
		"--ckpt-local-dir", "/dev/shm/trainrun-%j"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	c.shim = "/opt/bin/trainrun-shim"
	r := &runner{cfg: c, dirs: runDirs{jobDir: "/lustre/u/trainrun-42", ckptDir: "/lustre/u/trainrun-42/checkpoints"}}
	got := strings.Join(r.stepExtra(), " ")
	want := "--container-image=nvcr.io#nvidia/pytorch:24.01-py3 --container-mounts=/data:/data:ro,/models:/models,/opt/bin/trainrun-shim:/opt/bin/trainrun-shim:ro,/lustre/u/trainrun-42:/lustre/u/trainrun-42,/dev/shm:/dev/shm --mpi=pmix"
	if got != want {
		t.Errorf("pyxis srun options:\n got %s\nwant %s", got, want)
	}
	if r.containerRun() != nil {
		t.Error("pyxis: the launch files carry a runtime prefix")
	}
	c, _, _ = completeWith(t, []string{"--container-image", "localhost/t:1", "--container-runtime", "podman"}, nil, "")
	r = &runner{cfg: c, dirs: runDirs{jobDir: "/j", ckptDir: "/ckpt"}}
	if len(r.stepExtra()) != 0 {
		t.Errorf("podman: srun options %v", r.stepExtra())
	}
	if run := r.containerRun(); run == nil || run.Runtime != "podman" || strings.Join(run.Mounts, ",") != "/j:/j,/ckpt:/ckpt" {
		t.Errorf("podman: prefix %+v", run)
	}
}

// The records name the image and runtime: the history's start event
// ("IMAGE (runtime)"), the observer and the observation ("image",
// "runtime"), the summary; nothing without a container.
func TestContainerRecords(t *testing.T) {
	c, _, err := completeWith(t, []string{"--container-image", "localhost/t:1", "--container-runtime", "podman", "--srun-arg=--mpi=pmix"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: c}
	if img, rt := r.containerRecord(); img != "localhost/t:1" || rt != "podman" || r.containerHistory() != "localhost/t:1 (podman)" {
		t.Errorf("records: %q %q %q", img, rt, r.containerHistory())
	}
	if s := r.containerSummary(); !strings.Contains(s, "  container   localhost/t:1 (the shim starts each trainer through podman; from --container-image)\n") ||
		!strings.Contains(s, "  srun adds   --mpi=pmix (--srun-arg)\n") {
		t.Errorf("summary:\n%s", s)
	}
	c, _, _ = completeWith(t, nil, nil, "")
	r = &runner{cfg: c}
	if img, _ := r.containerRecord(); img != "" || r.containerHistory() != "" || r.containerSummary() != "" {
		t.Errorf("no container: %q %q %q", img, r.containerHistory(), r.containerSummary())
	}
}
