package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// megatronBlock reads `plan --format megatron` back into argv: the flag
// lines under the comments, continuations and quotes removed (no value
// holds a space).
func megatronBlock(out string) []string {
	var a []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for _, w := range strings.Fields(strings.TrimSuffix(l, " \\")) {
			a = append(a, strings.Trim(w, "'"))
		}
	}
	return a
}

var commandLine = regexp.MustCompile(`(?m)^  command     (.*)$`)

// dryRunArgs is the argv after "train.py" in a dry run's command line,
// and the dry run's output.
func dryRunArgs(t *testing.T, env map[string]string, args ...string) ([]string, string) {
	t.Helper()
	out, errb, err := cli{vars: env}.runRun(args...)
	if err != nil {
		t.Fatalf("run %q: %v\n%s", args, err, errb)
	}
	m := commandLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no command line in:\n%s", out)
	}
	_, rest, _ := strings.Cut(m[1], "train.py ")
	var a []string
	for _, w := range strings.Fields(rest) {
		a = append(a, strings.Trim(w, "'"))
	}
	return a, out
}

// One renderer for every path: `plan --format megatron` (pinned as a
// golden), `run` planning in the job, `run --fix` with the plan's layout,
// `run --plan FILE` and TRAINRUN_PLAN (submit's path) give the same flags,
// and every path's ranks get Megatron's CUDA_DEVICE_MAX_CONNECTIONS.
func TestMegatronSameOnEveryPath(t *testing.T) {
	cases := []struct {
		name, fix, cdmc string
	}{
		{"planner choice", "", "1"},
		{"zero3 full recompute", "tp=2,zero=3,recompute=full", "32"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			model := []string{"--model", "llama3-8b", "--gpu", "h100-sxm", "--seq-len", "8192", "--global-batch", "256"}
			planArgs := append([]string{"plan", "--gpus", "16"}, model...)
			if c.fix != "" {
				planArgs = append(planArgs, "--fix", c.fix)
			}
			out, errs, code := runWithEnv(t, nil, append(planArgs, "--format", "megatron")...)
			if code != 0 {
				t.Fatalf("plan: exit %d: %s", code, errs)
			}
			checkGolden(t, "megatron-paths-"+strings.ReplaceAll(c.name, " ", "-")+".golden", out)
			want := strings.Join(megatronBlock(out), " ")
			js, errs, code := runWithEnv(t, nil, append(planArgs, "--format", "json")...)
			if code != 0 {
				t.Fatalf("plan json: exit %d: %s", code, errs)
			}
			planFile := filepath.Join(t.TempDir(), "plan.json")
			if err := os.WriteFile(planFile, []byte(js), 0o644); err != nil {
				t.Fatal(err)
			}
			layout := regexp.MustCompile(`flags for llama3-8b: (\S+)`).FindStringSubmatch(out)[1]

			env := slurmEnv4x8()
			env["SLURM_JOB_NODELIST"], env["SLURM_JOB_NUM_NODES"], env["SLURM_TASKS_PER_NODE"] = "n[1-2]", "2", "8(x2)"
			env["TRAINRUN_JOB_DIR"] = t.TempDir()
			trafficLine := regexp.MustCompile(`(?m)^  traffic .*$`)
			inJob := ""
			run := func(extra ...string) []string {
				argv := append([]string{"--dry-run", "--probe", "none", "--rank", "3"}, extra...)
				argv = append(argv, "--", "python", "train.py", "{megatron_args}")
				got, out := dryRunArgs(t, env, argv...)
				if c.cdmc != "" && !strings.Contains(out, "\nCUDA_DEVICE_MAX_CONNECTIONS="+c.cdmc+"\n") {
					t.Errorf("%q: the rank lacks CUDA_DEVICE_MAX_CONNECTIONS=%s:\n%s", extra, c.cdmc, out)
				}
				// The placement weighs the plan's traffic on every path
				// with a model (--plan FILE's JSON does not carry it).
				tr := trafficLine.FindString(out)
				if inJob == "" {
					inJob = tr
					if !strings.Contains(tr, "NVLink") || strings.Contains(tr, "NVLink 0 B") {
						t.Errorf("planning in the job: no NVLink traffic: %q", tr)
					}
				} else if slices.Contains(extra, "--model") && tr != inJob {
					t.Errorf("%q: traffic %q, planning in the job %q", extra, tr, inJob)
				}
				return got
			}
			paths := map[string][]string{"run (planning in the job)": run(append(model, fixArg(c.fix)...)...)}
			paths["run --fix (the plan's layout)"] = run(append(model, "--fix", layout)...)
			paths["run --plan FILE"] = run(append(model, "--plan", planFile)...)
			env["TRAINRUN_PLAN"] = planFile
			paths["TRAINRUN_PLAN (submit)"] = run(model...)
			delete(env, "TRAINRUN_PLAN")
			for name, got := range paths {
				if g := strings.Join(got, " "); g != want {
					t.Errorf("%s gives\n  %s\nplan --format megatron gives\n  %s", name, g, want)
				}
			}
			// Without a model only the layout's flags, the same as the
			// plan's (llama3-8b on pp 1 has no split by layers).
			got := strings.Join(run("--fix", layout, "--global-batch", "256"), " ")
			layoutPart, _, _ := strings.Cut(want, " --seq-length ")
			if got != layoutPart {
				t.Errorf("run --fix without a model gives\n  %s\nthe plan's layout flags are\n  %s", got, layoutPart)
			}
		})
	}
}

func fixArg(fix string) []string {
	if fix == "" {
		return nil
	}
	return []string{"--fix", fix}
}

// {deepspeed_config} is the path of the plan's ds_config.json in the job
// directory (what it holds: internal/run's TestDeepSpeedConfigWritten); a
// dry run names it and writes nothing.
func TestDeepSpeedConfigTemplate(t *testing.T) {
	model := []string{"--model", "llama3-8b", "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "256", "--stack", "deepspeed:zero3"}
	env := slurmEnv4x8()
	env["SLURM_JOB_NODELIST"], env["SLURM_JOB_NUM_NODES"], env["SLURM_TASKS_PER_NODE"] = "n[1-2]", "2", "8(x2)"
	dir := t.TempDir()
	env["TRAINRUN_JOB_DIR"] = dir
	path := filepath.Join(dir, "ds_config.json")
	// A dry run names the file and writes nothing.
	got, _ := dryRunArgs(t, env, append(append([]string{"--dry-run", "--probe", "none"}, model...), "--", "python", "train.py", "--deepspeed_config", "{deepspeed_config}")...)
	if strings.Join(got, " ") != "--deepspeed_config "+path {
		t.Errorf("command %q, want the path %s", got, path)
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("a dry run wrote %s", path)
	}
}

// trainrun env gives CUDA_DEVICE_MAX_CONNECTIONS by Megatron's rule for
// Megatron's stacks only, and keeps a value the user exported.
func TestEnvCUDADeviceMaxConnections(t *testing.T) {
	args := []string{"env", "--machine", "hgx-h100", "--node-addr", "10.0.0.11", "--nodelist", "gpu[01-02]", "--rank", "3", "--master-addr", "gpu01"}
	cases := []struct {
		name string
		vars map[string]string
		more []string
		want string // "" = absent
	}{
		{"tp: 1", nil, []string{"--fix", "tp=8"}, "1"},
		{"megatron-fsdp: 32", nil, []string{"--fix", "tp=2,zero=3"}, "32"},
		{"dp only: none", nil, []string{"--fix", "tp=1"}, ""},
		{"torch fsdp stack: none", nil, []string{"--fix", "tp=8", "--stack", "fsdp"}, ""},
		{"the twin TRAINRUN_STACK", map[string]string{"TRAINRUN_STACK": "deepspeed:zero1"}, []string{"--fix", "tp=8"}, ""},
		{"the user's value kept", map[string]string{"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, []string{"--fix", "tp=8"}, "user"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := runWithEnv(t, c.vars, append(slices.Clone(args), c.more...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			got, set := shellVars(out)["CUDA_DEVICE_MAX_CONNECTIONS"]
			switch {
			case c.want == "user" && set && got != "8":
				t.Errorf("the user's 8 replaced by %q", got)
			case c.want == "" && set:
				t.Errorf("CUDA_DEVICE_MAX_CONNECTIONS=%s for %v", got, c.more)
			case c.want != "" && c.want != "user" && got != c.want:
				t.Errorf("CUDA_DEVICE_MAX_CONNECTIONS=%q, want %s:\n%s", got, c.want, out)
			}
		})
	}
}

// {torchtitan_args} is what `trainrun plan --format torchtitan` prints for
// the same plan: one argument per word standalone, shell-quoted words
// inside a longer argument.
func TestTorchTitanArgsTemplate(t *testing.T) {
	model := []string{"--model", "llama3-8b", "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "256", "--stack", "fsdp:compile"}
	out, errs, code := runWithEnv(t, nil, append(append([]string{"plan", "--gpus", "16"}, model...), "--format", "torchtitan")...)
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	var body []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "#") {
			body = append(body, l)
		}
	}
	want := bashWords(t, "printf '%s\\0' "+strings.Join(body, "\n"), "")
	env := slurmEnv4x8()
	env["SLURM_JOB_NODELIST"], env["SLURM_JOB_NUM_NODES"], env["SLURM_TASKS_PER_NODE"] = "n[1-2]", "2", "8(x2)"
	env["TRAINRUN_JOB_DIR"] = t.TempDir()
	got, _ := dryRunArgs(t, env, append(append([]string{"--dry-run", "--probe", "none"}, model...), "--", "python", "train.py", "{torchtitan_args}")...)
	if len(want) < 10 || !slices.Equal(got, want) {
		t.Errorf("standalone:\n got %q\nwant %q", got, want)
	}
	// A Megatron stack's plan: the error names the stacks to use.
	_, errs2, code := runWithEnv(t, env, append(append([]string{"run", "--dry-run", "--probe", "none"}, model[:8]...), "--", "python", "{torchtitan_args}")...)
	if code == 0 || !strings.Contains(errs2, "--stack fsdp") {
		t.Errorf("megatron-core plan with {torchtitan_args}: exit %d: %s", code, errs2)
	}
}

// trainrun run exports TRAINRUN_MEGATRON_ARGS to the ranks on a Megatron
// stack: the words of `trainrun plan --format megatron` for the same plan,
// as the plugin sets it; not on another stack.
func TestRunExportsMegatronArgs(t *testing.T) {
	model := []string{"--model", "llama3-8b", "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "256"}
	out, errs, code := runWithEnv(t, nil, append(append([]string{"plan", "--gpus", "32"}, model...), "--format", "megatron")...)
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	var body []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "#") {
			body = append(body, l)
		}
	}
	want := bashWords(t, "printf '%s\\0' "+strings.Join(body, "\n"), "")
	vars, errb, err := dryRunEnv(t, nil, append(model, "--", "python", "t.py")...)
	if err != nil {
		t.Fatalf("%v: %s", err, errb)
	}
	v, ok := vars["TRAINRUN_MEGATRON_ARGS"]
	if !ok {
		t.Fatalf("TRAINRUN_MEGATRON_ARGS not exported: %v", vars)
	}
	if got := bashWords(t, `eval "set -- $V"; printf '%s\0' "$@"`, unquoteDry(v)); len(want) < 10 || !slices.Equal(got, want) {
		t.Errorf("TRAINRUN_MEGATRON_ARGS:\n got %q\nwant %q", got, want)
	}
	vars, errb, err = dryRunEnv(t, nil, append(model, "--stack", "fsdp", "--", "python", "t.py")...)
	if err != nil {
		t.Fatalf("%v: %s", err, errb)
	}
	if v, ok := vars["TRAINRUN_MEGATRON_ARGS"]; ok {
		t.Errorf("--stack fsdp: TRAINRUN_MEGATRON_ARGS=%s exported", v)
	}
}

// unquoteDry undoes the dry run's shell quoting of a printed value.
func unquoteDry(v string) string {
	if strings.HasPrefix(v, "'") {
		return strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'"), `'\''`, "'")
	}
	return v
}
