package policy

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
)

// The file, in slurm.conf style (the lexical rules are topo.ReadConfLines'):
//
//	# site-wide settings: one or more Key=Value per line
//	CkptSignal=USR2
//	CkptLead=5m
//	NCCLForce=NCCL_IB_TIMEOUT=22
//	NCCLForce=NCCL_IB_RETRY_CNT=13
//	# per partition: the line begins with PartitionName=; keys override the site's
//	PartitionName=preempt CkptGraceBudget=90s MaxRequeue=500 \
//	    UserOverride=CkptLead,CkptKeep
//
// Keys are case-insensitive. NCCLForce and NCCLDefault take one variable
// each and may be repeated; a partition's entry for a variable replaces the
// site's, and NCCLForce=none on a partition line drops the site's list.

// SourceKind says which level of the file set a value.
type SourceKind int

const (
	FromDefault   SourceKind = iota // the table in keys.go
	FromSite                        // a site-wide line
	FromPartition                   // a PartitionName= line
)

// Source is where a value came from.
type Source struct {
	Kind      SourceKind
	Partition string // for FromPartition
	File      string
	Line      int
}

// String is "default", "site (trainrun.conf:3)" or "partition gpu (trainrun.conf:9)".
func (s Source) String() string {
	switch s.Kind {
	case FromSite:
		return fmt.Sprintf("site (%s:%d)", s.File, s.Line)
	case FromPartition:
		return fmt.Sprintf("partition %s (%s:%d)", s.Partition, s.File, s.Line)
	}
	return "default"
}

// Setting is a value and where it came from.
type Setting[T any] struct {
	Value  T
	Source Source
}

// EnvVar is one NCCLForce/NCCLDefault variable.
type EnvVar struct {
	Name, Value string
	Source      Source
}

// Override is UserOverride: all keys, or the listed ones (none when empty).
type Override struct {
	All  bool
	Keys []string // canonical names
}

func (o Override) String() string {
	switch {
	case o.All:
		return "all"
	case len(o.Keys) == 0:
		return "none"
	}
	return strings.Join(o.Keys, ",")
}

// Settings are the effective settings of one partition. Zero values mean
// what keys.go says: CkptGraceBudget 0 = auto, CkptRoots nil = any, CkptDir
// "" = none, GPUType "" = auto, MetricsAddr/Pushgateway/Webhook "" = off, MaxCkptAge 0 = off.
type Settings struct {
	Partition string // "" for the site-wide settings

	CkptSignal            Setting[string]        // signal name without SIG: "USR2"
	CkptLead              Setting[time.Duration] // before the job's end
	CkptLeadAdapt         Setting[bool]          // raise the lead on trainrun's own clock when saves outgrow it
	CkptGraceBudget       Setting[time.Duration] // 0 = the partition's GraceTime
	CkptDir               Setting[string]        // may hold %u %j %x; see ExpandCkptDir
	CkptRoots             Setting[[]string]      // cleaned absolute paths; nil = any
	CkptKeep              Setting[int]
	CkptKeepEvery         Setting[int]    // 0 = off
	CkptCompress          Setting[string] // "no", "auto", "archive" or "always"
	MaxRequeue            Setting[int]
	MaxFailuresNoProgress Setting[int]
	HangTimeout           Setting[string]        // "auto", "off" or a duration (FormatDuration)
	MaxRestarts           Setting[int]           // failed or hung steps restarted inside the allocation
	SpareNodes            Setting[int]           // nodes the job holds beyond the layout's, for restarts after a lost node
	StragglerAction       Setting[string]        // "report" or "exclude" (a straggler's node from the next requeue)
	RestartOn             Setting[string]        // a failed step's action by class, failclass.ParsePolicy's complete form (issue 31)
	HealthCheck           Setting[string]        // the site's node health script ("" none)
	HealthCheckTimeout    Setting[time.Duration] // its time limit
	Shrink                Setting[string]        // "yes" or "no": restart on fewer nodes with a smaller dp (TRAINRUN_RESHARD=dp trainers)
	Migrate               Setting[string]        // "yes" or "no": a late-bound job moves to another of its partitions when that finishes sooner
	MigrateEvery          Setting[time.Duration] // how often it checks
	MigrateMinInterval    Setting[time.Duration] // at most one move per this interval
	MigrateMaxDelay       Setting[time.Duration] // the most a move may delay a job waiting where it moves (0: none)
	LossSpike             Setting[string]        // lossspike.ParseRule: off, nan, mad:K[:window=W][:metric=NAME]
	LossSpikeAction       Setting[string]        // lossspike.ParseAction: report, stop, rollback[:N]
	NCCLForce             Setting[[]EnvVar]      // Source: where the list was last cleared (or default); each variable has its own
	NCCLDefault           Setting[[]EnvVar]
	NCCLPrecedence        Setting[string]        // "user" or "site"
	Fabric                Setting[string]        // "auto", "ib", "roce", "efa", "tcp"
	GPUType               Setting[string]        // the planner's GPU type for nodes whose GPUs are not identified; "" = auto
	NVMeBW                Setting[float64]       // the nodes' NVMe bandwidth, GB/s per node, for offload=nvme; 0 = auto (the planner's default)
	Calibration           Setting[string]        // site calibration directory; "" = none
	Tune                  Setting[string]        // trainrun run --tune K[:STEPS]; "" = none
	TuneBudget            Setting[time.Duration] // --tune-budget; 0 = auto
	GPUHourCost           Setting[float64]       // price of one GPU-hour (any unit), for trainrun submit --objective cost; -1 = none
	MemoryMargin          Setting[float64]       // share of GPU memory a plan should leave free (a fraction; plan.DefaultMemoryMargin)
	InjectEnv             Setting[bool]          // the plugin injects the environment (else it only reports)
	AutoPlan              Setting[bool]
	Stack                 Setting[string] // the planner's stack name (plan.ParseStack), canonical spelling
	Precision             Setting[string] // bf16, fp16, fp8
	Finetune              Setting[string] // full, lora, lora:RANK
	UserOverride          Setting[Override]
	// Containers and srun options (container.go).
	SrunArgs            Setting[[]string] // srun options added to every step; nil = none
	ContainerImage      Setting[string]   // "" = none
	ContainerRuntime    Setting[string]   // "pyxis", "podman", "apptainer", "enroot"
	ContainerRegistries Setting[[]string] // nil = any
	ContainerMounts     Setting[[]string] // pyxis --container-mounts values
	MetricsAddr         Setting[string]
	Pushgateway         Setting[string]
	Webhook             Setting[string]
	MaxCkptAge          Setting[time.Duration]
	StopIfOffTrack      Setting[float64] // trainrun run --stop-if-off-track: the probability, 0 = no (issue 32)
}

// entry is one parsed Key=Value.
type entry struct {
	key  *Key
	val  any
	raw  string
	line int
}

// level is the site-wide lines or one partition's line.
type level struct {
	partition string
	line      int
	entries   []entry
}

// Policy is a parsed trainrun.conf.
type Policy struct {
	file       string
	site       level
	partitions []*level
	byName     map[string]*level
}

// Default is the policy without a file: every key at its default.
func Default() *Policy { return &Policy{byName: map[string]*level{}} }

// File is the name the policy was parsed under ("" for Default).
func (p *Policy) File() string { return p.file }

// Partitions lists the partitions the file has lines for, in file order.
func (p *Policy) Partitions() []string {
	out := make([]string, len(p.partitions))
	for i, l := range p.partitions {
		out[i] = l.partition
	}
	return out
}

// HasPartition reports whether the file has a PartitionName= line for name.
func (p *Policy) HasPartition(name string) bool { _, ok := p.byName[name]; return ok }

// SiteSettings is the number of Key=Value settings on site-wide lines.
func (p *Policy) SiteSettings() int { return len(p.site.entries) }

// Errors is every problem found in a file, in line order. Each is a
// *topo.ConfError printing as "file:line: key: message".
type Errors []*topo.ConfError

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, x := range e {
		lines[i] = x.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find each *topo.ConfError.
func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, x := range e {
		out[i] = x
	}
	return out
}

// Parse reads a trainrun.conf. filename names it in errors and sources. On
// any problem it returns Errors holding all of them.
func Parse(r io.Reader, filename string) (*Policy, error) {
	p := &Policy{file: filename, byName: map[string]*level{}}
	var errs Errors
	fail := func(line int, key, value, format string, a ...any) {
		errs = append(errs, &topo.ConfError{File: filename, Line: line, Key: key, Value: value, Msg: fmt.Sprintf(format, a...)})
	}
	lines, lexErr := topo.ReadConfLines(r, filename)
	if lexErr != nil {
		var ce *topo.ConfError
		for _, e := range unwrapAll(lexErr) {
			if errors.As(e, &ce) {
				errs = append(errs, ce)
			} else {
				return nil, lexErr // a read error, not a syntax error
			}
		}
	}
	siteSeen := map[*Key]int{}
	for _, l := range lines {
		pairs := l.Pairs
		lv := &p.site
		if strings.EqualFold(pairs[0].Key, "PartitionName") {
			name := pairs[0].Value
			pairs = pairs[1:]
			switch {
			case name == "":
				fail(l.Line, "PartitionName", name, "empty partition name")
				continue
			case strings.EqualFold(name, "DEFAULT"):
				fail(l.Line, "PartitionName", name, "PartitionName=DEFAULT is not used here: write site-wide Key=Value lines, which every partition inherits")
				continue
			case !validPartitionName(name):
				fail(l.Line, "PartitionName", name, "%q is not a Slurm partition name (letters, digits, '-', '_', '.')", name)
				continue
			}
			if prev, dup := p.byName[name]; dup {
				fail(l.Line, "PartitionName", name, "partition %q is defined again (first on line %d); put its settings on one line, continued with \\", name, prev.line)
				continue
			}
			lv = &level{partition: name, line: l.Line}
			p.partitions = append(p.partitions, lv)
			p.byName[name] = lv
		}
		onLine := map[*Key]int{}
		for _, pr := range pairs {
			if strings.EqualFold(pr.Key, "PartitionName") {
				fail(pr.Line, pr.Key, pr.Value, "PartitionName= must begin its line; the settings after it belong to that partition")
				continue
			}
			key := lookupKey(pr.Key)
			if key == nil {
				fail(pr.Line, pr.Key, pr.Value, "%s", topo.UnknownKeyMessage(pr.Key, acceptedKeys(lv.partition != "")))
				continue
			}
			if key.SiteOnly && lv.partition != "" {
				fail(pr.Line, pr.Key, pr.Value, "only valid site-wide (on a line without PartitionName=), not for partition %s", lv.partition)
				continue
			}
			if first, dup := onLine[key]; dup && !key.Repeat {
				fail(pr.Line, pr.Key, pr.Value, "given twice on one line (first on line %d)", first)
				continue
			}
			onLine[key] = pr.Line
			if first, dup := siteSeen[key]; dup && lv.partition == "" && !key.Repeat {
				fail(pr.Line, pr.Key, pr.Value, "set again site-wide (first on line %d); set it once", first)
				continue
			}
			if lv.partition == "" {
				siteSeen[key] = pr.Line
			}
			if pr.Value == "" {
				fail(pr.Line, pr.Key, pr.Value, "empty value; accepted: %s (default %s)", key.Format, key.Default)
				continue
			}
			v, err := key.parse(pr.Value)
			if err != nil {
				fail(pr.Line, pr.Key, pr.Value, "bad value %q: %v; accepted: %s", pr.Value, err, key.Format)
				continue
			}
			lv.entries = append(lv.entries, entry{key: key, val: v, raw: pr.Value, line: pr.Line})
		}
	}
	for _, lv := range append([]*level{&p.site}, p.partitions...) {
		checkLevel(lv, fail)
	}
	if len(errs) == 0 {
		for _, name := range append([]string{""}, p.Partitions()...) {
			checkEffective(p.Effective(name), fail)
		}
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *topo.ConfError) int { return a.Line - b.Line })
		return nil, errs
	}
	return p, nil
}

func unwrapAll(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		return u.Unwrap()
	}
	return []error{err}
}

// checkLevel finds NCCL variables given twice on one level, or both forced
// and defaulted there.
func checkLevel(lv *level, fail func(int, string, string, string, ...any)) {
	type seen struct {
		key  string
		line int
	}
	vars := map[string]seen{}
	for _, e := range lv.entries {
		op, ok := e.val.(envOp)
		if !ok {
			continue
		}
		if op.clear {
			if lv.partition == "" {
				fail(e.line, e.key.Name, e.raw, "none only makes sense on a PartitionName= line, to drop the site's list; leave the key out here")
			}
			continue
		}
		if prev, dup := vars[op.name]; dup {
			if prev.key == e.key.Name {
				fail(e.line, e.key.Name, e.raw, "%s is given twice (first on line %d)", op.name, prev.line)
			} else {
				fail(e.line, e.key.Name, e.raw, "%s is also in %s (line %d); a variable is either forced or defaulted", op.name, prev.key, prev.line)
			}
			continue
		}
		vars[op.name] = seen{e.key.Name, e.line}
	}
}

// checkEffective checks rules between keys on the merged settings.
func checkEffective(s Settings, fail func(int, string, string, string, ...any)) {
	if !underRoot(s.CkptDir.Value, s.CkptRoots.Value) {
		src := s.CkptDir.Source
		if src.Kind == FromDefault || (s.CkptRoots.Source.Line > src.Line && s.CkptRoots.Source.Kind >= src.Kind) {
			src = s.CkptRoots.Source
		}
		where := "site-wide"
		if s.Partition != "" {
			where = "for partition " + s.Partition
		}
		fail(src.Line, "CkptDir", s.CkptDir.Value, "%s is not under CkptRoots=%s (%s); move it or add its root", s.CkptDir.Value, strings.Join(s.CkptRoots.Value, ","), where)
	}
}

func validPartitionName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func acceptedKeys(partition bool) []string {
	var out []string
	if !partition {
		out = append(out, "PartitionName")
	}
	for _, k := range keys {
		if !(partition && k.SiteOnly) {
			out = append(out, k.Name)
		}
	}
	return out
}

// defaults are the Settings of the table, parsed once.
func defaults() Settings {
	var s Settings
	for _, k := range keys {
		v, err := k.parse(k.Default)
		if err != nil {
			panic("policy: default of " + k.Name + " does not parse: " + err.Error())
		}
		k.set(&s, v, Source{Kind: FromDefault})
	}
	return s
}

// Effective returns the settings for partition: the defaults, overridden by
// the site-wide lines, overridden by the partition's line. A partition the
// file does not name gets the site-wide settings; "" asks for those.
//
// Unrecorded asks for the strictest settings: those of a job whose
// partition Slurm's prolog did not record, where the only other word is the
// job's own environment, which its user writes (review t4, F5).
func (p *Policy) Effective(partition string) Settings {
	if partition == Unrecorded {
		return p.strictest()
	}
	s := defaults()
	s.Partition = partition
	apply := func(lv *level, src Source) {
		for _, e := range lv.entries {
			src.Line = e.line
			e.key.set(&s, e.val, src)
		}
	}
	apply(&p.site, Source{Kind: FromSite, File: p.file})
	if lv, ok := p.byName[partition]; ok {
		apply(lv, Source{Kind: FromPartition, Partition: partition, File: p.file})
	}
	// a forced variable is not also a default
	s.NCCLDefault.Value = slices.DeleteFunc(s.NCCLDefault.Value, func(d EnvVar) bool {
		return slices.ContainsFunc(s.NCCLForce.Value, func(f EnvVar) bool { return f.Name == d.Name })
	})
	return s
}

// Unrecorded is the partition name for a job whose partition is not
// known from Slurm itself (it cannot be a partition's: Slurm's names do not
// hold '*' in practice, and the plugin's record refuses none of the others).
const Unrecorded = "*unrecorded*"

// strictest is the site-wide settings, with only the user overrides that
// the site and every partition allow: a user who could choose the
// partition's policy by writing SLURM_JOB_PARTITION gains nothing from it.
func (p *Policy) strictest() Settings {
	s := p.Effective("")
	o := s.UserOverride.Value
	names := make([]string, 0, len(p.byName))
	for name := range p.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		po := p.Effective(name).UserOverride.Value
		switch {
		case po.All:
		case o.All:
			o = Override{Keys: slices.Clone(po.Keys)}
		default:
			o.Keys = slices.DeleteFunc(slices.Clone(o.Keys), func(k string) bool { return !slices.Contains(po.Keys, k) })
		}
	}
	s.UserOverride.Value = o
	s.Partition = Unrecorded
	return s
}

// MayOverride reports whether users of partition may override key (any
// case). Keys the site alone sets, and unknown keys, are never overridable.
func (p *Policy) MayOverride(key, partition string) bool {
	k := lookupKey(key)
	if k == nil || !k.User {
		return false
	}
	o := p.Effective(partition).UserOverride.Value
	return o.All || slices.Contains(o.Keys, k.Name)
}

// Row is one line of `trainrun policy show`.
type Row struct {
	Key, Value string
	Source     Source
}

// Rows lists the settings for display, one row per NCCL variable.
func (s Settings) Rows() []Row {
	dur := func(d time.Duration, zero string) string {
		if d == 0 {
			return zero
		}
		return FormatDuration(d)
	}
	str := func(v, zero string) string {
		if v == "" {
			return zero
		}
		return v
	}
	yesno := map[bool]string{true: "yes", false: "no"}
	rows := []Row{
		{"CkptSignal", s.CkptSignal.Value, s.CkptSignal.Source},
		{"CkptLead", dur(s.CkptLead.Value, "0"), s.CkptLead.Source},
		{"CkptLeadAdapt", yesno[s.CkptLeadAdapt.Value], s.CkptLeadAdapt.Source},
		{"CkptGraceBudget", dur(s.CkptGraceBudget.Value, "auto"), s.CkptGraceBudget.Source},
		{"CkptDir", str(s.CkptDir.Value, "none"), s.CkptDir.Source},
		{"CkptRoots", str(strings.Join(s.CkptRoots.Value, ","), "any"), s.CkptRoots.Source},
		{"CkptKeep", strconv.Itoa(s.CkptKeep.Value), s.CkptKeep.Source},
		{"CkptKeepEvery", str(zeroOff(s.CkptKeepEvery.Value), "off"), s.CkptKeepEvery.Source},
		{"CkptCompress", s.CkptCompress.Value, s.CkptCompress.Source},
		{"MaxRequeue", strconv.Itoa(s.MaxRequeue.Value), s.MaxRequeue.Source},
		{"MaxFailuresNoProgress", strconv.Itoa(s.MaxFailuresNoProgress.Value), s.MaxFailuresNoProgress.Source},
		{"HangTimeout", s.HangTimeout.Value, s.HangTimeout.Source},
		{"MaxRestarts", strconv.Itoa(s.MaxRestarts.Value), s.MaxRestarts.Source},
		{"SpareNodes", strconv.Itoa(s.SpareNodes.Value), s.SpareNodes.Source},
		{"StragglerAction", s.StragglerAction.Value, s.StragglerAction.Source},
		{"Shrink", s.Shrink.Value, s.Shrink.Source},
		{"Migrate", s.Migrate.Value, s.Migrate.Source},
		{"MigrateEvery", dur(s.MigrateEvery.Value, "5m"), s.MigrateEvery.Source},
		{"MigrateMinInterval", dur(s.MigrateMinInterval.Value, "1h"), s.MigrateMinInterval.Source},
		{"MigrateMaxDelay", dur(s.MigrateMaxDelay.Value, "0"), s.MigrateMaxDelay.Source},
		{"LossSpike", s.LossSpike.Value, s.LossSpike.Source},
		{"LossSpikeAction", s.LossSpikeAction.Value, s.LossSpikeAction.Source},
		{"RestartOn", s.RestartOn.Value, s.RestartOn.Source},
		{"HealthCheck", str(s.HealthCheck.Value, "none"), s.HealthCheck.Source},
		{"HealthCheckTimeout", dur(s.HealthCheckTimeout.Value, "60s"), s.HealthCheckTimeout.Source},
	}
	for _, l := range []struct {
		key  string
		list Setting[[]EnvVar]
	}{{"NCCLForce", s.NCCLForce}, {"NCCLDefault", s.NCCLDefault}} {
		if len(l.list.Value) == 0 {
			rows = append(rows, Row{l.key, "none", l.list.Source})
		}
		for _, v := range l.list.Value {
			rows = append(rows, Row{l.key, v.Name + "=" + v.Value, v.Source})
		}
	}
	rows = append(rows,
		Row{"NCCLPrecedence", s.NCCLPrecedence.Value, s.NCCLPrecedence.Source},
		Row{"Fabric", s.Fabric.Value, s.Fabric.Source},
		Row{"GPUType", str(s.GPUType.Value, "auto"), s.GPUType.Source},
		Row{"NVMeBW", nvmeBW(s.NVMeBW.Value), s.NVMeBW.Source},
		Row{"GPUHourCost", gpuHourCost(s.GPUHourCost.Value), s.GPUHourCost.Source},
		Row{"MemoryMargin", strconv.FormatFloat(100*s.MemoryMargin.Value, 'g', -1, 64) + "%", s.MemoryMargin.Source},
		Row{"InjectEnv", yesno[s.InjectEnv.Value], s.InjectEnv.Source},
		Row{"AutoPlan", yesno[s.AutoPlan.Value], s.AutoPlan.Source},
		Row{"Stack", s.Stack.Value, s.Stack.Source},
		Row{"Precision", s.Precision.Value, s.Precision.Source},
		Row{"Finetune", s.Finetune.Value, s.Finetune.Source},
		Row{"UserOverride", s.UserOverride.Value.String(), s.UserOverride.Source},
		Row{"MetricsAddr", str(s.MetricsAddr.Value, "off"), s.MetricsAddr.Source},
		Row{"Pushgateway", str(s.Pushgateway.Value, "off"), s.Pushgateway.Source},
		Row{"Webhook", str(s.Webhook.Value, "off"), s.Webhook.Source},
		Row{"MaxCkptAge", dur(s.MaxCkptAge.Value, "off"), s.MaxCkptAge.Source},
		Row{"StopIfOffTrack", stopIfOffTrack(s.StopIfOffTrack.Value), s.StopIfOffTrack.Source},
		Row{"Calibration", str(s.Calibration.Value, "none"), s.Calibration.Source},
		Row{"Tune", str(s.Tune.Value, "none"), s.Tune.Source},
		Row{"TuneBudget", dur(s.TuneBudget.Value, "auto"), s.TuneBudget.Source},
	)
	rows = append(rows, s.containerRows()...)
	return rows
}

// gpuHourCost is GPUHourCost as the policy file writes it: none, or the price.
func gpuHourCost(f float64) string {
	if f < 0 {
		return "none"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// nvmeBW is NVMeBW as the policy file writes it: auto, or GB/s.
func nvmeBW(f float64) string {
	if f == 0 {
		return "auto"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func zeroOff(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// FormatDuration writes d as the file would: 90s -> 1m30s, 300s -> 5m, 2h.
func FormatDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	h, m, sec := d/time.Hour, (d%time.Hour)/time.Minute, (d%time.Minute)/time.Second
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if sec > 0 {
		fmt.Fprintf(&b, "%ds", sec)
	}
	return b.String()
}

// NCCL is the part of the settings that shapes a rank's environment, as
// plan.RankEnv takes it (EnvInput.Policy). Fabric tcp is passed through as
// "tcp".
func (s Settings) NCCL() plan.NCCLPolicy {
	np := plan.NCCLPolicy{TrainrunWins: s.NCCLPrecedence.Value == "site"}
	if len(s.NCCLForce.Value) > 0 {
		np.Force = map[string]string{}
		for _, v := range s.NCCLForce.Value {
			np.Force[v.Name] = v.Value
		}
	}
	if len(s.NCCLDefault.Value) > 0 {
		np.Defaults = map[string]string{}
		for _, v := range s.NCCLDefault.Value {
			np.Defaults[v.Name] = v.Value
		}
	}
	switch s.Fabric.Value {
	case "ib":
		np.Fabric = "infiniband"
	case "roce", "efa", "tcp":
		np.Fabric = s.Fabric.Value
	}
	return np
}

func stopIfOffTrack(p float64) string {
	if p == 0 {
		return "no"
	}
	return strconv.FormatFloat(p, 'g', -1, 64)
}
