package shim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// Health is the node health pass (exec-task --health DIR, one task per
// node): the GPUs the step sees against the job's GRES, where nvidia-smi
// is installed each GPU's uncorrected ECC errors, pending page retirement
// and hardware slowdown, the InfiniBand
// ports' state and rate from sysfs, free space where checkpoints go and in
// /dev/shm, and the site's script, each bounded; it writes DIR/<node>.json
// (launch.HealthReport) and exits 0 whatever it found: the controller
// decides.
func Health(env Env, dir string, spec launch.HealthSpec) error {
	t0 := time.Now()
	task := slurm.TaskFromEnv(env.Getenv)
	node := task.Node
	if node == "" {
		node, _ = os.Hostname()
	}
	if node == "" || strings.ContainsAny(node, "/\x00") {
		return exitcode.With(exitcode.Slurm, fmt.Errorf("health: node name %q", node))
	}
	rep := launch.HealthReport{Node: node}
	if spec.GPUs > 0 {
		rep.Checks = append(rep.Checks, checkGPUs(task.StepGPUs, env.Getenv("CUDA_VISIBLE_DEVICES"), spec.GPUs))
	}
	if c, ok := checkNvidia(spec.GPUs); ok {
		rep.Checks = append(rep.Checks, c)
	}
	root := strings.ReplaceAll(spec.Sysfs, "%n", node)
	if root == "" {
		root = "/sys"
	}
	rep.Checks = append(rep.Checks, checkIB(root))
	for _, p := range spec.Space {
		rep.Checks = append(rep.Checks, checkSpace(p, spec.MinFree))
	}
	if spec.Script != "" {
		timeout, err := time.ParseDuration(spec.Timeout)
		if err != nil || timeout <= 0 {
			timeout = time.Minute
		}
		rep.Checks = append(rep.Checks, checkScript(spec.Script, node, timeout))
	}
	rep.Seconds = time.Since(t0).Seconds()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return launch.WriteJSONAtomic(filepath.Join(dir, node+".json"), rep, 0o644)
}

// checkGPUs compares the GPUs the step sees (SLURM_STEP_GPUS, else
// CUDA_VISIBLE_DEVICES) with the job's GRES per node.
func checkGPUs(stepGPUs, cvd string, want int) launch.HealthCheck {
	ids, from := launch.SplitList(stepGPUs), "SLURM_STEP_GPUS"
	if len(ids) == 0 {
		ids, from = launch.SplitList(cvd), "CUDA_VISIBLE_DEVICES"
	}
	c := launch.HealthCheck{Name: "gpus", OK: len(ids) >= want, Detail: fmt.Sprintf("%d GPU(s) visible (%s=%s), the job holds %d per node", len(ids), from, strings.Join(ids, ","), want)}
	if len(ids) == 0 {
		c.OK, c.Detail = true, fmt.Sprintf("no GPU list in the step's environment; the job holds %d per node (not checked)", want)
	}
	if !c.OK {
		c.Detail += ": a GPU is missing (fallen off the bus, or the driver lost it)"
	}
	return c
}

// checkIB reads every InfiniBand port's state and rate under
// root/class/infiniband: a port that is not ACTIVE fails the node (a NIC
// down, a cable pulled, the subnet manager not answering).
func checkIB(root string) launch.HealthCheck {
	c := launch.HealthCheck{Name: "ib", OK: true}
	ports, _ := filepath.Glob(filepath.Join(root, "class", "infiniband", "*", "ports", "*"))
	sort.Strings(ports)
	if len(ports) == 0 {
		c.Detail = "no InfiniBand ports"
		return c
	}
	var seen, bad []string
	for _, p := range ports {
		dev := filepath.Base(filepath.Dir(filepath.Dir(p))) + "/" + filepath.Base(p)
		state := readTrim(filepath.Join(p, "state"))
		rate := readTrim(filepath.Join(p, "rate"))
		seen = append(seen, fmt.Sprintf("%s %s %s", dev, stateWord(state), rate))
		if !strings.Contains(state, "ACTIVE") {
			bad = append(bad, fmt.Sprintf("%s port state %q", dev, state))
		}
	}
	c.Detail = strings.Join(seen, "; ")
	if len(bad) > 0 {
		c.OK, c.Detail = false, strings.Join(bad, "; ")+" (want ACTIVE)"
	}
	return c
}

func stateWord(s string) string {
	if _, w, ok := strings.Cut(s, ": "); ok {
		return w
	}
	return s
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "unreadable"
	}
	return strings.TrimSpace(string(b))
}

// checkSpace: the file system of path has at least min bytes free.
func checkSpace(path string, min int64) launch.HealthCheck {
	c := launch.HealthCheck{Name: "space"}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		c.OK, c.Detail = true, fmt.Sprintf("%s: %v (not checked)", path, err)
		return c
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	c.OK = free >= min
	c.Detail = fmt.Sprintf("%s: %d MiB free (want at least %d MiB)", path, free>>20, min>>20)
	return c
}

// checkScript runs the site's HealthCheck script with the node's name in
// TRAINRUN_HEALTH_NODE: exit 0 is healthy; another exit, or no end within
// timeout, fails the node with the script's last line of output.
func checkScript(script, node string, timeout time.Duration) launch.HealthCheck {
	c := launch.HealthCheck{Name: "script"}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, script)
	cmd.Env = append(os.Environ(), "TRAINRUN_HEALTH_NODE="+node)
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	last := ""
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) > 0 {
		last = lines[len(lines)-1]
		if len(last) > 200 {
			last = last[:200]
		}
	}
	switch {
	case ctx.Err() != nil:
		c.Detail = fmt.Sprintf("%s did not finish within %s", script, timeout)
	case err != nil:
		c.Detail = fmt.Sprintf("%s: %v", script, err)
	default:
		c.OK = true
		c.Detail = script + ": exit 0"
	}
	if last != "" {
		c.Detail += ": " + last
	}
	return c
}

// healthFlags are exec-task's flags of the health mode (launch.HealthSpec.Args).
func healthFlags(fs *pflag.FlagSet) (dir *string, spec func() launch.HealthSpec) {
	dir = fs.String("health", "", "health mode: check this node and write DIR/<node>.json")
	gpus := fs.Int("health-gpus", 0, "with --health: the GPUs the job holds per node")
	space := fs.StringArray("health-space", nil, "with --health: a path whose file system must have --health-min-free bytes free (repeatable)")
	minFree := fs.Int64("health-min-free", 1<<30, "with --health: bytes free wanted on each --health-space")
	script := fs.String("health-script", "", "with --health: the site's check script (exit 0: healthy)")
	timeout := fs.String("health-timeout", "60s", "with --health: the script's time limit")
	sysfs := fs.String("health-sysfs", "", "with --health: the sysfs root (%n: the node's name; default /sys)")
	return dir, func() launch.HealthSpec {
		return launch.HealthSpec{GPUs: *gpus, Space: *space, MinFree: *minFree, Script: *script, Timeout: *timeout, Sysfs: *sysfs}
	}
}

// nvidiaQuery is what the nvidia check asks nvidia-smi, a field every
// driver since R450 knows (an unknown field fails the whole query).
const nvidiaQuery = "index,ecc.errors.uncorrected.volatile.total,retired_pages.pending,clocks_throttle_reasons.hw_slowdown"

// nvidiaSMI is the command the check runs (a test's fake).
var nvidiaSMI = "nvidia-smi"

// checkNvidia asks the driver, where nvidia-smi is installed, for each
// GPU's uncorrected ECC errors since boot, pending page retirements and a
// hardware slowdown; any fails the node. ok false: no nvidia-smi, no check.
func checkNvidia(want int) (launch.HealthCheck, bool) {
	path, err := exec.LookPath(nvidiaSMI)
	if err != nil {
		return launch.HealthCheck{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--query-gpu="+nvidiaQuery, "--format=csv,noheader,nounits")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return launch.HealthCheck{Name: "nvidia", OK: false, Detail: fmt.Sprintf("nvidia-smi --query-gpu failed (%v): the driver does not answer", err)}, true
	}
	return judgeNvidia(string(out), want), true
}

// judgeNvidia reads nvidia-smi's CSV lines (index, uncorrected ECC errors,
// retired pages pending, HW slowdown).
func judgeNvidia(csv string, want int) launch.HealthCheck {
	c := launch.HealthCheck{Name: "nvidia", OK: true}
	var bad []string
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(csv), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 4 {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		n++
		if v := f[1]; v != "0" && !strings.HasPrefix(v, "[") && v != "N/A" {
			bad = append(bad, fmt.Sprintf("GPU %s: %s uncorrected ECC error(s)", f[0], v))
		}
		if strings.EqualFold(f[2], "Yes") {
			bad = append(bad, fmt.Sprintf("GPU %s: page retirement pending (reset the GPU)", f[0]))
		}
		if strings.EqualFold(f[3], "Active") {
			bad = append(bad, fmt.Sprintf("GPU %s: hardware slowdown active (power brake, thermal or power supply)", f[0]))
		}
	}
	if want > 0 && n < want {
		bad = append(bad, fmt.Sprintf("the driver lists %d GPU(s), the job holds %d per node", n, want))
	}
	c.Detail = fmt.Sprintf("%d GPU(s) answered", n)
	if len(bad) > 0 {
		c.OK, c.Detail = false, strings.Join(bad, "; ")
	}
	return c
}
