package container

import (
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

// Bad input is refused naming the input, before srun or pyxis sees it.
func TestResolveRefuses(t *testing.T) {
	cases := []struct {
		name    string
		g       Given
		wantErr string
	}{
		{"mounts without image", Given{Flags: map[string]string{"container-mounts": "/d"}}, "--container-mounts given without --container-image"},
		{"unknown runtime", Given{Flags: map[string]string{"container-image": "x"}, Runtime: "docker", RtFrom: "--container-runtime"}, `--container-runtime "docker": want pyxis`},
		{"pyxis-only with podman", Given{Flags: map[string]string{"container-image": "x", "container-remap-root": "yes"}, Runtime: "podman", RtFrom: "--container-runtime"}, "--container-remap-root is pyxis's"},
		{"unshare net", Given{Flags: map[string]string{"container-image": "x", "container-unshare": "ipc,net"}}, "need the host's network namespace"},
		{"unshare bogus", Given{Flags: map[string]string{"container-image": "x", "container-unshare": "pid"}}, `unknown namespace "pid"`},
		{"mount no dst", Given{Flags: map[string]string{"container-image": "x", "container-mounts": "/a:"}}, "has no destination"},
		{"mount relative src", Given{Flags: map[string]string{"container-image": "x", "container-mounts": "data:/data"}}, `mount source "data" is not a path`},
		{"relative workdir", Given{Flags: map[string]string{"container-image": "x", "container-workdir": "w"}}, "want an absolute path"},
		{"enroot workdir", Given{Flags: map[string]string{"container-image": "x", "container-workdir": "/w"}, Runtime: "enroot"}, "enroot start has no working-directory option"},
		{"bad bool twin", Given{Flags: map[string]string{"container-image": "x"}, Getenv: func(k string) string {
			if k == "PYXIS_CONTAINER_MOUNT_HOME" {
				return "maybe"
			}
			return ""
		}}, "PYXIS_CONTAINER_MOUNT_HOME=maybe: want 1, true"},
	}
	if s, err := Resolve(Given{Flags: map[string]string{}, Getenv: func(k string) string { return map[string]string{"PYXIS_CONTAINER_MOUNT_HOME": "0"}[k] }}); err != nil || len(s.Settings) != 0 {
		t.Errorf("a pyxis variable without an image: %+v %v, want no container and no error", s, err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.g.Getenv == nil {
				c.g.Getenv = noEnv
			}
			_, err := Resolve(c.g)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("err %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	cases := []struct{ image, runtime, want string }{
		{"nvcr.io#nvidia/pytorch:24.01-py3", "", "nvcr.io"},
		{"user@nvcr.io#nvidia/nemo:24.07", "", "nvcr.io"},
		{"ubuntu:22.04", "", "docker.io"},
		{"docker://nvcr.io#nvidia/pytorch:24.01-py3", "enroot", "nvcr.io"},
		{"/lustre/images/nemo.sqsh", "", Local},
		{"nvcr.io/nvidia/pytorch:24.01-py3", "podman", "nvcr.io"},
		{"localhost/trainer:1", "podman", "localhost"},
		{"registry.local:5000/x/y", "podman", "registry.local:5000"},
		{"pytorch/pytorch:2.3", "podman", "docker.io"},
		{"docker://ghcr.io/org/img", "apptainer", "ghcr.io"},
		{"./img.sif", "apptainer", Local},
	}
	for _, c := range cases {
		if got := Registry(c.image, c.runtime); got != c.want {
			t.Errorf("Registry(%q, %q) = %q, want %q", c.image, c.runtime, got, c.want)
		}
	}
}

// The site's rules: its default image, its runtime, its mounts after the
// user's, and its registries.
func TestApplySite(t *testing.T) {
	s, _ := Resolve(Given{Flags: map[string]string{}, Getenv: noEnv})
	site := Site{Image: "nvcr.io#nvidia/pytorch:24.01-py3", ImageFrom: "the policy's ContainerImage (p:1)", Registries: []string{"nvcr.io"},
		Mounts: []Mount{{Src: "/datasets", Dst: "/datasets", Flags: []string{"ro"}}}}
	if err := s.ApplySite(site, false); err != nil || s.Image() != site.Image || len(s.Mounts) != 1 || !s.Pyxis() {
		t.Fatalf("default image: %+v %v", s, err)
	}
	s, _ = Resolve(Given{Flags: map[string]string{"container-image": "evil.example.com#x/y:1"}, Getenv: noEnv})
	err := s.ApplySite(Site{Registries: []string{"nvcr.io", Local}, RegistriesFrom: "p:2"}, false)
	if err == nil || !strings.Contains(err.Error(), "--container-image evil.example.com#x/y:1: its registry evil.example.com is not one the site allows (ContainerRegistries=nvcr.io,local)") {
		t.Errorf("disallowed registry: %v", err)
	}
	s, _ = Resolve(Given{Flags: map[string]string{}, Getenv: noEnv})
	if err := s.ApplySite(Site{Registries: []string{"nvcr.io"}, Runtime: "podman"}, false); err != nil || s.On() || s.Runtime != "" {
		t.Errorf("no image, no container: %+v %v", s, err)
	}
}

func TestCheckSrunArg(t *testing.T) {
	for _, ok := range []string{"--mpi=pmix", "--cpu-bind=cores", "--network=sn_all", "-Q", "--reservation=r1", "--mem-bind=local"} {
		if err := CheckSrunArg(ok, "--srun-arg"); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for arg, want := range map[string]string{
		"--ntasks=4":                "trainrun sets srun's --ntasks itself (trainrun runs one task per GPU",
		"-n4":                       "trainrun sets srun's -n itself",
		"--export=ALL":              "trainrun sets srun's --export itself",
		"--gres=gpu:8":              "trainrun sets srun's --gres itself",
		"--nodelist=n1":             "trainrun sets srun's --nodelist itself (trainrun places the ranks",
		"pmix":                      "not an srun option",
		"--container-image=x":       "give --container-image to trainrun run",
		"--no-container-mount-home": "give --no-container-mount-home to trainrun run",
	} {
		err := CheckSrunArg(arg, "--srun-arg")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", arg, err, want)
		}
	}
	if !SetsCPUBind([]string{"--mpi=pmix", "--cpu-bind=cores"}) || SetsCPUBind([]string{"--mpi=pmix"}) {
		t.Error("SetsCPUBind")
	}
}

// The runtime prefix's command lines: every variable by name (the deny list
// kept out unless --container-env names it), trainrun's directories
// mounted, the heartbeat descriptor and the GPUs passed.
func TestRunArgv(t *testing.T) {
	spec, err := Resolve(Given{Flags: map[string]string{"container-image": "localhost/trainer:1", "container-mounts": "/data:/data:ro", "container-workdir": "/w", "container-env": "LD_LIBRARY_PATH"}, Runtime: "podman", Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	r := RunOf(spec, []Mount{{Src: "/j", Dst: "/j"}})
	envl := []string{"LD_LIBRARY_PATH=/x", "PATH=/usr/bin", "RANK=3", "TRAINRUN_HEARTBEAT_FD=3"}
	got := strings.Join(r.Argv([]string{"python", "t.py"}, envl, Host{Name: "trainrun-7-3", GPU: true, CDI: true, Extra: 1}), " ")
	want := "podman run --rm --replace --stop-timeout=1 --name trainrun-7-3 --network=host --ipc=host --pid=host --preserve-fds=1 --device nvidia.com/gpu=all -v /data:/data:ro -v /j:/j --workdir /w -e LD_LIBRARY_PATH -e RANK -e TRAINRUN_HEARTBEAT_FD localhost/trainer:1 python t.py"
	if got != want {
		t.Errorf("podman:\n got %s\nwant %s", got, want)
	}
	r.Image = "/srv/rootfs"
	if got := r.Argv([]string{"python"}, nil, Host{Name: "n"}); strings.Join(got[len(got)-3:], " ") != "--rootfs /srv/rootfs python" {
		t.Errorf("podman rootfs: %v", got)
	}
	r.Image = "localhost/trainer:1"
	r.Runtime = "apptainer"
	if got, want := strings.Join(r.Argv([]string{"python"}, envl, Host{GPU: true}), " "), "apptainer exec --nv --bind /data:/data:ro,/j:/j --pwd /w localhost/trainer:1 python"; got != want {
		t.Errorf("apptainer:\n got %s\nwant %s", got, want)
	}
	r.Runtime, r.Workdir = "enroot", ""
	if got, want := strings.Join(r.Argv([]string{"python"}, envl, Host{}), " "), "enroot start --mount /data:/data:ro --mount /j:/j --env LD_LIBRARY_PATH --env RANK --env TRAINRUN_HEARTBEAT_FD localhost/trainer:1 python"; got != want {
		t.Errorf("enroot:\n got %s\nwant %s", got, want)
	}
	if RunOf(Spec{Settings: []Setting{{Name: "container-image", Value: "x"}}}, nil) != nil {
		t.Error("pyxis has no prefix")
	}
}
