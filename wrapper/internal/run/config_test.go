package run

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// configInput is one option of trainrun run that has an environment twin,
// a policy key or both, with a value for each source that differs from the
// others and from the flag's default.
type configInput struct {
	flag, flagVal string
	env, envVal   string    // "": no twin
	key, keyVal   string    // "": no policy key
	want          [3]string // the resolved value from the flag, the twin, the policy
	get           func(c *Config) string
}

// configInputs must name every flag of trainrun run that has an env twin
// or a policy key: TestConfigTableCoversEveryTwinAndKey checks it.
var configInputs = []configInput{
	{"ckpt-dir", "/flag/ckpt", "TRAINRUN_CKPT_DIR", "/env/ckpt", "CkptDir", "/policy/%u", [3]string{"/flag/ckpt", "/env/ckpt", "/policy/alice"}, func(c *Config) string { return c.ckptDir }},
	{"ckpt-local-dir", "/dev/shm/flag", "TRAINRUN_CKPT_LOCAL_DIR", "/dev/shm/env", "", "", [3]string{"/dev/shm/flag", "/dev/shm/env"}, func(c *Config) string { return c.ckptLocal }},
	{"ckpt-signal", "TERM", "TRAINRUN_CKPT_SIGNAL", "INT", "CkptSignal", "HUP", [3]string{"TERM", "INT", "HUP"}, func(c *Config) string { return c.ckptSignal }},
	{"ckpt-lead", "7m", "", "", "CkptLead", "3m", [3]string{"7m0s", "", "3m0s"}, func(c *Config) string { return c.plan.CkptLead.String() }},
	{"max-requeue", "7", "", "", "MaxRequeue", "4", [3]string{"7", "", "4"}, func(c *Config) string { return fmt.Sprint(c.maxRequeue) }},
	{"max-failures", "7", "", "", "MaxFailuresNoProgress", "5", [3]string{"7", "", "5"}, func(c *Config) string { return fmt.Sprint(c.maxFailures) }},
	{"ckpt-keep", "7", "", "", "CkptKeep", "2", [3]string{"7", "", "2"}, func(c *Config) string { return fmt.Sprint(c.ckptKeep) }},
	{"ckpt-keep-every", "7", "", "", "CkptKeepEvery", "20", [3]string{"7", "", "20"}, func(c *Config) string { return fmt.Sprint(c.ckptEvery) }},
	{"ckpt-compress", "always", "", "", "CkptCompress", "archive", [3]string{"always", "", "archive"}, func(c *Config) string { return c.compress }},
	{"hang-timeout", "off", "", "", "HangTimeout", "90s", [3]string{"off", "", "1m30s"}, func(c *Config) string { return fmt.Sprintf("%s %v", c.fault.hangTimeout, c.hang != nil) }},
	{"max-restarts", "7", "", "", "MaxRestarts", "1", [3]string{"7", "", "1"}, func(c *Config) string { return fmt.Sprint(c.fault.maxRestarts) }},
	{"spare-nodes", "2", "", "", "SpareNodes", "1", [3]string{"2", "", "1"}, func(c *Config) string { return fmt.Sprint(c.fault.spareNodes) }},
	{"metrics-addr", "127.0.0.1:1", "TRAINRUN_METRICS_ADDR", "127.0.0.1:2", "MetricsAddr", "127.0.0.1:3", [3]string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, func(c *Config) string { return c.obs.metricsAddr }},
	{"metrics-textfile", "/flag.prom", "TRAINRUN_METRICS_TEXTFILE", "/env.prom", "", "", [3]string{"/flag.prom", "/env.prom"}, func(c *Config) string { return c.obs.textfile }},
	{"pushgateway", "http://flag:9091", "TRAINRUN_PUSHGATEWAY", "http://env:9091", "Pushgateway", "http://policy:9091", [3]string{"http://flag:9091", "http://env:9091", "http://policy:9091"}, func(c *Config) string { return c.obs.pushgateway }},
	{"webhook", "http://flag/hook", "TRAINRUN_WEBHOOK", "http://env/hook", "Webhook", "http://policy/hook", [3]string{"http://flag/hook", "http://env/hook", "http://policy/hook"}, func(c *Config) string { return c.obs.webhook }},
	{"webhook-format", "JSON", "TRAINRUN_WEBHOOK_FORMAT", "slack", "", "", [3]string{"JSON", "slack"}, func(c *Config) string { return c.obs.webhookFormat }},
	{"max-ckpt-age", "5h", "", "", "MaxCkptAge", "2h", [3]string{"5h0m0s", "", "2h0m0s"}, func(c *Config) string { return c.obs.maxCkptAge.String() }},
	{"target-loss", "2.1", "TRAINRUN_TARGET_LOSS", "2.2", "", "", [3]string{"2.1", "2.2"}, func(c *Config) string { return c.obs.targetLoss }},
	{"stop-if-off-track", "0.95", "TRAINRUN_STOP_IF_OFF_TRACK", "0.8", "StopIfOffTrack", "yes", [3]string{"0.95", "0.8", "0.9"}, func(c *Config) string { return c.obs.stopOffTrack }},
	{"train-steps", "900", "TRAINRUN_TRAIN_STEPS", "800", "", "", [3]string{"900", "800"}, func(c *Config) string { return c.obs.trainSteps }},
	{"grace-budget", "50s", "", "", "CkptGraceBudget", "40s", [3]string{"50s", "", "40s"}, func(c *Config) string { return c.obs.graceBudget.String() }},
	{"calibration", "/flag/cal", "TRAINRUN_CALIBRATION", "/env/cal", "Calibration", "/policy/cal", [3]string{"/flag/cal", "/env/cal", "/policy/cal"}, func(c *Config) string { return c.plan.Calibration }},
	{"nvme-bw", "9", "", "", "NVMeBW", "4", [3]string{"9", "", "4"}, func(c *Config) string { return fmt.Sprint(c.plan.NVMeBW) }},
	{"stack", "fsdp2", "TRAINRUN_STACK", "fsdp2:compile", "Stack", "fsdp2:eager", [3]string{"fsdp2", "fsdp2:compile", "fsdp"}, func(c *Config) string { return c.plan.Stack }},
	{"precision", "BF16", "TRAINRUN_PRECISION", "fp16", "Precision", "fp8", [3]string{"BF16", "fp16", "fp8"}, func(c *Config) string { return c.plan.Precision }},
	{"finetune", "lora", "TRAINRUN_FINETUNE", "lora:8", "Finetune", "lora:16", [3]string{"lora", "lora:8", "lora:16"}, func(c *Config) string { return c.plan.Finetune }},
	{"policy", "/flag.conf", "TRAINRUN_POLICY", "/env.conf", "", "", [3]string{"/flag.conf", "/env.conf"}, func(c *Config) string { return c.policy }},
	{"job-dir", "/flag/job", "TRAINRUN_JOB_DIR", "/env/job", "", "", [3]string{"/flag/job", "/env/job"}, func(c *Config) string { return c.jobDir }},
	{"model", "llama3-8b", "TRAINRUN_MODEL", "llama3-70b", "", "", [3]string{"llama3-8b", "llama3-70b"}, func(c *Config) string { return c.plan.Model }},
	{"global-batch", "64", "TRAINRUN_BATCH", "512x4096", "", "", [3]string{"64", "512"}, func(c *Config) string { return fmt.Sprint(c.plan.GlobalBatch) }},
	{"seq-len", "2048", "TRAINRUN_BATCH", "512x4096", "", "", [3]string{"2048", "4096"}, func(c *Config) string { return fmt.Sprint(c.plan.SeqLen) }},
	{"tune", "4:10", "TRAINRUN_TUNE", "3", "Tune", "2:8", [3]string{"4:10", "3", "2:8"}, func(c *Config) string { return c.tune.tune }},
	{"loss-spike", "nan", "TRAINRUN_LOSS_SPIKE", "off", "LossSpike", "mad:4:window=20", [3]string{"nan", "off", "mad:4:window=20"}, func(c *Config) string { return c.spike.rule }},
	{"shrink", "Yes", "TRAINRUN_SHRINK", "YES", "Shrink", "yes", [3]string{"Yes", "YES", "yes"}, func(c *Config) string { return c.shrink.shrink }},
	{"migrate", "Yes", "TRAINRUN_MIGRATE", "YES", "Migrate", "yes", [3]string{"Yes", "YES", "yes"}, func(c *Config) string { return c.migrate.migrate }},
	{"migrate-every", "90s", "TRAINRUN_MIGRATE_EVERY", "2m", "MigrateEvery", "10m", [3]string{"90s", "2m", "10m0s"}, func(c *Config) string { return c.migrate.every }},
	{"loss-spike-action", "rollback:2", "TRAINRUN_LOSS_SPIKE_ACTION", "stop", "LossSpikeAction", "rollback", [3]string{"rollback:2", "stop", "rollback"}, func(c *Config) string { return c.spike.action }},
	{"tune-budget", "5", "TRAINRUN_TUNE_BUDGET", "90s", "TuneBudget", "3", [3]string{"5", "90s", "3m0s"}, func(c *Config) string { return c.tune.budget }},
	{"container-runtime", "apptainer", "TRAINRUN_CONTAINER_RUNTIME", "enroot", "", "", [3]string{"apptainer", "enroot"}, func(c *Config) string { return c.container.Runtime }},
	{"srun-arg", "--mpi=pmix", "", "", "SrunArgs", "--mpi=pmi2", [3]string{"--mpi=pmix", "", "--mpi=pmi2"}, func(c *Config) string { return strings.Join(c.srunArgs, " ") }},
	{"plan", "/flag/plan.json", "TRAINRUN_PLAN", "/env/plan.json", "", "", [3]string{"/flag/plan.json", "/env/plan.json"}, func(c *Config) string { return c.planFile + c.submittedPlan }},
}

// completeWith resolves trainrun run's flags args with the environment env
// and, when conf is not "", a policy file of those lines, for partition gpu.
func completeWith(t *testing.T, args []string, env map[string]string, conf string) (Config, string, error) {
	t.Helper()
	env = withDefaults(env, map[string]string{"USER": "alice"})
	if conf != "" {
		path := filepath.Join(t.TempDir(), "trainrun.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--policy", path)
	}
	getenv := func(k string) string { return env[k] }
	var o Options
	var log bytes.Buffer
	fs := testFlags(&log)
	o.AddFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	c, err := complete(o, givenFlags(fs), getenv, &slurm.Allocation{JobID: "42", Partition: "gpu"}, &log)
	return c, log.String(), err
}

// withDefaults is a with b's entries where a has none.
func withDefaults(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range b {
		m[k] = v
	}
	for k, v := range a {
		m[k] = v
	}
	return m
}

// The precedence, for every option with a twin or a policy key: the flag
// beats its twin and the policy, the twin beats the policy, and the policy
// beats the flag's default; each value says where it came from.
func TestCompletePrecedence(t *testing.T) {
	for _, in := range configInputs {
		flag := []string{"--" + in.flag + "=" + in.flagVal}
		env := map[string]string{}
		if in.env != "" {
			env[in.env] = in.envVal
		}
		conf := ""
		if in.key != "" {
			conf = "UserOverride=all\n" + in.key + "=" + in.keyVal + "\n"
		}
		if in.flag == "policy" { // --policy names the file itself
			dir := t.TempDir()
			in.flagVal, in.envVal = filepath.Join(dir, "flag.conf"), filepath.Join(dir, "env.conf")
			in.want = [3]string{in.flagVal, in.envVal}
			for _, p := range in.want[:2] {
				if err := os.WriteFile(p, []byte("CkptKeep=4\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			flag, env[in.env] = []string{"--policy=" + in.flagVal}, in.envVal
		}
		type scenario struct {
			name string
			args []string
			env  map[string]string
			conf string
			want string
			kind sourceKind
			lost string // the value of the source that lost ("": none)
		}
		var cases []scenario
		if in.env != "" {
			cases = append(cases,
				scenario{"flag beats env twin", flag, env, "", in.want[0], fromFlag, in.want[1]},
				scenario{"env twin beats default", nil, env, "", in.want[1], fromEnv, ""})
		}
		if in.key != "" {
			cases = append(cases,
				scenario{"flag beats policy", flag, nil, conf, in.want[0], fromFlag, in.want[2]},
				scenario{"policy beats default", nil, nil, conf, in.want[2], fromPolicy, ""})
		}
		if in.env != "" && in.key != "" {
			cases = append(cases,
				scenario{"flag beats env twin and policy", flag, env, conf, in.want[0], fromFlag, in.want[2]},
				scenario{"env twin beats policy", nil, env, conf, in.want[1], fromEnv, in.want[2]})
		}
		def, _, err := completeWith(t, nil, nil, "")
		if err != nil {
			t.Fatalf("%s: defaults: %v", in.flag, err)
		}
		for _, sc := range cases {
			t.Run(in.flag+"/"+sc.name, func(t *testing.T) {
				c, log, err := completeWith(t, sc.args, sc.env, sc.conf)
				if err != nil {
					t.Fatalf("%v\n%s", err, log)
				}
				got := in.get(&c)
				if in.flag == "hang-timeout" {
					got, _, _ = strings.Cut(got, " ")
				}
				if got != sc.want {
					t.Errorf("value %q, want %q", got, sc.want)
				}
				if got == in.get(&def) || got == sc.lost {
					t.Errorf("value %q is the default's or the losing source's: the case tests nothing", got)
				}
				if src := c.source(in.flag); src.kind != sc.kind {
					t.Errorf("source %v (%s), want kind %d", src.kind, src, sc.kind)
				}
			})
		}
	}
}

// The policy's HangTimeout makes the hang tracker's configuration as the
// flag's value would, and "off" turns it off.
func TestCompleteHangTimeout(t *testing.T) {
	c, _, err := completeWith(t, nil, nil, "HangTimeout=off\n")
	if err != nil || c.hang != nil {
		t.Errorf("HangTimeout=off: hang %v, err %v; want none", c.hang, err)
	}
	c, _, err = completeWith(t, []string{"--hang-timeout", "2m"}, nil, "")
	if err != nil || c.hang == nil {
		t.Errorf("--hang-timeout 2m: hang %v, err %v; want a tracker", c.hang, err)
	}
}

// A policy that lets users override none of its keys refuses every flag
// that has a policy key, naming the flag, the file and the key; keys it
// lists are allowed.
func TestCompleteUserOverrideRefuses(t *testing.T) {
	for _, pf := range policyFlags {
		in := findInput(t, pf.flag)
		_, _, err := completeWith(t, []string{"--" + in.flag + "=" + in.flagVal}, nil, "UserOverride=none\n")
		if err == nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "--"+pf.flag+": the site's policy") || !strings.Contains(err.Error(), "does not let users override "+pf.key) {
			t.Errorf("--%s under UserOverride=none: %v (exit %d), want a usage error naming the flag and %s", pf.flag, err, exitcode.Of(err), pf.key)
		}
		if _, _, err := completeWith(t, []string{"--" + in.flag + "=" + in.flagVal}, nil, "UserOverride="+pf.key+"\n"); err != nil {
			t.Errorf("--%s under UserOverride=%s: %v", pf.flag, pf.key, err)
		}
	}
	// The planner's inputs are refused where the choose phase plans.
	c, _, err := completeWith(t, []string{"--stack", "fsdp2"}, nil, "UserOverride=none\nStack=megatron\n")
	if err != nil || len(c.software) == 0 || c.software[0].err == nil || !strings.Contains(c.software[0].err.Error(), "does not let users override Stack") {
		t.Errorf("--stack under UserOverride=none: %v %+v, want a note that refuses it", err, c.software)
	}
}

// CkptRoots refuses a checkpoint directory outside its roots, whichever
// source gave it.
func TestCompleteCkptRoots(t *testing.T) {
	for _, sc := range []struct {
		args []string
		env  map[string]string
	}{{[]string{"--ckpt-dir", "/tmp/x"}, nil}, {nil, map[string]string{"TRAINRUN_CKPT_DIR": "/tmp/x"}}} {
		_, _, err := completeWith(t, sc.args, sc.env, "CkptRoots=/lustre\n")
		if err == nil || !strings.Contains(err.Error(), "--ckpt-dir /tmp/x is not under the checkpoint roots") {
			t.Errorf("%v %v: %v, want CkptRoots to refuse /tmp/x", sc.args, sc.env, err)
		}
	}
	if _, _, err := completeWith(t, []string{"--ckpt-dir", "/lustre/me"}, nil, "CkptRoots=/lustre\n"); err != nil {
		t.Errorf("/lustre/me under CkptRoots=/lustre: %v", err)
	}
}

func findInput(t *testing.T, flag string) configInput {
	for _, in := range configInputs {
		if in.flag == flag {
			return in
		}
	}
	t.Fatalf("configInputs lacks --%s", flag)
	return configInput{}
}

// Every flag that has a twin (envTwins, the software inputs, the planner's
// TRAINRUN_MODEL, TRAINRUN_BATCH and TRAINRUN_PLAN, and
// TRAINRUN_CALIBRATION) or a policy key (policyFlags, the metrics and
// software keys, Calibration) is in the table above, and
// every flag the table names is one of trainrun run's.
func TestConfigTableCoversEveryTwinAndKey(t *testing.T) {
	want := map[string]bool{"model": true, "seq-len": true, "global-batch": true, "plan": true,
		"metrics-addr": true, "pushgateway": true, "webhook": true, "max-ckpt-age": true, "grace-budget": true, "nvme-bw": true, "calibration": true}
	for _, tw := range envTwins {
		want[tw.flag] = true
	}
	for _, pf := range policyFlags {
		want[pf.flag] = true
	}
	for _, in := range softwareInputs {
		want[in.flag] = true
	}
	// The flag's usage text is the user's documentation of a twin.
	var o Options
	fs := testFlags(&bytes.Buffer{})
	o.AddFlags(fs, func(string) string { return "" })
	for _, name := range []string{"ckpt-dir", "metrics-addr", "policy"} {
		if !strings.Contains(fs.Lookup(name).Usage, "env TRAINRUN_") {
			t.Errorf("--%s's usage names no twin: the scan below would miss twins", name)
		}
	}
	for _, f := range flagNames(fs) {
		if strings.Contains(fs.Lookup(f).Usage, "env TRAINRUN_") {
			want[f] = true
		}
	}
	have := map[string]bool{}
	for _, in := range configInputs {
		if fs.Lookup(in.flag) == nil {
			t.Errorf("configInputs names --%s, which trainrun run does not have", in.flag)
		}
		have[in.flag] = true
	}
	for f := range want {
		if !have[f] {
			t.Errorf("--%s has a twin or a policy key but no row in configInputs", f)
		}
	}
}

func flagNames(fs *pflag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// The phases read runner.cfg and never write it: complete (this file's
// twin, config.go) and setup build the configuration before Run hands it to
// the runner, and nothing writes r.cfg, not even whole.
func TestRunConfigIsNotWritten(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "config.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var targets []ast.Expr
			switch n := n.(type) {
			case *ast.AssignStmt:
				targets = n.Lhs
			case *ast.IncDecStmt:
				targets = []ast.Expr{n.X}
			case *ast.UnaryExpr:
				if n.Op == token.AND {
					targets = []ast.Expr{n.X}
				}
			}
			for _, e := range targets {
				if through, _ := reachesCfg(e); through {
					t.Errorf("%s: %s writes the run's configuration (or takes its address): resolve it in complete instead", fset.Position(e.Pos()), types.ExprString(e))
				}
			}
			return true
		})
	}
}

// reachesCfg says whether e is r.cfg or a field (or element) below it;
// whole says it is r.cfg itself.
func reachesCfg(e ast.Expr) (through, whole bool) {
	top := true
	for {
		switch x := e.(type) {
		case *ast.SelectorExpr:
			if x.Sel.Name == "cfg" {
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "r" {
					return true, top
				}
			}
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		default:
			return false, false
		}
		top = false
	}
}
