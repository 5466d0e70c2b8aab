package container

import (
	"fmt"
	"slices"
	"strings"
)

// Runtimes are the --container-runtime values besides pyxis: the shim runs
// on the host and starts the trainer through one of them (runtime.go).
var Runtimes = []string{"podman", "apptainer", "enroot"}

// pyxisOnly are options only pyxis understands: with a runtime prefix they
// are refused rather than ignored.
var pyxisOnly = []string{"container-save", "container-mount-home", "container-remap-root", "container-entrypoint", "container-entrypoint-log", "container-writable", "container-unshare"}

// Given is what the command line and the environment hold for the
// container options, before the site's policy: Flags (option name → value,
// "yes"/"no" for a switch) for those given on the command line, Getenv for
// the twins.
type Given struct {
	Flags   map[string]string
	Runtime string // --container-runtime (or its twin), "" or "pyxis" for pyxis
	RtFrom  string // where Runtime came from, for messages
	Getenv  func(string) string
}

// Resolve makes the Spec: each option from its flag, else pyxis's
// environment variable (the twin; as pyxis itself reads it), and checks
// values the way pyxis would refuse them, earlier and naming the input.
func Resolve(g Given) (Spec, error) {
	var s Spec
	s.Runtime = g.Runtime
	if s.Runtime == "pyxis" {
		s.Runtime = ""
	}
	if s.Runtime != "" && !slices.Contains(Runtimes, s.Runtime) {
		return s, fmt.Errorf("%s %q: want pyxis (srun's --container-* options), %s", g.RtFrom, g.Runtime, strings.Join(Runtimes, ", "))
	}
	for _, o := range Options {
		v, from := g.Flags[o.Name], "--"+o.Name
		if _, ok := g.Flags[o.Name]; !ok {
			if v, from = g.Getenv(o.Env), o.Env; v != "" && !o.Arg {
				yes, ok := ParseBool(v)
				if !ok {
					return s, fmt.Errorf("%s=%s: want 1, true, yes, y, 0, false, no or n (as pyxis reads it)", o.Env, v)
				}
				v = map[bool]string{true: "yes", false: "no"}[yes]
			}
		}
		if v == "" {
			continue
		}
		s.Settings = append(s.Settings, Setting{Name: o.Name, Value: v, From: from})
	}
	if s.Image() == "" { // a site's exported PYXIS_CONTAINER_MOUNT_HOME and the like, without an image: nothing to run in
		s.Settings = slices.DeleteFunc(s.Settings, func(st Setting) bool { return !strings.HasPrefix(st.From, "--") })
	}
	return s, s.check(g.RtFrom)
}

// check refuses what cannot run: options without an image, pyxis's own
// options with a runtime prefix, a network namespace of the container's
// own, mounts pyxis would refuse.
func (s *Spec) check(rtFrom string) error {
	for _, st := range s.Settings {
		switch {
		case s.Image() == "" && st.Name != "container-image":
			return fmt.Errorf("%s given without --container-image: name the image (or drop %s)", st.From, st.From)
		case s.Runtime != "" && slices.Contains(pyxisOnly, st.Name):
			return fmt.Errorf("%s is pyxis's and has no meaning with %s %s: drop it, or run under pyxis", st.From, rtFrom, s.Runtime)
		case st.Name == "container-unshare":
			for _, ns := range strings.Split(st.Value, ",") {
				switch ns {
				case "ipc", "uts":
				case "net":
					return fmt.Errorf("%s=%s: trainrun's control channel and NCCL need the host's network namespace; drop net", st.From, st.Value)
				default:
					return fmt.Errorf("%s=%s: unknown namespace %q; pyxis supports net, ipc, uts (and trainrun ipc, uts)", st.From, st.Value, ns)
				}
			}
		case st.Name == "container-mounts":
			m, err := ParseMounts(st.Value, st.From)
			if err != nil {
				return err
			}
			s.Mounts = append(s.Mounts, m...)
		case st.Name == "container-workdir" && !strings.HasPrefix(st.Value, "/"):
			return fmt.Errorf("%s=%s: want an absolute path inside the container", st.From, st.Value)
		case st.Name == "container-workdir" && s.Runtime == "enroot":
			return fmt.Errorf("%s: enroot start has no working-directory option; drop it (the image's own directory is used) or use podman or apptainer", st.From)
		}
	}
	return nil
}

// Site is what the partition's policy says about containers.
type Site struct {
	Image, ImageFrom     string   // ContainerImage=: the image when the user names none
	Runtime, RuntimeFrom string   // ContainerRuntime=: the runtime when the user names none ("" pyxis)
	Registries           []string // ContainerRegistries=: the registries images may come from; nil any
	RegistriesFrom       string
	Mounts               []Mount // ContainerMounts=: added to every job's
	MountsFrom           string
}

// ApplySite takes the site's defaults and rules: its image where the user
// gave none (and its runtime where the user gave no runtime), its mounts
// after the user's, and the allowed registries.
func (s *Spec) ApplySite(site Site, userRuntime bool) error {
	if s.Image() == "" && site.Image != "" {
		s.Settings = slices.Insert(s.Settings, 0, Setting{Name: "container-image", Value: site.Image, From: site.ImageFrom})
	}
	if !s.On() {
		return nil
	}
	if !userRuntime && site.Runtime != "" {
		s.Runtime = site.Runtime
		if s.Runtime == "pyxis" {
			s.Runtime = ""
		}
	}
	s.Mounts = append(s.Mounts, site.Mounts...)
	if site.Registries != nil {
		if err := CheckRegistry(s.Image(), s.Runtime, site.Registries); err != nil {
			img := s.Settings[0]
			return fmt.Errorf("%s %s: %w (%s); use an image from one of them or ask the admins", img.From, img.Value, err, site.RegistriesFrom)
		}
	}
	return nil
}

// Local is what ContainerRegistries lists to allow images that are files
// (a squashfs or SIF path) rather than a registry's.
const Local = "local"

// Registry is the registry an image reference names: for pyxis and enroot
// ([USER@][REGISTRY#]IMAGE[:TAG]) the part before '#', for podman and
// apptainer (docker://REGISTRY/NAME, REGISTRY/NAME) the first path element
// when it holds a '.' or ':' or is localhost; otherwise Docker Hub
// (docker.io), as both default to it. A path is Local.
func Registry(image, runtime string) string {
	ref := image
	for _, p := range []string{"docker://", "dockerd://", "podman://"} {
		ref = strings.TrimPrefix(ref, p)
	}
	if strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, ".") {
		return Local
	}
	if runtime == "" || runtime == "enroot" {
		if _, after, ok := strings.Cut(ref, "@"); ok && strings.Contains(after, "#") {
			ref = after // USER@ is the registry's credentials
		}
		if reg, _, ok := strings.Cut(ref, "#"); ok {
			return reg
		}
		return "docker.io"
	}
	if first, _, ok := strings.Cut(ref, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first
	}
	return "docker.io"
}

// CheckRegistry says why image may not be used when allowed lists the
// registries a site allows ("local" for files).
func CheckRegistry(image, runtime string, allowed []string) error {
	reg := Registry(image, runtime)
	for _, a := range allowed {
		if strings.EqualFold(a, reg) {
			return nil
		}
	}
	return fmt.Errorf("its registry %s is not one the site allows (ContainerRegistries=%s)", reg, strings.Join(allowed, ","))
}
