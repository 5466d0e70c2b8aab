// Containers and srun options: trainrun run's --container-* flags (pyxis's
// options, under pyxis's names, with pyxis's PYXIS_CONTAINER_* variables as
// their twins), --container-runtime, --srun-arg, and the site's policy for
// them (wrapper/internal/container holds the rules).

package run

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/container"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// containerOptions are the flags; values by pyxis option name.
type containerOptions struct {
	values   map[string]*string // options with a value
	mounts   []string           // --container-mounts, repeatable (pyxis adds each occurrence's)
	on, off  map[string]*bool   // switches and their opposites (--no-container-mount-home, --container-readonly)
	runtime  string             // --container-runtime
	srunArgs []string           // --srun-arg, repeatable
}

func (o *containerOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	o.values, o.on, o.off = map[string]*string{}, map[string]*bool{}, map[string]*bool{}
	for _, opt := range container.Options {
		if opt.Name == "container-mounts" {
			fs.StringArrayVar(&o.mounts, opt.Name, nil, opt.Use+"; repeatable (env "+opt.Env+")")
			continue
		}
		if opt.Arg {
			o.values[opt.Name] = fs.String(opt.Name, "", opt.Use+" (env "+opt.Env+")")
			continue
		}
		o.on[opt.Name] = fs.Bool(opt.Name, false, opt.Use+" (env "+opt.Env+")")
		if opt.Neg != "" {
			o.off[opt.Name] = fs.Bool(opt.Neg, false, "the opposite of --"+opt.Name)
		}
	}
	fs.StringVar(&o.runtime, "container-runtime", getenv("TRAINRUN_CONTAINER_RUNTIME"), "with --container-image where pyxis is not installed: the shim starts each rank's trainer through podman, apptainer or enroot (env TRAINRUN_CONTAINER_RUNTIME; the policy's ContainerRuntime; default pyxis: srun's --container-* options)")
	fs.StringArrayVar(&o.srunArgs, "srun-arg", nil, "add this option to the step's srun, e.g. --srun-arg=--mpi=pmix (repeatable; replaces the policy's SrunArgs where its UserOverride allows; refused when it names an option trainrun sets, such as --ntasks or --export)")
}

// given is what the command line gave, as container.Given takes it.
func (o *containerOptions) given(given map[string]bool) map[string]string {
	flags := map[string]string{}
	for _, opt := range container.Options {
		switch {
		case opt.Name == "container-mounts" && given[opt.Name]:
			flags[opt.Name] = strings.Join(o.mounts, ",")
		case opt.Arg && given[opt.Name]:
			flags[opt.Name] = *o.values[opt.Name]
		case !opt.Arg && given[opt.Name] && *o.on[opt.Name]:
			flags[opt.Name] = "yes"
		case !opt.Arg && opt.Neg != "" && given[opt.Neg] && *o.off[opt.Name]:
			flags[opt.Name] = "no"
		}
	}
	return flags
}

// resolveContainer sets c.container and c.srunArgs: the flags and twins,
// then the partition's policy (st nil without --policy): its image where
// the user named none, its runtime, mounts and registries, its SrunArgs
// unless the user gives --srun-arg; every srun option checked.
func (c *Config) resolveContainer(getenv func(string) string, st *policy.Settings) error {
	o := &c.ctr
	rtFrom := "--container-runtime"
	if !c.given["container-runtime"] && getenv("TRAINRUN_CONTAINER_RUNTIME") != "" {
		rtFrom = "TRAINRUN_CONTAINER_RUNTIME"
	}
	spec, err := container.Resolve(container.Given{Flags: o.given(c.given), Runtime: o.runtime, RtFrom: rtFrom, Getenv: getenv})
	if err != nil {
		return usageErrorf("%v", err)
	}
	var srunArgs []string
	if st != nil {
		site := container.Site{Image: st.ContainerImage.Value, ImageFrom: policyFrom("ContainerImage", st.ContainerImage.Source),
			Runtime: st.ContainerRuntime.Value, Registries: st.ContainerRegistries.Value, RegistriesFrom: st.ContainerRegistries.Source.String()}
		for _, v := range st.ContainerMounts.Value {
			m, err := container.ParseMounts(v, policyFrom("ContainerMounts", st.ContainerMounts.Source))
			if err != nil {
				return usageErrorf("%v", err)
			}
			site.Mounts = append(site.Mounts, m...)
		}
		if err := spec.ApplySite(site, o.runtime != ""); err != nil {
			return usageErrorf("%v", err)
		}
		for _, a := range st.SrunArgs.Value {
			if err := container.CheckSrunArg(a, policyFrom("SrunArgs", st.SrunArgs.Source)); err != nil {
				return usageErrorf("%v; fix the policy", err)
			}
		}
		if len(o.srunArgs) == 0 && len(st.SrunArgs.Value) > 0 {
			srunArgs = slices.Clone(st.SrunArgs.Value)
			c.from["srun-arg"] = source{kind: fromPolicy, name: "SrunArgs", where: st.SrunArgs.Source.String()}
		}
	}
	for _, a := range o.srunArgs {
		if err := container.CheckSrunArg(a, "--srun-arg"); err != nil {
			return usageErrorf("%v", err)
		}
	}
	if len(o.srunArgs) > 0 {
		srunArgs = o.srunArgs // the user's replace the site's, where UserOverride allows SrunArgs (applyPolicy)
	}
	c.container, c.srunArgs = spec, srunArgs
	return nil
}

func policyFrom(key string, src policy.Source) string {
	return fmt.Sprintf("the policy's %s (%s)", key, src)
}

// checkPyxis refuses a pyxis container where srun has no pyxis (srun
// --help does not list --container-image; testdata/pyxis-notes.md says why
// this check) or where there is no lean shim to mount into the image.
func checkPyxis(ctx context.Context, cfg *Config, sc slurm.Client) error {
	if !cfg.container.Pyxis() {
		return nil
	}
	img := cfg.container.Settings[0]
	if cfg.shim == "" {
		return withCode(exitcode.Usage, fmt.Errorf("%s %s: the static trainrun-shim is not installed beside trainrun (or TRAINRUN_SHIM), and trainrun itself cannot run inside an image: install trainrun-shim", img.From, img.Value))
	}
	if cfg.dryRun {
		return nil
	}
	help, err := sc.SrunHelp(ctx)
	if err != nil && !errors.Is(err, slurm.ErrNotFound) && len(help) == 0 {
		return withCode(exitcode.Slurm, fmt.Errorf("%s %s: asking srun whether pyxis is loaded: %w", img.From, img.Value, err))
	}
	if !container.HasPyxis(string(help)) {
		return withCode(exitcode.Usage, fmt.Errorf("%s %s: srun has no --container-image here (pyxis is not loaded: 'srun --help' does not list it); install pyxis (plugstack.conf: spank_pyxis.so), or run the image through a runtime with --container-runtime podman|apptainer|enroot", img.From, img.Value))
	}
	return nil
}

// containerBinds are the mounts trainrun adds: under pyxis the shim
// (read-only: it is the task's program inside the image), then the job
// directory (launch files, plan, progress), the checkpoint store and the
// node-local checkpoint directory's fixed part, each at its host path so
// the launch files' paths hold inside. A directory inside one already
// mounted is not mounted again.
func (r *runner) containerBinds() []container.Mount {
	var out []container.Mount
	if r.cfg.container.Pyxis() && r.cfg.shim != "" {
		out = append(out, container.Mount{Src: r.cfg.shim, Dst: r.cfg.shim, Flags: []string{"ro"}})
	}
	dirs := []string{r.dirs.jobDir, r.dirs.ckptDir}
	if l := r.cfg.ckptLocal; l != "" {
		if i := strings.IndexByte(l, '%'); i >= 0 {
			l = filepath.Dir(l[:i] + "x") // the part before the first %n, %j or %r
		}
		dirs = append(dirs, filepath.Clean(l))
	}
	var seen []string
	for _, d := range dirs {
		if d == "" || slices.ContainsFunc(seen, func(s string) bool { return d == s || strings.HasPrefix(d, s+"/") }) {
			continue
		}
		seen = append(seen, d)
		out = append(out, container.Mount{Src: d, Dst: d})
	}
	return out
}

// stepExtra are the srun options after trainrun's own: pyxis's and the
// srun arguments.
func (r *runner) stepExtra() []string {
	var extra []string
	if r.cfg.container.Pyxis() {
		extra = container.PyxisArgs(r.cfg.container, r.containerBinds())
	}
	return append(extra, r.cfg.srunArgs...)
}

// containerRun is the runtime prefix the launch files carry (nil: none).
func (r *runner) containerRun() *container.Run {
	return container.RunOf(r.cfg.container, r.containerBinds())
}

// containerRecord is the image and its runtime for the observer's start
// event and the observation record ("", "" without a container).
func (r *runner) containerRecord() (image, runtime string) {
	c := r.cfg.container
	if !c.On() {
		return "", ""
	}
	return c.Image(), cmp.Or(c.Runtime, "pyxis")
}

// containerHistory is the history's start event's container field.
func (r *runner) containerHistory() string {
	if !r.cfg.container.On() {
		return ""
	}
	return r.cfg.container.Describe()
}

// containerSummary is the summary's lines for the container and srun's
// added options ("" for neither).
func (r *runner) containerSummary() string {
	var b strings.Builder
	if c := r.cfg.container; c.On() {
		how := "pyxis: srun's --container-* options; the shim runs inside, mounted read-only"
		if c.Runtime != "" {
			how = "the shim starts each trainer through " + c.Runtime
		}
		fmt.Fprintf(&b, "  container   %s (%s; from %s)\n", c.Image(), how, c.Settings[0].From)
	}
	if len(r.cfg.srunArgs) > 0 {
		fmt.Fprintf(&b, "  srun adds   %s (%s)\n", strings.Join(r.cfg.srunArgs, " "), r.cfg.source("srun-arg"))
	}
	return b.String()
}

// stepEnviron is environ without pyxis's PYXIS_CONTAINER_* variables: srun
// would read them as --container-* options, and trainrun passes the
// options it resolved itself (under pyxis) or must keep the step on the
// host (a runtime prefix, or no container).
func stepEnviron(environ []string) []string {
	return slices.DeleteFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, "PYXIS_CONTAINER_") })
}
