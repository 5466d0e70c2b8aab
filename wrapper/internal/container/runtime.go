package container

import (
	"slices"
	"strconv"
	"strings"
)

// Run is the runtime prefix as the launch files carry it (common.json
// "container"): what the shim, on the host, needs to start its rank's
// trainer through the runtime.
type Run struct {
	Runtime string   `json:"runtime"` // podman, apptainer or enroot
	Image   string   `json:"image"`
	Mounts  []string `json:"mounts,omitempty"` // SRC:DST[:FLAGS], flags joined with +: the user's, the site's, then trainrun's
	Workdir string   `json:"workdir,omitempty"`
	Env     []string `json:"env,omitempty"` // --container-env: names passed even where the deny list would keep them out
}

// RunOf is spec's runtime prefix with binds (trainrun's own directories)
// mounted after the user's and the site's; nil under pyxis or without a
// container.
func RunOf(spec Spec, binds []Mount) *Run {
	if !spec.On() || spec.Runtime == "" {
		return nil
	}
	r := &Run{Runtime: spec.Runtime, Image: spec.Image(), Workdir: spec.Get("container-workdir")}
	for _, m := range slices.Concat(spec.Mounts, binds) {
		r.Mounts = append(r.Mounts, m.String())
	}
	if v := spec.Get("container-env"); v != "" {
		r.Env = strings.Split(v, ",")
	}
	return r
}

// denyEnv are the variables the host does not pass into the container
// unless --container-env names them: the image's own win, as under pyxis
// (its enroot_deny_env list; testdata/pyxis-notes.md). A host PATH would
// hide the image's python.
var denyEnv = []string{"PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "HOME", "HOSTNAME", "TERM"}

// Names are the names of envl's variables that go into the container.
func (r *Run) Names(envl []string) []string {
	var names []string
	for _, kv := range envl {
		k, _, _ := strings.Cut(kv, "=")
		if k == "" || slices.Contains(denyEnv, k) && !slices.Contains(r.Env, k) {
			continue
		}
		names = append(names, k)
	}
	return names
}

// Host is what the shim found on its node for the prefix.
type Host struct {
	Name  string // the container's name (podman): one per job and rank, so a relaunch replaces a leftover
	GPU   bool   // the rank drives a GPU (CUDA_VISIBLE_DEVICES is set)
	CDI   bool   // the node has an NVIDIA CDI spec (/etc/cdi, /var/run/cdi): podman --device nvidia.com/gpu=all
	Extra int    // file descriptors beyond 0-2 the trainer inherits (the heartbeat pipe): podman --preserve-fds
	// PIDFile: podman writes the trainer's PID here (--pidfile; with
	// --pid=host a host PID), so the shim watches the trainer's own
	// state (a SIGSTOP shows as stopped, T) rather than podman's.
	PIDFile string
}

// Argv is the command the shim starts for argv (the training command)
// under r, the rank's environment envl given to the runtime's own process
// (each variable is passed by name: podman -e NAME and enroot --env NAME
// take the value from it, so no value is written anywhere), and, for each
// runtime, what keeps trainrun's guarantees:
//   - podman: --network=host and --ipc=host (the control channel, NCCL's
//     sockets and shared memory), --pid=host (the trainer is not the
//     namespace's init, which ignores signals it has no handler for, and its
//     /proc entry is the host's), --preserve-fds (the heartbeat pipe),
//     --sig-proxy (podman's default: the checkpoint signal and SIGTERM
//     reach the trainer), --replace (a container left by a killed shim is
//     removed by the next launch, after --stop-timeout: trainrun has
//     given up on it by then), --rm; an absolute path is a root file
//     system (--rootfs), not an image;
//   - apptainer exec: runs in the shim's process tree (signals and file
//     descriptors pass as to any child); --nv binds the driver;
//   - enroot start: the same, the image a squashfs file or an enroot
//     container name.
func (r *Run) Argv(argv, envl []string, h Host) []string {
	names := r.Names(envl)
	switch r.Runtime {
	case "apptainer":
		out := []string{"apptainer", "exec"}
		if h.GPU {
			out = append(out, "--nv")
		}
		if len(r.Mounts) > 0 {
			out = append(out, "--bind", strings.Join(apptainerBinds(r.Mounts), ","))
		}
		if r.Workdir != "" {
			out = append(out, "--pwd", r.Workdir)
		}
		return slices.Concat(out, []string{r.Image}, argv)
	case "enroot":
		out := []string{"enroot", "start"}
		for _, m := range r.Mounts {
			out = append(out, "--mount", strings.ReplaceAll(m, "+", ","))
		}
		for _, n := range names {
			out = append(out, "--env", n)
		}
		return slices.Concat(out, []string{r.Image}, argv)
	}
	out := []string{"podman", "run", "--rm", "--replace", "--stop-timeout=1", "--name", h.Name, "--network=host", "--ipc=host", "--pid=host"}
	if h.PIDFile != "" {
		out = append(out, "--pidfile", h.PIDFile)
	}
	if h.Extra > 0 {
		out = append(out, "--preserve-fds="+strconv.Itoa(h.Extra))
	}
	if h.GPU && h.CDI {
		out = append(out, "--device", "nvidia.com/gpu=all")
	}
	for _, m := range r.Mounts {
		out = append(out, "-v", strings.ReplaceAll(m, "+", ","))
	}
	if r.Workdir != "" {
		out = append(out, "--workdir", r.Workdir)
	}
	for _, n := range names {
		out = append(out, "-e", n)
	}
	if strings.HasPrefix(r.Image, "/") {
		out = append(out, "--rootfs") // a directory: the container's root file system, as it is
	}
	return slices.Concat(out, []string{r.Image}, argv)
}

// apptainerBinds are mounts as apptainer --bind takes them: SRC:DST with
// ro or rw only (pyxis's other flags have no apptainer spelling).
func apptainerBinds(mounts []string) []string {
	out := make([]string, len(mounts))
	for i, m := range mounts {
		src, rest, _ := strings.Cut(m, ":")
		dst, flags, _ := strings.Cut(rest, ":")
		out[i] = src + ":" + dst
		if slices.Contains(strings.Split(flags, "+"), "ro") {
			out[i] += ":ro"
		}
	}
	return out
}

// ContainerName is the podman container's name for a job's rank.
func ContainerName(jobID string, rank int) string {
	return "trainrun-" + jobID + "-" + strconv.Itoa(rank)
}
