package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/obs"
)

func init() {
	register(&command{name: "policy", short: "check the admin policy file (trainrun.conf) or show a partition's settings", run: runPolicy})
}

const policyUsage = `Usage: trainrun policy check FILE
       trainrun policy show [--partition P] FILE

check  validates FILE: exit 0 with a one-line summary, or exit 2 listing every
       error as file:line: key: message.
show   prints the settings a partition gets (site-wide ones without
       --partition) and where each value comes from.
`

func runPolicy(ctx context.Context, env *runEnv, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(env.stderr, policyUsage)
		writeExamples(env.stderr, "policy")
		return usageErrorf("policy needs a subcommand: check or show")
	}
	switch args[0] {
	case "check":
		return runPolicyCheck(env, args[1:])
	case "show":
		return runPolicyShow(env, args[1:])
	case "-h", "--help", "help":
		fmt.Fprint(env.stdout, policyUsage)
		writeExamples(env.stdout, "policy")
		return nil
	}
	return usageErrorf("unknown policy subcommand %q; use check or show", args[0])
}

func runPolicyCheck(env *runEnv, args []string) error {
	fs := newFlags("policy check", "policy check FILE", env.stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("policy check takes one FILE, got %d arguments", fs.NArg())
	}
	path := fs.Arg(0)
	p, err := planflags.LoadPolicy(path)
	if err != nil {
		return planflags.ReportPolicyErrors(env.stderr, path, err)
	}
	parts := p.Partitions()
	list := ""
	if len(parts) > 0 {
		list = " (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintf(env.stdout, "%s: OK: %d site-wide %s, %d %s%s\n", path,
		p.SiteSettings(), policyPlural(p.SiteSettings(), "setting", "settings"), len(parts), policyPlural(len(parts), "partition", "partitions"), list)
	for _, n := range policyNotes(p) {
		fmt.Fprintf(env.stdout, "  note: %s\n", n)
	}
	return nil
}

// policyNotes are valid settings worth a second look (issue 30: CkptSignal=USR1
// passed while run --help advised against it).
func policyNotes(p *policy.Policy) []string {
	var notes []string
	seen := map[policy.Source]bool{}
	for _, part := range append([]string{""}, p.Partitions()...) {
		sig := p.Effective(part).CkptSignal
		if sig.Value != "USR1" || sig.Source.Kind == policy.FromDefault || seen[sig.Source] {
			continue
		}
		seen[sig.Source] = true
		notes = append(notes, fmt.Sprintf("CkptSignal=USR1 (%s): NCCL 2.12 catches SIGUSR1 in its proxy thread (NVIDIA/nccl#704; 2.13 made it opt-in, NCCL_PROXY_DUMP_SIGNAL), so on such a build the trainers never see it; USR2, the default, is safe", sig.Source))
	}
	return notes
}

func policyPlural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func runPolicyShow(env *runEnv, args []string) error {
	fs := newFlags("policy show", "policy show [--partition P] [--format table|json] FILE", env.stdout)
	partition := fs.String("partition", "", "the partition whose settings to show (default: the site-wide ones)")
	format := fs.String("format", "table", "table, or json (a list of {key, value, from, users_may_override})")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usageErrorf("--format %q: use table or json", *format)
	}
	if fs.NArg() != 1 {
		return usageErrorf("policy show takes one FILE, got %d arguments", fs.NArg())
	}
	path := fs.Arg(0)
	p, err := planflags.LoadPolicy(path)
	if err != nil {
		return planflags.ReportPolicyErrors(env.stderr, path, err)
	}
	if *format == "json" {
		return policyShowJSON(env.stdout, p, *partition)
	}
	switch {
	case *partition == "":
		fmt.Fprintf(env.stdout, "Site-wide settings of %s\n", path)
	case p.HasPartition(*partition):
		fmt.Fprintf(env.stdout, "Settings of partition %s in %s\n", *partition, path)
	default:
		fmt.Fprintf(env.stdout, "Settings of partition %s in %s (no PartitionName=%s line: the site-wide settings apply)\n", *partition, path, *partition)
	}
	s := p.Effective(*partition)
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tFROM\tUSERS MAY OVERRIDE")
	for _, r := range s.Rows() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Key, obs.RedactURLs(r.Value), r.Source, mayOverride(p, r.Key, *partition)) // webhook tokens
	}
	return tw.Flush()
}

// mayOverride is the USERS MAY OVERRIDE column: yes (UserOverride allows
// it here), no (it could, but this policy does not allow it) or never (an
// admin-only key).
func mayOverride(p *policy.Policy, key, partition string) string {
	if k := policyKeyInfo(key); !k.User {
		return "never"
	}
	if p.MayOverride(key, partition) {
		return "yes"
	}
	return "no"
}

// policyShowJSON is `policy show --format json`: the partition's rows.
func policyShowJSON(w io.Writer, p *policy.Policy, partition string) error {
	type row struct {
		Key              string `json:"key"`
		Value            string `json:"value"`
		From             string `json:"from"`
		UsersMayOverride string `json:"users_may_override"`
	}
	rows := []row{}
	for _, r := range p.Effective(partition).Rows() {
		rows = append(rows, row{r.Key, obs.RedactURLs(r.Value), r.Source.String(), mayOverride(p, r.Key, partition)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"partition": partition, "settings": rows})
}

func policyKeyInfo(name string) policy.Key {
	for _, k := range policy.Keys() {
		if k.Name == name {
			return k
		}
	}
	return policy.Key{}
}
