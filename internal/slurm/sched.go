package slurm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What `trainrun partitions` and `trainrun submit` ask: the partitions, the
// nodes with their typed GRES and what of it is in use, when Slurm would
// start a request (sbatch --test-only), and the submission itself.

// Partition is one line of `scontrol show partition -o`.
type Partition struct {
	Name       string
	Nodes      string        // hostlist expression, e.g. n[1-2]
	TotalNodes int           // TotalNodes
	MaxNodes   int           // MaxNodes; 0 = UNLIMITED
	MaxTime    time.Duration // MaxTime; 0 = UNLIMITED
	State      string        // UP, DOWN, DRAIN, INACTIVE
	Default    bool          // Default=YES
	Record     Record
}

// Gres is one entry of a node's Gres= or GresUsed= list: gpu:h100:8 is
// Name gpu, Type h100, Count 8; an untyped gpu:8 has Type "".
type Gres struct {
	Name  string
	Type  string
	Count int
}

// Node is one line of `scontrol -d show node -o`.
type Node struct {
	Name       string
	State      string   // State, e.g. IDLE, MIXED, ALLOCATED, DOWN+DRAIN
	Partitions []string // Partitions
	Features   []string // ActiveFeatures (AvailableFeatures when absent)
	Gres       []Gres   // Gres (configured)
	GresUsed   []Gres   // GresUsed (-d only): allocated now
	RealMemMB  int      // RealMemory, MB of host memory
	Record     Record
}

// GPUs is how many GPUs (GRES name gpu) the node has and their type ("" when
// untyped; the first type when it has several).
func (n Node) GPUs() (count int, typ string) { return gpuCount(n.Gres) }

// GPUsUsed is how many of its GPUs are allocated.
func (n Node) GPUsUsed() int { c, _ := gpuCount(n.GresUsed); return c }

func gpuCount(gs []Gres) (count int, typ string) {
	for _, g := range gs {
		if g.Name == "gpu" {
			count += g.Count
			if typ == "" {
				typ = g.Type
			}
		}
	}
	return count, typ
}

// Partitions runs `scontrol show partition -o`.
func (c Client) Partitions(ctx context.Context) ([]Partition, error) {
	out, err := c.query(ctx, Scontrol, "show", "partition", "-o")
	if err != nil {
		return nil, err
	}
	return ParsePartitions(string(out))
}

// Nodes runs `scontrol -d show node -o` (-d adds GresUsed).
func (c Client) Nodes(ctx context.Context) ([]Node, error) {
	out, err := c.query(ctx, Scontrol, "-d", "show", "node", "-o")
	if err != nil {
		return nil, err
	}
	return ParseNodes(string(out))
}

// maxRecords bounds what one answer may hold (a parse of a huge or looping
// output stops with an error instead of growing without bound).
const maxRecords = 100000

// ParsePartitions reads `scontrol show partition -o`.
func ParsePartitions(out string) ([]Partition, error) {
	var ps []Partition
	for _, r := range ParseRecords(out) {
		if len(ps) >= maxRecords {
			return nil, fmt.Errorf("scontrol show partition printed more than %d partitions", maxRecords)
		}
		p := Partition{Name: r["PartitionName"], Nodes: r["Nodes"], State: r["State"], Default: r["Default"] == "YES", Record: r}
		if p.Name == "" {
			return nil, fmt.Errorf("scontrol show partition printed a line without PartitionName: %q", clip(recordLine(r), 200))
		}
		var err error
		if p.TotalNodes, err = atoiField(r, "TotalNodes", true); err != nil {
			return nil, fmt.Errorf("partition %s: %w", p.Name, err)
		}
		if p.MaxNodes, err = atoiField(r, "MaxNodes", true); err != nil {
			return nil, fmt.Errorf("partition %s: %w", p.Name, err)
		}
		if v, ok := r["MaxTime"]; ok {
			if p.MaxTime, err = ParseDuration(v); err != nil {
				return nil, fmt.Errorf("partition %s: MaxTime=%q: %w", p.Name, v, err)
			}
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// atoiField reads a non-negative integer field; absent, or UNLIMITED when
// unlimited is allowed, is 0.
func atoiField(r Record, key string, unlimited bool) (int, error) {
	v, ok := r[key]
	if !ok || v == "" || unlimited && (v == "UNLIMITED" || v == "INFINITE") {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q is not a whole number", key, clip(v, 40))
	}
	return n, nil
}

func recordLine(r Record) string {
	var b strings.Builder
	for k, v := range r {
		fmt.Fprintf(&b, "%s=%s ", k, v)
	}
	return b.String()
}

// ParseNodes reads `scontrol [-d] show node -o`.
func ParseNodes(out string) ([]Node, error) {
	var ns []Node
	for _, r := range ParseRecords(out) {
		if len(ns) >= maxRecords {
			return nil, fmt.Errorf("scontrol show node printed more than %d nodes", maxRecords)
		}
		n := Node{Name: r["NodeName"], State: r["State"], Record: r}
		if n.Name == "" {
			return nil, fmt.Errorf("scontrol show node printed a line without NodeName: %q", clip(recordLine(r), 200))
		}
		n.Partitions = splitList(r["Partitions"])
		feat, ok := r["ActiveFeatures"]
		if !ok {
			feat = r["AvailableFeatures"]
		}
		n.Features = splitList(feat)
		var err error
		if n.Gres, err = ParseGres(r["Gres"]); err != nil {
			return nil, fmt.Errorf("node %s: Gres: %w", n.Name, err)
		}
		if n.GresUsed, err = ParseGres(r["GresUsed"]); err != nil {
			return nil, fmt.Errorf("node %s: GresUsed: %w", n.Name, err)
		}
		if n.RealMemMB, err = atoiField(r, "RealMemory", false); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func splitList(s string) []string {
	if s == "" || s == "(null)" {
		return nil
	}
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// maxGresCount bounds one GRES count (a node with more than a million GPUs
// is a misreading).
const maxGresCount = 1 << 20

// ParseGres reads a Gres= or GresUsed= list: "gpu:h100:8(S:0-1)",
// "gpu:8", "gpu:a100:4(IDX:0-3),nic:2", "(null)" or "" (none). A name
// without a count counts 1, as Slurm reads it.
func ParseGres(s string) ([]Gres, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(null)" || s == "N/A" {
		return nil, nil
	}
	var out []Gres
	for _, item := range splitGres(s) {
		if i := strings.IndexByte(item, '('); i >= 0 {
			item = item[:i] // (S:0-1), (IDX:0-3): sockets and indexes
		}
		parts := strings.Split(item, ":")
		if len(parts) > 3 || parts[0] == "" {
			return nil, fmt.Errorf("%q is not NAME[:TYPE][:COUNT]", clip(item, 60))
		}
		g := Gres{Name: parts[0], Count: 1}
		last := parts[len(parts)-1]
		n, err := strconv.Atoi(last)
		switch {
		case len(parts) == 3:
			if err != nil || n < 0 || n > maxGresCount {
				return nil, fmt.Errorf("%q: the count %q is not a whole number up to %d", clip(item, 60), clip(last, 20), maxGresCount)
			}
			g.Type, g.Count = parts[1], n
		case len(parts) == 2 && err == nil:
			if n < 0 || n > maxGresCount {
				return nil, fmt.Errorf("%q: the count %d is not a whole number up to %d", clip(item, 60), n, maxGresCount)
			}
			g.Count = n
		case len(parts) == 2:
			g.Type = parts[1]
		}
		out = append(out, g)
		if len(out) > maxRecords {
			return nil, fmt.Errorf("more than %d GRES entries", maxRecords)
		}
	}
	return out, nil
}

// splitGres splits at the commas outside parentheses
// (gpu:h100:4(IDX:0,2,4-5),nic:2).
func splitGres(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// Estimate is sbatch --test-only's answer: when the request would start,
// where.
type Estimate struct {
	Start     time.Time
	CPUs      int
	Nodes     string
	Partition string
}

// testOnlyRE is the line sbatch --test-only prints on stderr (Slurm 22.05,
// src/sbatch/sbatch.c): "sbatch: Job 2 to start at 2026-12-01T22:40:36 using
// 64 processors on nodes n[3-4] in partition ampere".
var testOnlyRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`Job (\d+) to start at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) using (\d+) processors on nodes (\S+) in partition (\S+)`)
})

// ParseTestOnly reads sbatch --test-only's stderr; loc is the zone Slurm
// prints times in (time.Local when nil).
func ParseTestOnly(stderr string, loc *time.Location) (Estimate, error) {
	if loc == nil {
		loc = time.Local
	}
	m := testOnlyRE().FindStringSubmatch(stderr)
	if m == nil {
		return Estimate{}, fmt.Errorf("sbatch --test-only printed no \"Job N to start at T using C processors on nodes X in partition P\": %q", clip(strings.TrimSpace(stderr), 300))
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", m[2], loc)
	if err != nil {
		return Estimate{}, fmt.Errorf("sbatch --test-only: start time %q: %v", m[2], err)
	}
	cpus, err := strconv.Atoi(m[3])
	if err != nil {
		return Estimate{}, fmt.Errorf("sbatch --test-only: %q processors: %v", clip(m[3], 20), err)
	}
	return Estimate{Start: t, CPUs: cpus, Nodes: m[4], Partition: m[5]}, nil
}

// TestOnly runs `sbatch --test-only ARGS`: Slurm's estimate of when the
// request would start, without submitting. A request Slurm refuses is an
// *Error with sbatch's stderr as printed.
func (c Client) TestOnly(ctx context.Context, args ...string) (Estimate, error) {
	all := append([]string{"--test-only"}, args...)
	stderr, err := c.queryStderr(ctx, Sbatch, all...)
	if err != nil {
		return Estimate{}, err
	}
	return ParseTestOnly(stderr, c.Location)
}

// Submit runs `sbatch --parsable ARGS` and returns the job id and what
// sbatch printed on stderr (warnings); a refusal is an *Error whose Stderr
// is sbatch's message as printed.
// It is the one way trainrun submits (Sbatch builds its arguments from a
// typed request); without RunStderr the warnings are not kept.
func (c Client) Submit(ctx context.Context, args ...string) (id, warnings string, err error) {
	argv := append([]string{"--parsable"}, args...)
	var out, stderr []byte
	if c.RunStderr == nil {
		out, err = c.query(ctx, Sbatch, argv...)
	} else {
		ctx, cancel := context.WithTimeout(ctx, cmpOr(c.Timeout, DefaultTimeout))
		defer cancel()
		out, stderr, err = c.RunStderr(ctx, Sbatch, argv...)
	}
	if err != nil {
		return "", "", err
	}
	id, err = ParseSbatchID(string(out))
	return id, strings.TrimSpace(string(stderr)), err
}

func (c Client) queryStderr(ctx context.Context, name string, args ...string) (string, error) {
	if c.RunStderr == nil {
		return "", &Error{Args: append([]string{name}, args...), Err: errors.New("slurm.Client has no RunStderr")}
	}
	ctx, cancel := context.WithTimeout(ctx, cmpOr(c.Timeout, DefaultTimeout))
	defer cancel()
	_, stderr, err := c.RunStderr(ctx, name, args...)
	return string(stderr), err
}
