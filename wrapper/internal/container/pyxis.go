package container

import (
	"fmt"
	"slices"
	"strings"
)

// Option is one of pyxis's srun options (testdata/pyxis-notes.md, from
// NVIDIA/pyxis args.c at 1075199). trainrun run takes each under the same
// name, with pyxis's own environment variable as its twin, and passes it to
// its srun as pyxis spells it.
type Option struct {
	Name string // the option without "--": "container-image"
	Arg  bool   // takes a value (else a switch)
	Neg  string // the switch's opposite ("no-container-mount-home"); "" none
	Env  string // pyxis's environment fallback, trainrun's twin
	Use  string // the flag's help
}

// Options are pyxis's options in the order trainrun writes them on srun's
// command line (the goldens in testdata fix that order).
var Options = []Option{
	{Name: "container-image", Arg: true, Env: "PYXIS_CONTAINER_IMAGE", Use: "run every rank in this container image: [USER@][REGISTRY#]IMAGE[:TAG] or a squashfs path (pyxis; with --container-runtime, that runtime's image reference)"},
	{Name: "container-mounts", Arg: true, Env: "PYXIS_CONTAINER_MOUNTS", Use: "bind mounts SRC:DST[:FLAGS][,SRC:DST...], flags joined with + (ro+rprivate), as pyxis takes them; trainrun adds its own (the shim, the job and checkpoint directories)"},
	{Name: "container-workdir", Arg: true, Env: "PYXIS_CONTAINER_WORKDIR", Use: "working directory inside the container"},
	{Name: "container-name", Arg: true, Env: "PYXIS_CONTAINER_NAME", Use: "name under which pyxis keeps the container on each node and reuses it (import skipped)"},
	{Name: "container-save", Arg: true, Env: "PYXIS_CONTAINER_SAVE", Use: "pyxis: save the container's state to this squashfs file"},
	{Name: "container-mount-home", Neg: "no-container-mount-home", Env: "PYXIS_CONTAINER_MOUNT_HOME", Use: "pyxis: bind-mount the user's home (--no-container-mount-home: do not)"},
	{Name: "container-remap-root", Neg: "no-container-remap-root", Env: "PYXIS_CONTAINER_REMAP_ROOT", Use: "pyxis: be root inside the container, without privileges (--no-container-remap-root: do not)"},
	{Name: "container-entrypoint", Neg: "no-container-entrypoint", Env: "PYXIS_CONTAINER_ENTRYPOINT", Use: "pyxis: run the image's entrypoint first (--no-container-entrypoint: do not)"},
	{Name: "container-entrypoint-log", Env: "PYXIS_CONTAINER_ENTRYPOINT_LOG", Use: "pyxis: print the entrypoint's output"},
	{Name: "container-writable", Neg: "container-readonly", Env: "PYXIS_CONTAINER_WRITABLE", Use: "pyxis: make the container's root file system writable (--container-readonly: read-only)"},
	{Name: "container-env", Arg: true, Env: "PYXIS_CONTAINER_ENV", Use: "NAME[,NAME...]: these variables of the rank's environment override the image's (pyxis: set before the entrypoint)"},
	{Name: "container-unshare", Arg: true, Env: "PYXIS_CONTAINER_UNSHARE", Use: "pyxis: new namespaces for the container: ipc, uts (not net: the control channel and NCCL need the host network)"},
}

// Setting is one option's resolved value: for a switch "yes" or "no".
type Setting struct {
	Name  string
	Value string
	From  string // where it came from, for messages: "--container-image", "PYXIS_CONTAINER_IMAGE", "the policy's ContainerImage (...)"
}

// Spec is the container a run's ranks run in. The zero Spec is none.
type Spec struct {
	Runtime  string    // "" pyxis; else podman, apptainer or enroot (Runtimes)
	Settings []Setting // in Options order, the set ones only
	Mounts   []Mount   // --container-mounts and the policy's ContainerMounts, parsed
}

// On says that the run uses a container.
func (s Spec) On() bool { return s.Image() != "" }

// Pyxis says that the container comes from pyxis (srun's options).
func (s Spec) Pyxis() bool { return s.On() && s.Runtime == "" }

// Get is the value of option name ("" unset).
func (s Spec) Get(name string) string {
	for _, st := range s.Settings {
		if st.Name == name {
			return st.Value
		}
	}
	return ""
}

// Image is the image reference.
func (s Spec) Image() string { return s.Get("container-image") }

// Describe is the image and how it runs, for the summary, report and
// --explain: "nvcr.io#nvidia/pytorch:24.01-py3 (pyxis)".
func (s Spec) Describe() string {
	if !s.On() {
		return "none"
	}
	rt := s.Runtime
	if rt == "" {
		rt = "pyxis"
	}
	return s.Image() + " (" + rt + ")"
}

// Mount is one bind mount, as pyxis's --container-mounts writes it.
type Mount struct {
	Src, Dst string
	Flags    []string // enroot's mount flags ("ro", "rprivate"); pyxis joins them with +
}

func (m Mount) String() string {
	s := m.Src + ":" + m.Dst
	if len(m.Flags) > 0 {
		s += ":" + strings.Join(m.Flags, "+")
	}
	return s
}

// ReadOnly says that the mount has the ro flag.
func (m Mount) ReadOnly() bool { return slices.Contains(m.Flags, "ro") }

// ParseMounts reads SRC:DST[:FLAGS][,SRC:DST...] as pyxis does (SRC alone
// is SRC:SRC; SRC a path, tmpfs or umount; DST a path); what names the
// value in messages.
func ParseMounts(v, what string) ([]Mount, error) {
	var out []Mount
	for _, e := range strings.Split(v, ",") {
		if e == "" {
			return nil, fmt.Errorf("%s %q: an empty mount; want SRC:DST[:FLAGS][,SRC:DST...]", what, v)
		}
		src, rest, _ := strings.Cut(e, ":")
		dst, flags, _ := strings.Cut(rest, ":")
		if dst == "" {
			if strings.Contains(e, ":") {
				return nil, fmt.Errorf("%s %q: mount %q has no destination; want SRC:DST[:FLAGS]", what, v, e)
			}
			dst = src
		}
		if !strings.HasPrefix(src, "/") && !strings.HasPrefix(src, ".") && src != "tmpfs" && src != "umount" {
			return nil, fmt.Errorf("%s %q: mount source %q is not a path (or tmpfs, umount), as pyxis requires; give an absolute path", what, v, src)
		}
		if !strings.HasPrefix(dst, "/") && !strings.HasPrefix(dst, ".") {
			return nil, fmt.Errorf("%s %q: mount destination %q is not a path; give an absolute path", what, v, dst)
		}
		m := Mount{Src: src, Dst: dst}
		if flags != "" {
			m.Flags = strings.Split(flags, "+")
		}
		out = append(out, m)
	}
	return out, nil
}

// PyxisArgs are the srun options for spec under pyxis: every option set,
// as pyxis spells it, in Options order; --container-mounts carries the
// user's and the site's mounts, then binds (trainrun's own, each at the
// same path inside, so that the launch files' paths hold there).
func PyxisArgs(spec Spec, binds []Mount) []string {
	var argv []string
	mounts := slices.Concat(spec.Mounts, binds)
	for _, o := range Options {
		v := spec.Get(o.Name)
		switch {
		case o.Name == "container-mounts":
			if len(mounts) > 0 {
				s := make([]string, len(mounts))
				for i, m := range mounts {
					s[i] = m.String()
				}
				argv = append(argv, "--container-mounts="+strings.Join(s, ","))
			}
		case v == "":
		case o.Arg:
			argv = append(argv, "--"+o.Name+"="+v)
		case v == "yes":
			argv = append(argv, "--"+o.Name)
		case o.Neg != "":
			argv = append(argv, "--"+o.Neg)
		}
	}
	return argv
}

// HasPyxis says whether srun's --help text lists pyxis's --container-image
// (the check pyxis's own installation guide gives: the plugin loaded).
func HasPyxis(srunHelp string) bool {
	return strings.Contains(srunHelp, "--container-image")
}

// ParseBool reads a switch's environment value as pyxis does (config.c
// parse_bool): 1 true yes y, 0 false no n; ok false otherwise.
func ParseBool(v string) (yes, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "y":
		return true, true
	case "0", "false", "no", "n":
		return false, true
	}
	return false, false
}
