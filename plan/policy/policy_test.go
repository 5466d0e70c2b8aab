package policy

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
)

func mustParse(t *testing.T, text string) *Policy {
	t.Helper()
	p, err := Parse(strings.NewReader(text), "trainrun.conf")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestPlannerDefaultsPerPartition(t *testing.T) {
	p := mustParse(t, "Precision=fp8\nPartitionName=a100 Stack=FSDP:compile Precision=bf16 Finetune=lora:8\n")
	s := p.Effective("a100")
	if s.Stack.Value != "fsdp:compile" || s.Precision.Value != "bf16" || s.Finetune.Value != "lora:8" {
		t.Errorf("partition a100: stack %q precision %q finetune %q", s.Stack.Value, s.Precision.Value, s.Finetune.Value)
	}
	if d := p.Effective("h100"); d.Stack.Value != "megatron-core" || d.Precision.Value != "fp8" || d.Finetune.Value != "full" {
		t.Errorf("site-wide: stack %q precision %q finetune %q", d.Stack.Value, d.Precision.Value, d.Finetune.Value)
	}
}

func TestDefaults(t *testing.T) {
	for name, p := range map[string]*Policy{"Default()": Default(), "empty file": mustParse(t, "# nothing\n")} {
		s := p.Effective("gpu")
		if s.CkptSignal.Value != "USR2" || s.CkptLead.Value != 5*time.Minute || s.CkptGraceBudget.Value != 0 ||
			s.MaxRequeue.Value != 100 || s.MaxFailuresNoProgress.Value != 3 || s.CkptRoots.Value != nil || s.CkptKeep.Value != 3 ||
			s.CkptKeepEvery.Value != 0 || s.NCCLForce.Value != nil || !s.UserOverride.Value.All || !s.AutoPlan.Value ||
			s.Fabric.Value != "auto" || s.GPUType.Value != "" || s.NCCLPrecedence.Value != "user" || s.MetricsAddr.Value != "" || s.MaxCkptAge.Value != 0 {
			t.Errorf("%s: defaults wrong: %+v", name, s)
		}
		for _, r := range s.Rows() {
			if r.Source.String() != "default" {
				t.Errorf("%s: %s from %s", name, r.Key, r.Source)
			}
		}
	}
	// every row of the table appears in Rows, in table order
	var rowKeys []string
	for _, r := range Default().Effective("").Rows() {
		rowKeys = append(rowKeys, r.Key)
	}
	var tableKeys []string
	for _, k := range Keys() {
		tableKeys = append(tableKeys, k.Name)
	}
	if !slices.Equal(rowKeys, tableKeys) {
		t.Errorf("Rows keys %v\ntable keys %v", rowKeys, tableKeys)
	}
}

const sample = `# site
CkptSignal=sigusr1
ckptlead = 90
NCCLForce=NCCL_IB_TIMEOUT=22 NCCLForce=NCCL_IB_RETRY_CNT=13
NCCLDefault=NCCL_DEBUG=WARN
NCCLDefault=NCCL_IB_HCA==mlx5_0:1,mlx5_1:1
NCCLDefault=NCCL_IB_GID_INDEX=3
CkptRoots=/lustre/,/scratch
UserOverride=CkptLead,maxrequeue
MetricsAddr=:9464

PartitionName=gpu CkptLead=10m NCCLForce=NCCL_IB_TIMEOUT=23 \
   NCCLDefault=NCCL_DEBUG=INFO Fabric=IB
PartitionName=preempt NCCLForce=none UserOverride=none MaxRequeue=500
PartitionName=roce NCCLForce=NCCL_IB_GID_INDEX=5 NCCLPrecedence=site Fabric=roce
`

func TestEffective(t *testing.T) {
	p := mustParse(t, sample)
	if got := p.Partitions(); !slices.Equal(got, []string{"gpu", "preempt", "roce"}) {
		t.Errorf("Partitions = %v", got)
	}
	site := p.Effective("")
	if site.CkptSignal.Value != "USR1" || site.CkptSignal.Source.String() != "site (trainrun.conf:2)" {
		t.Errorf("CkptSignal %v from %v", site.CkptSignal.Value, site.CkptSignal.Source)
	}
	if site.CkptLead.Value != 90*time.Second || site.CkptLead.Source.Line != 3 {
		t.Errorf("CkptLead %v", site.CkptLead)
	}
	if !slices.Equal(site.CkptRoots.Value, []string{"/lustre", "/scratch"}) {
		t.Errorf("CkptRoots %v", site.CkptRoots.Value)
	}
	if got := site.NCCL(); got.Force["NCCL_IB_TIMEOUT"] != "22" || got.Force["NCCL_IB_RETRY_CNT"] != "13" ||
		got.Defaults["NCCL_IB_HCA"] != "=mlx5_0:1,mlx5_1:1" || got.TrainrunWins || got.Fabric != "" {
		t.Errorf("site NCCL %+v", got)
	}

	gpu := p.Effective("gpu")
	if gpu.CkptLead.Value != 10*time.Minute || gpu.CkptLead.Source.String() != "partition gpu (trainrun.conf:12)" {
		t.Errorf("gpu CkptLead %v from %v", gpu.CkptLead.Value, gpu.CkptLead.Source)
	}
	if gpu.CkptSignal.Source.Kind != FromSite {
		t.Errorf("gpu inherits CkptSignal from the site, got %v", gpu.CkptSignal.Source)
	}
	wantForce := []EnvVar{
		{"NCCL_IB_TIMEOUT", "23", Source{FromPartition, "gpu", "trainrun.conf", 12}},
		{"NCCL_IB_RETRY_CNT", "13", Source{FromSite, "", "trainrun.conf", 4}},
	}
	if !slices.Equal(gpu.NCCLForce.Value, wantForce) {
		t.Errorf("gpu NCCLForce\n got %+v\nwant %+v", gpu.NCCLForce.Value, wantForce)
	}
	if d := gpu.NCCLDefault.Value; len(d) != 3 || d[0].Value != "INFO" || d[0].Source.Line != 13 {
		t.Errorf("gpu NCCLDefault %+v (continuation line 13 holds NCCLDefault)", d)
	}
	if gpu.NCCL().Fabric != "infiniband" {
		t.Errorf("Fabric=IB gives %q", gpu.NCCL().Fabric)
	}

	pre := p.Effective("preempt")
	if pre.NCCLForce.Value != nil || pre.NCCLForce.Source.String() != "partition preempt (trainrun.conf:14)" || pre.MaxRequeue.Value != 500 {
		t.Errorf("preempt: NCCLForce %+v, MaxRequeue %d", pre.NCCLForce, pre.MaxRequeue.Value)
	}

	roce := p.Effective("roce")
	if n := roce.NCCL(); !n.TrainrunWins || n.Fabric != "roce" || n.Force["NCCL_IB_GID_INDEX"] != "5" {
		t.Errorf("roce NCCL %+v", n)
	}
	if slices.ContainsFunc(roce.NCCLDefault.Value, func(v EnvVar) bool { return v.Name == "NCCL_IB_GID_INDEX" }) {
		t.Error("a forced variable is still listed as a default")
	}

	if other := p.Effective("nosuch"); other.CkptLead.Value != 90*time.Second || p.HasPartition("nosuch") {
		t.Errorf("an unnamed partition gets the site settings")
	}
}

func TestMayOverride(t *testing.T) {
	p := mustParse(t, sample)
	tests := []struct {
		key, partition string
		want           bool
	}{
		{"CkptLead", "gpu", true},
		{"ckptlead", "gpu", true},
		{"MaxRequeue", "", true},
		{"CkptKeep", "gpu", false},     // not in the site's list
		{"CkptLead", "preempt", false}, // UserOverride=none there
		{"CkptRoots", "gpu", false},    // the site's alone
		{"NoSuchKey", "gpu", false},
	}
	for _, tc := range tests {
		if got := p.MayOverride(tc.key, tc.partition); got != tc.want {
			t.Errorf("MayOverride(%s, %q) = %v, want %v", tc.key, tc.partition, got, tc.want)
		}
	}
	if !Default().MayOverride("CkptKeep", "any") || Default().MayOverride("NCCLForce", "any") {
		t.Error("defaults: all user keys overridable, site keys never")
	}
}

// Every kind of bad file: the error names file, line and key.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		conf string
		want []string // each error, exactly, in order
	}{
		{"unknown key", "CkptLead=5m\nCkptSignl=USR2\n",
			[]string{`trainrun.conf:2: CkptSignl: unknown key "CkptSignl"; accepted: PartitionName, CkptSignal, CkptLead, CkptLeadAdapt, CkptGraceBudget, CkptDir, CkptRoots, CkptKeep, CkptKeepEvery, CkptCompress, MaxRequeue, MaxFailuresNoProgress, HangTimeout, MaxRestarts, SpareNodes, StragglerAction, Shrink, Migrate, MigrateEvery, MigrateMinInterval, MigrateMaxDelay, LossSpike, LossSpikeAction, RestartOn, HealthCheck, HealthCheckTimeout, NCCLForce, NCCLDefault, NCCLPrecedence, Fabric, GPUType, NVMeBW, GPUHourCost, MemoryMargin, InjectEnv, AutoPlan, Stack, Precision, Finetune, UserOverride, MetricsAddr, Pushgateway, Webhook, MaxCkptAge, StopIfOffTrack, Calibration, Tune, TuneBudget, SrunArgs, ContainerImage, ContainerRuntime, ContainerRegistries, ContainerMounts (did you mean CkptSignal?)`}},
		{"unknown key on a partition line lists partition keys", "PartitionName=gpu Bogus=1\n",
			[]string{`trainrun.conf:1: Bogus: unknown key "Bogus"; accepted: CkptSignal, CkptLead, CkptLeadAdapt, CkptGraceBudget, CkptDir, CkptRoots, CkptKeep, CkptKeepEvery, CkptCompress, MaxRequeue, MaxFailuresNoProgress, HangTimeout, MaxRestarts, SpareNodes, StragglerAction, Shrink, Migrate, MigrateEvery, MigrateMinInterval, MigrateMaxDelay, LossSpike, LossSpikeAction, RestartOn, HealthCheck, HealthCheckTimeout, NCCLForce, NCCLDefault, NCCLPrecedence, Fabric, GPUType, NVMeBW, GPUHourCost, MemoryMargin, InjectEnv, AutoPlan, Stack, Precision, Finetune, UserOverride, Webhook, MaxCkptAge`}},
		{"bad signal", "CkptSignal=KILL\n", []string{`trainrun.conf:1: CkptSignal: bad value "KILL": SIGKILL cannot be caught, so no trainer can checkpoint on it; accepted: a signal name: USR1, USR2, TERM, INT, HUP, QUIT, ALRM, URG, XCPU (SIG prefix optional)`}},
		{"bad duration", "CkptLead=5 min\n", []string{`trainrun.conf:1: CkptLead: "min" after CkptLead=5 is not Key=Value (a value with spaces needs quotes)`}},
		{"bad duration unit", "CkptLead=5mins\n", []string{`trainrun.conf:1: CkptLead: bad value "5mins": not a duration; accepted: a duration such as 90s, 5m, 1h30m (a bare number is seconds), more than 0`}},
		{"zero lead", "CkptLead=0\n", []string{`trainrun.conf:1: CkptLead: bad value "0": must be more than 0; accepted: a duration such as 90s, 5m, 1h30m (a bare number is seconds), more than 0`}},
		{"negative count", "MaxRequeue=-1\n", []string{`trainrun.conf:1: MaxRequeue: bad value "-1": less than 0; accepted: a whole number; 0 = never requeue`}},
		{"bad yes/no", "AutoPlan=true\n", []string{`trainrun.conf:1: AutoPlan: bad value "true": not yes or no; accepted: yes or no`}},
		{"bad fabric", "Fabric=infiniband\n", []string{`trainrun.conf:1: Fabric: bad value "infiniband": not one of the accepted values; accepted: auto, ib, roce, efa or tcp`}},
		{"unknown GPU type", "PartitionName=vm GPUType=h100-nvl\n", []string{`trainrun.conf:1: GPUType: bad value "h100-nvl": unknown GPU type "h100-nvl"; did you mean "h100-sxm"?; accepted: auto, or a GPU type of the planner: a100-40gb, a100-80gb, b200, gb200, h100-pcie, h100-sxm, h200, h800, l40s, mi300x, v100-32gb`}},
		{"GPU type by count", "GPUType=8\n", []string{`trainrun.conf:1: GPUType: bad value "8": unknown GPU type "8"`}},
		{"unknown stack", "PartitionName=a100 Stack=lightning\n", []string{`trainrun.conf:1: Stack: bad value "lightning": stack "lightning": accepted: megatron-core, nemo, megatron-2022, fsdp, fsdp:eager, fsdp:compile, deepspeed, deepspeed:zero1, deepspeed:zero2, deepspeed:zero3, deepspeed:pipe, jax`}},
		{"bad NVMe bandwidth", "PartitionName=vm NVMeBW=fast\n", []string{`trainrun.conf:1: NVMeBW: bad value "fast": want auto or a positive number of GB/s per node, at most 10000 (e.g. 25)`}},
		{"zero NVMe bandwidth", "NVMeBW=0\n", []string{`trainrun.conf:1: NVMeBW: bad value "0": want auto or a positive number`}},
		{"bad precision", "Precision=int8\n", []string{`trainrun.conf:1: Precision: bad value "int8"`}},
		{"bad LoRA rank", "Finetune=lora:0\n", []string{`trainrun.conf:1: Finetune: bad value "lora:0": finetune "lora:0": the LoRA rank must be a positive integer, e.g. lora:16`}},
		{"relative root", "CkptRoots=/lustre,scratch\n", []string{`trainrun.conf:1: CkptRoots: bad value "/lustre,scratch": "scratch" is not an absolute path; accepted: any, or a comma-separated list of absolute paths`}},
		{"bad env", "NCCLForce=NCCL_IB_TIMEOUT\n", []string{`trainrun.conf:1: NCCLForce: bad value "NCCL_IB_TIMEOUT": no '=': write NAME=VALUE, e.g. NCCL_IB_TIMEOUT=22; accepted: NAME=VALUE, one variable per NCCLForce= (repeat the key); none clears the site's list on a partition line`}},
		{"override of a site key", "UserOverride=CkptLead,CkptRoots\n", []string{`trainrun.conf:1: UserOverride: bad value "CkptLead,CkptRoots": CkptRoots is the site's to set; users cannot be allowed to override it; accepted: all, none, or a comma-separated list of: CkptSignal, CkptLead, CkptLeadAdapt, CkptDir, CkptKeep, CkptKeepEvery, CkptCompress, MaxRequeue, MaxFailuresNoProgress, HangTimeout, MaxRestarts, SpareNodes, Shrink, Migrate, MigrateEvery, LossSpike, LossSpikeAction, InjectEnv, AutoPlan, Stack, Precision, Finetune, Webhook`}},
		{"bad address", "MetricsAddr=9464\n", []string{`trainrun.conf:1: MetricsAddr: bad value "9464": not HOST:PORT; accepted: off, or HOST:PORT to serve Prometheus metrics on (HOST may be empty: all addresses)`}},
		{"bad URL", "Pushgateway=pushgw:9091\n", []string{`trainrun.conf:1: Pushgateway: bad value "pushgw:9091": not an http:// or https:// URL with a host; accepted: off, or an http(s) URL of a Prometheus Pushgateway`}},
		{"empty value", "CkptKeep=\n", []string{`trainrun.conf:1: CkptKeep: empty value; accepted: a whole number, at least 1 (default 3)`}},
		{"duplicate partition", "PartitionName=gpu CkptKeep=2\nPartitionName=cpu CkptKeep=1\nPartitionName=gpu MaxRequeue=1\n",
			[]string{`trainrun.conf:3: PartitionName: partition "gpu" is defined again (first on line 1); put its settings on one line, continued with \`}},
		{"duplicate key on one line", "PartitionName=gpu CkptKeep=2 ckptkeep=3\n", []string{`trainrun.conf:1: ckptkeep: given twice on one line (first on line 1)`}},
		{"site key set twice", "CkptKeep=2\nCkptLead=1m\nCkptKeep=3\n", []string{`trainrun.conf:3: CkptKeep: set again site-wide (first on line 1); set it once`}},
		{"site-only key on a partition", "PartitionName=gpu MetricsAddr=:9000\n", []string{`trainrun.conf:1: MetricsAddr: only valid site-wide (on a line without PartitionName=), not for partition gpu`}},
		{"PartitionName not first", "CkptKeep=2 PartitionName=gpu\n", []string{`trainrun.conf:1: PartitionName: PartitionName= must begin its line; the settings after it belong to that partition`}},
		{"PartitionName=DEFAULT", "PartitionName=DEFAULT CkptKeep=2\n", []string{`trainrun.conf:1: PartitionName: PartitionName=DEFAULT is not used here: write site-wide Key=Value lines, which every partition inherits`}},
		{"bad partition name", "PartitionName=gpu,cpu CkptKeep=2\n", []string{`trainrun.conf:1: PartitionName: "gpu,cpu" is not a Slurm partition name (letters, digits, '-', '_', '.')`}},
		{"variable forced twice", "NCCLForce=NCCL_IB_TIMEOUT=22\nNCCLForce=NCCL_IB_TIMEOUT=23\n", []string{`trainrun.conf:2: NCCLForce: NCCL_IB_TIMEOUT is given twice (first on line 1)`}},
		{"variable forced and defaulted", "NCCLForce=NCCL_DEBUG=WARN\nNCCLDefault=NCCL_DEBUG=INFO\n", []string{`trainrun.conf:2: NCCLDefault: NCCL_DEBUG is also in NCCLForce (line 1); a variable is either forced or defaulted`}},
		{"none site-wide", "NCCLForce=none\n", []string{`trainrun.conf:1: NCCLForce: none only makes sense on a PartitionName= line, to drop the site's list; leave the key out here`}},
		{"CkptDir outside roots", "CkptRoots=/lustre\nPartitionName=gpu CkptDir=/home/%u/ckpt\n", []string{`trainrun.conf:2: CkptDir: /home/%u/ckpt is not under CkptRoots=/lustre (for partition gpu); move it or add its root`}},
		{"bad CkptDir placeholder", "CkptDir=/lustre/%q\n", []string{`trainrun.conf:1: CkptDir: bad value "/lustre/%q": "/lustre/%q": after % write u (user), j (job id), x (job name) or %; accepted: none, or an absolute path; %u user, %j job id, %x job name, %% a '%'`}},
		{"lexical error", "CkptLead 5m\n", []string{`trainrun.conf:1: CkptLead: expected CkptLead=VALUE, found "CkptLead 5m"`}},
		{"every error reported, in line order", "Bogus=1\nCkptKeep=0\nPartitionName=gpu Fabric=fast\nCkptLead 5m\n", []string{
			`trainrun.conf:1: Bogus: unknown key "Bogus"`,
			`trainrun.conf:2: CkptKeep: bad value "0": less than 1`,
			`trainrun.conf:3: Fabric: bad value "fast"`,
			`trainrun.conf:4: CkptLead: expected CkptLead=VALUE`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tc.conf), "trainrun.conf")
			if err == nil {
				t.Fatalf("no error; policy %+v", p)
			}
			var list Errors
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want Errors", err)
			}
			if len(list) != len(tc.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(list), len(tc.want), err)
			}
			for i, e := range list {
				if got := e.Error(); got != tc.want[i] && !strings.HasPrefix(got, tc.want[i]) {
					t.Errorf("error %d\n got %s\nwant %s", i, got, tc.want[i])
				}
				if e.File != "trainrun.conf" || e.Line == 0 || e.Key == "" {
					t.Errorf("error %d lacks file, line or key: %#v", i, e)
				}
			}
			var ce *topo.ConfError
			if !errors.As(err, &ce) {
				t.Error("errors.As cannot find a *topo.ConfError")
			}
		})
	}
}

func TestExampleFileParses(t *testing.T) {
	f, err := os.Open("../../contrib/trainrun.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := Parse(f, "trainrun.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Partitions(); !slices.Equal(got, []string{"preempt", "roce", "debug"}) {
		t.Errorf("partitions %v", got)
	}
	if !slices.ContainsFunc(p.Effective("roce").NCCLForce.Value, func(v EnvVar) bool { return v.Name == "NCCL_IB_TIMEOUT" && v.Value == "23" }) {
		t.Errorf("roce NCCLForce %+v", p.Effective("roce").NCCLForce.Value)
	}
}

// The list UserOverride accepts is the set of keys marked User in the table.
func TestUserKeysMatchTable(t *testing.T) {
	var marked []string
	for _, k := range Keys() {
		if k.User {
			marked = append(marked, k.Name)
		}
		if k.User && k.SiteOnly {
			t.Errorf("%s is both user-overridable and site-only", k.Name)
		}
	}
	if !slices.Equal(marked, userKeyNames()) {
		t.Errorf("keys marked User %v\nuserKeyNames      %v", marked, userKeyNames())
	}
}

func TestExpandCkptDir(t *testing.T) {
	if got := ExpandCkptDir("/lustre/%u/%x-%j/100%%", "ana", "4242", "llama"); got != "/lustre/ana/llama-4242/100%" {
		t.Errorf("got %q", got)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{90 * time.Second: "1m30s", 5 * time.Minute: "5m", 2 * time.Hour: "2h", 3723 * time.Second: "1h2m3s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// The plan package's NCCL input is what Settings.NCCL builds.
var _ plan.NCCLPolicy = Settings{}.NCCL()

// FuzzParse: no input panics; an accepted file yields settings for each of
// its partitions.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	if b, err := os.ReadFile("../../contrib/trainrun.conf.example"); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, conf string) {
		p, err := Parse(strings.NewReader(conf), "f")
		if err != nil {
			return
		}
		for _, name := range append(p.Partitions(), "") {
			_ = p.Effective(name).Rows()
		}
	})
}

// GPUType: auto by default; a catalog name per partition, in any case, over
// the site's; shown by Rows as the file would say it.
func TestGPUType(t *testing.T) {
	p := mustParse(t, "GPUType=A100-80GB\nPartitionName=vm GPUType=h100-sxm\nPartitionName=other GPUType=auto\nPartitionName=bare MaxRequeue=1\n")
	for _, tc := range []struct{ part, want, row, src string }{
		{"vm", "h100-sxm", "h100-sxm", "partition vm (trainrun.conf:2)"},
		{"other", "", "auto", "partition other (trainrun.conf:3)"},
		{"bare", "a100-80gb", "a100-80gb", "site (trainrun.conf:1)"},
		{"unnamed", "a100-80gb", "a100-80gb", "site (trainrun.conf:1)"},
	} {
		s := p.Effective(tc.part)
		if s.GPUType.Value != tc.want || s.GPUType.Source.String() != tc.src {
			t.Errorf("partition %s: GPUType %q from %s; want %q from %s", tc.part, s.GPUType.Value, s.GPUType.Source, tc.want, tc.src)
		}
		i := slices.IndexFunc(s.Rows(), func(r Row) bool { return r.Key == "GPUType" })
		if i < 0 || s.Rows()[i].Value != tc.row {
			t.Errorf("partition %s: Rows show GPUType as %+v, want %q", tc.part, s.Rows(), tc.row)
		}
	}
	if p.MayOverride("GPUType", "vm") {
		t.Error("users may override GPUType: it describes the site's hardware")
	}
}

// NVMeBW: auto (0, the planner's default) unless given; GB/s per node,
// per partition over the site-wide value.
func TestNVMeBW(t *testing.T) {
	p := mustParse(t, "NVMeBW=12.5\nPartitionName=fast NVMeBW=50\nPartitionName=plain NVMeBW=auto\nPartitionName=bare MaxRequeue=1\n")
	for _, tc := range []struct {
		part string
		want float64
		row  string
		src  string
	}{{"fast", 50, "50", "partition fast (trainrun.conf:2)"}, {"plain", 0, "auto", "partition plain (trainrun.conf:3)"}, {"bare", 12.5, "12.5", "site (trainrun.conf:1)"}} {
		s := p.Effective(tc.part)
		if s.NVMeBW.Value != tc.want || s.NVMeBW.Source.String() != tc.src {
			t.Errorf("partition %s: NVMeBW %g from %s; want %g from %s", tc.part, s.NVMeBW.Value, s.NVMeBW.Source, tc.want, tc.src)
		}
		i := slices.IndexFunc(s.Rows(), func(r Row) bool { return r.Key == "NVMeBW" })
		if i < 0 || s.Rows()[i].Value != tc.row {
			t.Errorf("partition %s: Rows show NVMeBW as %+v, want %q", tc.part, s.Rows(), tc.row)
		}
	}
	if d := Default().Effective("x").NVMeBW; d.Value != 0 || d.Source.Kind != FromDefault {
		t.Errorf("default NVMeBW %+v, want auto", d)
	}
	if p.MayOverride("NVMeBW", "fast") {
		t.Error("users may override NVMeBW: it describes the site's hardware (--nvme-bw still wins for one run)")
	}
}

// GPUHourCost: none (-1) unless given; a price per partition over the
// site-wide one; 0 is a price (free), not none.
func TestGPUHourCost(t *testing.T) {
	p := mustParse(t, "GPUHourCost=1.5\nPartitionName=hopper GPUHourCost=4\nPartitionName=free GPUHourCost=0\nPartitionName=unpriced GPUHourCost=none\nPartitionName=bare MaxRequeue=1\n")
	for _, tc := range []struct {
		part string
		want float64
		row  string
	}{{"hopper", 4, "4"}, {"free", 0, "0"}, {"unpriced", -1, "none"}, {"bare", 1.5, "1.5"}} {
		s := p.Effective(tc.part)
		if s.GPUHourCost.Value != tc.want {
			t.Errorf("partition %s: GPUHourCost %g, want %g", tc.part, s.GPUHourCost.Value, tc.want)
		}
		i := slices.IndexFunc(s.Rows(), func(r Row) bool { return r.Key == "GPUHourCost" })
		if i < 0 || s.Rows()[i].Value != tc.row {
			t.Errorf("partition %s: Rows show GPUHourCost as %+v, want %q", tc.part, s.Rows(), tc.row)
		}
	}
	if d := Default().Effective("x").GPUHourCost; d.Value != -1 || d.Source.Kind != FromDefault {
		t.Errorf("default GPUHourCost %+v, want none", d)
	}
	for _, bad := range []string{"cheap", "-1", "NaN", "2e9"} {
		if _, err := Parse(strings.NewReader("GPUHourCost="+bad+"\n"), "trainrun.conf"); err == nil || !strings.Contains(err.Error(), "want none or a price per GPU-hour") {
			t.Errorf("GPUHourCost=%s: %v", bad, err)
		}
	}
}

// HangTimeout= and MaxRestarts= (issue 21): the defaults, per partition, and
// what is refused.
func TestHangKeys(t *testing.T) {
	p, err := Parse(strings.NewReader("HangTimeout=90\nMaxRestarts=5\nPartitionName=debug HangTimeout=OFF MaxRestarts=0\nPartitionName=long HangTimeout=auto\n"), "trainrun.conf")
	if err != nil {
		t.Fatal(err)
	}
	for part, want := range map[string][2]string{"gpu": {"1m30s", "5"}, "debug": {"off", "0"}, "long": {"auto", "5"}} {
		s := p.Effective(part)
		if s.HangTimeout.Value != want[0] || strconv.Itoa(s.MaxRestarts.Value) != want[1] {
			t.Errorf("%s: HangTimeout=%q MaxRestarts=%d, want %s", part, s.HangTimeout.Value, s.MaxRestarts.Value, want)
		}
	}
	if s := Default().Effective("gpu"); s.HangTimeout.Value != "auto" || s.MaxRestarts.Value != 2 {
		t.Errorf("defaults: HangTimeout=%q MaxRestarts=%d, want auto 2", s.HangTimeout.Value, s.MaxRestarts.Value)
	}
	for _, bad := range []string{"HangTimeout=soon", "HangTimeout=500ms", "MaxRestarts=-1", "MaxRestarts=two"} {
		if _, err := Parse(strings.NewReader(bad+"\n"), "trainrun.conf"); err == nil || !strings.Contains(err.Error(), "trainrun.conf:1") {
			t.Errorf("%s: err %v, want one naming the line", bad, err)
		}
	}
}

// SpareNodes= (issue 21): 0 by default, per partition; a negative or
// non-numeric value is refused naming the line. (That it is less than the
// job's nodes is checked by trainrun run, which knows the allocation.)
func TestSpareNodesKey(t *testing.T) {
	p := mustParse(t, "SpareNodes=1\nPartitionName=big SpareNodes=4\n")
	for part, want := range map[string]int{"gpu": 1, "big": 4} {
		if got := p.Effective(part).SpareNodes.Value; got != want {
			t.Errorf("%s: SpareNodes=%d, want %d", part, got, want)
		}
	}
	if got := Default().Effective("gpu").SpareNodes.Value; got != 0 {
		t.Errorf("default SpareNodes=%d, want 0", got)
	}
	for _, bad := range []string{"SpareNodes=-1", "SpareNodes=two"} {
		if _, err := Parse(strings.NewReader(bad+"\n"), "trainrun.conf"); err == nil || !strings.Contains(err.Error(), "trainrun.conf:1: SpareNodes") {
			t.Errorf("%s: err %v, want one naming the line and key", bad, err)
		}
	}
}

// StragglerAction= (issue 21): report by default, exclude per partition;
// anything else refused with the accepted values.
func TestStragglerAction(t *testing.T) {
	p := mustParse(t, "PartitionName=big StragglerAction=exclude\n")
	if got := p.Effective("big").StragglerAction.Value; got != "exclude" {
		t.Errorf("big: %q, want exclude", got)
	}
	if got := p.Effective("other").StragglerAction; got.Value != "report" || got.Source.Kind != FromDefault {
		t.Errorf("default: %+v, want report", got)
	}
	if _, err := Parse(strings.NewReader("StragglerAction=drain\n"), "trainrun.conf"); err == nil ||
		!strings.Contains(err.Error(), "trainrun.conf:1") || !strings.Contains(err.Error(), "exclude") {
		t.Errorf("StragglerAction=drain: %v", err)
	}
}

// The settings of a job whose partition is unrecorded are the site's, with
// only the user overrides the site and every partition allow.
func TestEffectiveUnrecordedIsStrictest(t *testing.T) {
	p := mustParse(t, `UserOverride=CkptLead,MaxRequeue,CkptKeep
PartitionName=open UserOverride=all
PartitionName=tight UserOverride=CkptLead,CkptKeep CkptLead=10m
PartitionName=tighter UserOverride=CkptKeep,CkptLead,HangTimeout
`)
	s := p.Effective(Unrecorded)
	if got := s.UserOverride.Value; got.All || !slices.Equal(got.Keys, []string{"CkptLead", "CkptKeep"}) {
		t.Errorf("UserOverride %v, want CkptLead,CkptKeep", got)
	}
	if s.CkptLead.Value != p.Effective("").CkptLead.Value {
		t.Errorf("CkptLead %v: not the site's", s.CkptLead.Value)
	}
	if p.MayOverride("MaxRequeue", Unrecorded) || !p.MayOverride("MaxRequeue", "open") {
		t.Error("MayOverride MaxRequeue")
	}
	none := mustParse(t, "PartitionName=locked UserOverride=none\n")
	if o := none.Effective(Unrecorded).UserOverride.Value; o.All || len(o.Keys) != 0 {
		t.Errorf("a partition allowing none: %v", o)
	}
}

// The container keys (issue 33): lists repeat and append, none clears them
// on a partition line, the registries are host names.
func TestContainerKeys(t *testing.T) {
	p := mustParse(t, "SrunArgs=--mpi=pmix SrunArgs=--network=sn_all ContainerMounts=/datasets:/datasets:ro ContainerRegistries=nvcr.io,local\n"+
		"PartitionName=gpu ContainerImage=nvcr.io\\#nvidia/pytorch:24.01-py3 SrunArgs=none SrunArgs=--mpi=pmi2 ContainerRuntime=podman\n")
	site, gpu := p.Effective("cpu"), p.Effective("gpu")
	if got := strings.Join(site.SrunArgs.Value, " "); got != "--mpi=pmix --network=sn_all" {
		t.Errorf("site SrunArgs %q", got)
	}
	if got := strings.Join(gpu.SrunArgs.Value, " "); got != "--mpi=pmi2" || gpu.ContainerImage.Value != "nvcr.io#nvidia/pytorch:24.01-py3" || gpu.ContainerRuntime.Value != "podman" {
		t.Errorf("partition: SrunArgs %q image %q runtime %q", got, gpu.ContainerImage.Value, gpu.ContainerRuntime.Value)
	}
	if site.ContainerImage.Value != "" || site.ContainerRuntime.Value != "pyxis" || strings.Join(site.ContainerRegistries.Value, ",") != "nvcr.io,local" || len(gpu.ContainerMounts.Value) != 1 {
		t.Errorf("site: %+v %+v %+v", site.ContainerImage, site.ContainerRegistries, gpu.ContainerMounts)
	}
	if _, err := Parse(strings.NewReader("ContainerRegistries=nvcr.io/nvidia\n"), "trainrun.conf"); err == nil || !strings.Contains(err.Error(), "is not a registry host") {
		t.Errorf("registry with a path: %v", err)
	}
}

// MigrateMaxDelay= (issue 34): 0 by default (a move delays no waiting
// job), a duration site-wide or per partition, never a user's to raise.
func TestMigrateMaxDelay(t *testing.T) {
	p := mustParse(t, "MigrateMaxDelay=2m\nPartitionName=hopper MigrateMaxDelay=90\n")
	for part, want := range map[string]time.Duration{"ampere": 2 * time.Minute, "hopper": 90 * time.Second} {
		if got := p.Effective(part).MigrateMaxDelay.Value; got != want {
			t.Errorf("%s: MigrateMaxDelay=%s, want %s", part, got, want)
		}
	}
	if got := Default().Effective("gpu").MigrateMaxDelay; got.Value != 0 || got.Source.Kind != FromDefault {
		t.Errorf("default MigrateMaxDelay %+v, want 0 from the default", got)
	}
	if Default().MayOverride("MigrateMaxDelay", "gpu") {
		t.Error("a user may override MigrateMaxDelay; want the site's alone")
	}
	for _, bad := range []string{"MigrateMaxDelay=-1m", "MigrateMaxDelay=soon", "MigrateMaxDelay=1.5s"} {
		if _, err := Parse(strings.NewReader(bad+"\n"), "trainrun.conf"); err == nil || !strings.Contains(err.Error(), "trainrun.conf:1: MigrateMaxDelay: bad value") ||
			!strings.Contains(err.Error(), "accepted: a duration such as 2m") {
			t.Errorf("%s: err %v, want one naming the line, key, value and what is accepted", bad, err)
		}
	}
}
