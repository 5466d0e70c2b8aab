//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/topo"
)

var (
	hostlistN    = flag.Int("hostlist.n", 600, "number of generated expressions compared with scontrol")
	hostlistSeed = flag.Uint64("hostlist.seed", 0, "seed of the generated expressions (0: from the clock, logged)")
)

// TestHostlistMatchesScontrol compares topo.ExpandHostlist with `scontrol
// show hostnames` on generated expressions, and topo.CompressHostlist with
// `scontrol show hostlist` on each expansion. A failure prints the seed:
// rerun with -hostlist.seed to get the same expressions.
func TestHostlistMatchesScontrol(t *testing.T) {
	seed := *hostlistSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -args -hostlist.seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0x7472_6169_6e72_756e))
	exprs := make([]string, *hostlistN)
	for i := range exprs {
		exprs[i] = topo.RandomHostlistExpr(r)
	}

	ctx := context.Background()
	start := time.Now()
	res, expanded, calls, err := compareAll(ctx, exprs)
	if err != nil {
		t.Fatal(err)
	}
	names := 0
	for _, e := range expanded {
		names += len(e)
	}
	t.Logf("%d expressions (%d names) compared in %v with %d scontrol calls",
		len(exprs), names, time.Since(start).Round(time.Millisecond), calls)

	// The batching must not change what Slurm says: check a sample one
	// expression per call.
	for _, i := range r.Perm(len(exprs))[:min(20, len(exprs))] {
		out, err := cluster.Run(ctx, "scontrol", "show", "hostnames", exprs[i])
		if err != nil {
			t.Fatal(err)
		}
		if one := strings.Fields(out); !equal(one, expanded[i]) {
			t.Errorf("batching artefact: %q alone expands differently (%s)", exprs[i], diff(expanded[i], one))
		}
	}

	var bad []string
	for i, r := range res {
		if r.expand != "" {
			bad = append(bad, fmt.Sprintf("expand %q: %s", exprs[i], r.expand))
		}
		if r.compress != "" {
			bad = append(bad, fmt.Sprintf("compress the expansion of %q: %s", exprs[i], r.compress))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d disagreements with scontrol (seed %d); the first ones:\n%s", len(bad), seed, strings.Join(bad[:min(len(bad), 15)], "\n"))
	}
}

// sep is a host name no generated expression produces (they use lower-case
// letters); it cannot merge with a neighbour when Slurm compresses a list.
const sep = "SEPARATOR"

// chunkBytes bounds one scontrol argument (Linux allows 128 KiB per argument).
const chunkBytes = 100 << 10

type verdict struct{ expand, compress string } // "" where topo and Slurm agree

// compareAll checks every expression against Slurm. One scontrol call per
// expression costs about 10-50 ms on a loaded 2-core machine, so expressions
// go in chunks joined by sep: Slurm parses a top-level comma list item by item
// and keeps order and duplicates, so the chunk's expansion is the items'
// expansions with sep between them, and likewise for compression. Any chunk
// that disagrees is checked again one expression at a time, so a reported
// difference never comes from the batching.
func compareAll(ctx context.Context, exprs []string) (res []verdict, expanded [][]string, calls int, err error) {
	res = make([]verdict, len(exprs))
	for lo := 0; lo < len(exprs); {
		hi, size := lo, 0
		for hi < len(exprs) && (hi == lo || size+len(exprs[hi]) < chunkBytes) {
			size += len(exprs[hi]) + len(sep) + 2
			hi++
		}
		v, want, c, err := compareChunk(ctx, exprs[lo:hi])
		calls += c
		if err != nil {
			return nil, nil, calls, err
		}
		agree := true
		for _, x := range v {
			agree = agree && x == verdict{}
		}
		if !agree && hi-lo > 1 {
			for i := lo; i < hi; i++ {
				v1, _, c, err := compareChunk(ctx, exprs[i:i+1])
				calls += c
				if err != nil {
					return nil, nil, calls, err
				}
				v[i-lo] = v1[0]
			}
		}
		copy(res[lo:hi], v)
		expanded = append(expanded, want...)
		lo = hi
	}
	return res, expanded, calls, nil
}

// compareChunk expands (and compresses) the expressions with one scontrol
// call each way, and compares every expression's part with topo.
func compareChunk(ctx context.Context, exprs []string) (v []verdict, want [][]string, calls int, err error) {
	v = make([]verdict, len(exprs))
	out, err := cluster.Run(ctx, "scontrol", "show", "hostnames", strings.Join(exprs, ","+sep+","))
	if err != nil {
		return nil, nil, 1, err
	}
	want = splitAt(strings.Fields(out), sep)
	if len(want) != len(exprs) {
		return nil, nil, 1, fmt.Errorf("scontrol show hostnames: %d parts between %s markers, want %d", len(want), sep, len(exprs))
	}
	for i, e := range exprs {
		got, gerr := topo.ExpandHostlist(e)
		switch {
		case gerr != nil:
			v[i].expand = fmt.Sprintf("topo: %v; scontrol: %d names", gerr, len(want[i]))
		case !equal(got, want[i]):
			v[i].expand = diff(got, want[i])
		}
	}
	// Compress what Slurm expanded, so a wrong expansion cannot hide a right
	// compression or the other way round. Expansions are far longer than the
	// expressions: group them again to keep each argument under chunkBytes.
	calls = 1
	for lo := 0; lo < len(exprs); {
		hi, size := lo, 0
		for hi < len(exprs) && (hi == lo || size+hostsLen(want[hi]) < chunkBytes) {
			size += hostsLen(want[hi]) + len(sep) + 2
			hi++
		}
		var all []string
		for i := lo; i < hi; i++ {
			if i > lo {
				all = append(all, sep)
			}
			all = append(all, want[i]...)
		}
		out, err = cluster.Run(ctx, "scontrol", "show", "hostlist", strings.Join(all, ","))
		calls++
		if err != nil {
			return nil, nil, calls, err
		}
		wantC := splitAt(topLevelItems(strings.TrimSpace(out)), sep)
		if len(wantC) != hi-lo {
			return nil, nil, calls, fmt.Errorf("scontrol show hostlist: %d parts between %s markers, want %d", len(wantC), sep, hi-lo)
		}
		for i := lo; i < hi; i++ {
			if w, g := strings.Join(wantC[i-lo], ","), topo.CompressHostlist(want[i]); g != w {
				v[i].compress = fmt.Sprintf("topo %q, scontrol %q", g, w)
			}
		}
		lo = hi
	}
	return v, want, calls, nil
}

func hostsLen(h []string) int {
	n := 0
	for _, x := range h {
		n += len(x) + 1
	}
	return n
}

// splitAt splits items at every marker.
func splitAt(items []string, marker string) [][]string {
	parts := [][]string{nil}
	for _, it := range items {
		if it == marker {
			parts = append(parts, nil)
			continue
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], it)
	}
	return parts
}

// topLevelItems splits a hostlist at the commas outside brackets.
func topLevelItems(s string) []string {
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, s[start:i])
				start = i + 1
			}
		}
	}
	return append(items, s[start:])
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// diff describes the first difference of two name lists.
func diff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("name %d: topo %q, scontrol %q (topo %d names, scontrol %d)", i, got[i], want[i], len(got), len(want))
		}
	}
	return fmt.Sprintf("topo %d names, scontrol %d (common prefix equal)", len(got), len(want))
}
