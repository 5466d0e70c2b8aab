package topo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// seq is n lines "prefix"+padNum(i, w) for i in [lo, hi].
func seq(prefix string, lo, hi, w int) []string {
	var out []string
	for i := lo; i <= hi; i++ {
		out = append(out, prefix+padNum(uint64(i), w))
	}
	return out
}

func cat(lists ...[]string) []string { return slices.Concat(lists...) }

// Expected outputs below were checked with `scontrol show hostnames` of
// Slurm 22.05.8 (Debian 12).
func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want []string
	}{
		{"doc: zero padding", "linux[00-17]", seq("linux", 0, 17, 2)},
		{"doc: plain range", "lx[10-20]", seq("lx", 10, 20, 1)},
		{"doc: duplicates kept, single first", "tux[2,1-2]", []string{"tux2", "tux1", "tux2"}},
		{"doc: duplicates kept, single last", "tux[1-2,2]", []string{"tux1", "tux2", "tux2"}},
		{"doc: range and single", "linux[0-64,128]", cat(seq("linux", 0, 64, 1), []string{"linux128"})},
		{"doc: plain names", "alpha,beta,gamma", []string{"alpha", "beta", "gamma"}},
		{"doc: singles and range", "lx[15,18,32-33]", []string{"lx15", "lx18", "lx32", "lx33"}},
		{"doc: four digits", "linux[0000-1023]", seq("linux", 0, 1023, 4)},
		{"doc: padded with single", "gpu[001-016,020]", cat(seq("gpu", 1, 16, 3), []string{"gpu020"})},
		{"doc: dash before bracket, list", "ml-16-node-[001-002,004],ml-17-node-[001-003]",
			[]string{"ml-16-node-001", "ml-16-node-002", "ml-16-node-004", "ml-17-node-001", "ml-17-node-002", "ml-17-node-003"}},
		{"doc: dash before bracket", "node-[0-3]", seq("node-", 0, 3, 1)},
		{"doc: commas inside brackets do not split", "dev[0-8,18-25],edev[0-25]",
			cat(seq("dev", 0, 8, 1), seq("dev", 18, 25, 1), seq("edev", 0, 25, 1))},
		{"width from the start bound, end wider", "n[08-100]", seq("n", 8, 100, 2)},
		{"width from the start bound, end padded", "n[8-0100]", seq("n", 8, 100, 1)},
		{"padded start, short end", "n[001-10]", seq("n", 1, 10, 3)},
		{"unpadded start, padded end", "n[1-010]", seq("n", 1, 10, 1)},
		{"single padded", "n[007]", []string{"n007"}},
		{"single zero", "n[00]", []string{"n00"}},
		{"digits before bracket", "n1[0-3]", []string{"n10", "n11", "n12", "n13"}},
		{"empty prefix", "[1-3]", []string{"1", "2", "3"}},
		{"two groups: plain cartesian order", "x[1-2]-y[3-4]", []string{"x1-y3", "x1-y4", "x2-y3", "x2-y4"}},
		{"two groups, lists", "a[1,3]b[5-6,8]", []string{"a1b5", "a1b6", "a1b8", "a3b5", "a3b6", "a3b8"}},
		{"two adjacent groups", "a[1-2][3-4]", []string{"a13", "a14", "a23", "a24"}},
		{"two groups with text between", "n[1-2]x[3]", []string{"n1x3", "n2x3"}},
		{"three groups: Slurm's nesting order", "a[1-2]b[1-2]c[1-2]",
			[]string{"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"}},
		{"four groups: Slurm's nesting order", "a[1-2]b[1-2]c[1-2]d[1-2]",
			[]string{"a1b1c1d1", "a1b1c1d2", "a2b1c1d1", "a2b1c1d2", "a1b2c1d1", "a1b2c1d2", "a2b2c1d1", "a2b2c1d2",
				"a1b1c2d1", "a1b1c2d2", "a2b1c2d1", "a2b1c2d2", "a1b2c2d1", "a1b2c2d2", "a2b2c2d1", "a2b2c2d2"}},
		{"empty items skipped", "a,,b", []string{"a", "b"}},
		{"trailing comma", "n[1-2],", []string{"n1", "n2"}},
		{"whitespace separates at top level", "n[1-2] m1\tk", []string{"n1", "n2", "m1", "k"}},
		{"trailing newline trimmed", "n[1-2]\n", []string{"n1", "n2"}},
		{"largest range Slurm allows", "n[0-65535]", seq("n", 0, 65535, 1)},
		{"22 digits of padding", "n[0000000000000000000001-2]", []string{"n0000000000000000000001", "n0000000000000000000002"}},
		{"beyond 32 bits", "n[99999999999-100000000000]", []string{"n99999999999", "n100000000000"}},
		{"top of 64 bits", "n[18446744073709551614-18446744073709551615]", []string{"n18446744073709551614", "n18446744073709551615"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ExpandHostlist(tc.expr)
			if err != nil {
				t.Fatalf("ExpandHostlist(%q): %v", tc.expr, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ExpandHostlist(%q)\n got %v\nwant %v", tc.expr, abbrev(got), abbrev(tc.want))
			}
		})
	}
}

func abbrev(s []string) string {
	if len(s) <= 12 {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v ... %v (%d names)", s[:6], s[len(s)-6:], len(s))
}

func TestExpandHostlistErrors(t *testing.T) {
	tests := []struct {
		name   string
		expr   string
		column int    // 1-based, as printed
		msg    string // substring of the message
		slurm  string // what scontrol show hostnames of 22.05.8 does with it
	}{
		{"range backwards", "n[5-3]", 3, `bad range "5-3": start 5 is greater than end 3`, "Invalid range: `5-3'"},
		{"empty brackets", "n[]", 3, "empty range", "Invalid range: `'"},
		{"empty range in list", "n[1,,2]", 5, "empty range", "Invalid range: `'"},
		{"only a comma in brackets", "n[,]", 3, "empty range", "Invalid range: `'"},
		{"letters in range", "n[a-b]", 3, `"a" is not a decimal digit`, "Invalid range: `a-b'"},
		{"two dashes", "n[1-2-3]", 6, `"-" is not a decimal digit`, "Invalid range: `1-2-3'"},
		{"missing start", "n[-3]", 3, "a bound is missing", "Invalid range: `-3'"},
		{"missing end", "n[3-]", 5, "a bound is missing", "accepted as n3 (strtoul of an empty string); we refuse it"},
		{"range too large", "n[0-65536]", 3, "Slurm allows at most 65536 in one range", "Too many hosts in range"},
		{"prefix group too large", "a[0-65535,0-1]b[1]", 2, "at most 65536 in a group that is not the last", "Invalid hostlist"},
		{"text after last bracket", "gpu[1-4]-ib", 9, `text "-ib" after the last ']'`, "Invalid hostlist"},
		{"text after last bracket, list", "n[1-2],unit[0-31]rack", 18, `text "rack" after the last ']'`, "Invalid hostlist"},
		{"unclosed bracket", "n[1-3", 2, "'[' is never closed", "yields the single host n] (a bug)"},
		{"stray closing bracket", "n1-3]", 5, "']' without a matching '['", "yields the host n1-3]"},
		{"double closing bracket", "n[1-3]]", 7, "']' without a matching '['", "Invalid hostlist"},
		{"nested brackets", "n[[1-3]]", 3, "nested '['", "Invalid hostlist"},
		{"space inside brackets", "n[ 1-2]", 3, `" " is not a decimal digit`, "n01 n02 (strtoul skips the space, width counts it)"},
		{"sign inside brackets", "n[+1-2]", 3, `"+" is not a decimal digit`, "n01 n02"},
		{"beyond 64 bits", "n[18446744073709551616]", 3, "does not fit in 64 bits", "n18446744073709551615 (wraps)"},
		{"empty expression", "", 1, "empty expression", "prints nothing"},
		{"only separators", " , ", 1, "empty expression", "prints nothing"},
		{"line break inside", "a[1-2]\nb1", 7, "line break inside the expression", "Invalid hostlist (a newline is not a separator)"},
		{"over trainrun's cap", "a[0-2047]b[0-1023]", 1, "more than 1048576 names", "4 million names (no cap)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ExpandHostlist(tc.expr)
			if err == nil {
				t.Fatalf("ExpandHostlist(%q) = %v, want an error (Slurm: %s)", tc.expr, abbrev(got), tc.slurm)
			}
			var he *HostlistError
			if !errors.As(err, &he) {
				t.Fatalf("error %v is %T, want *HostlistError", err, err)
			}
			want := fmt.Sprintf("hostlist %q, column %d: ", tc.expr, tc.column)
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error\n got %q\nwant prefix %q containing %q", err, want, tc.msg)
			}
		})
	}
}

// Expected outputs checked with `scontrol show hostlist` of Slurm 22.05.8.
func TestCompressHostlist(t *testing.T) {
	tests := []struct {
		name  string
		hosts string // comma-separated names
		want  string
	}{
		{"range and single", "n1,n2,n3,n5", "n[1-3,5]"},
		{"several runs", "n1,n2,n4,n5,n6,n9", "n[1-2,4-6,9]"},
		{"order kept, not sorted", "n3,n1,n2", "n[3,1-2]"},
		{"descending stays apart", "n5,n4,n3", "n[5,4,3]"},
		{"duplicates kept", "n1,n1,n2", "n[1,1-2]"},
		{"repeat of a run", "n1,n2,n1,n2", "n[1-2,1-2]"},
		{"unpadded widening", "n9,n10,n11", "n[9-11]"},
		{"padded widening", "n09,n10,n11", "n[09-11]"},
		{"padded into wider", "n098,n099,n100,n101", "n[098-101]"},
		{"padded and unpadded of one value", "n8,n9,n10,n010", "n[8-10,010]"},
		{"widths apart", "n1,n01,n001,n2,n02", "n[1,01,001,2,02]"},
		{"runs of two widths", "n1,n2,n3,n01,n02", "n[1-3,01-02]"},
		{"zero widths", "n0,n00,n000", "n[0,00,000]"},
		{"padded zero then unpadded one", "n00,n1", "n[00,1]"},
		{"padded zero and one", "n00,n01", "n[00-01]"},
		{"padded amid unpadded", "n7,n08,n9", "n[7,08,9]"},
		{"mixed padded first", "n0100,n99,n100", "n[0100,99-100]"},
		{"single padded", "n01", "n01"},
		{"two apart", "n1,n3", "n[1,3]"},
		{"no numeric suffix", "gpu1-ib,gpu2-ib", "gpu1-ib,gpu2-ib"},
		{"last number only", "a1b1,a1b2,a2b1,a2b2", "a1b[1-2],a2b[1-2]"},
		{"last number only, dashes", "x1-y3,x1-y4,x2-y3,x2-y4", "x1-y[3-4],x2-y[3-4]"},
		{"plain names", "alpha,beta,gamma", "alpha,beta,gamma"},
		{"prefixes interleaved", "n1,m1,n2,m2", "n1,m1,n2,m2"},
		{"prefix broken by another", "n1,n2,m1,n3", "n[1-2],m1,n3"},
		{"bare prefix then numbers", "n,n1,n2", "n,n[1-2]"},
		{"dash prefix", "a-1,a-2,a1", "a-[1-2],a1"},
		{"only digits", "1,2,3", "[1-3]"},
		{"top of 64 bits", "n18446744073709551614,n18446744073709551615", "n[18446744073709551614-18446744073709551615]"},
		{"beyond 64 bits is a plain name", "n99999999999999999999998,n99999999999999999999999", "n99999999999999999999998,n99999999999999999999999"},
		{"empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hosts []string
			if tc.hosts != "" {
				hosts = strings.Split(tc.hosts, ",")
			}
			got := CompressHostlist(hosts)
			if got != tc.want {
				t.Errorf("CompressHostlist(%q) = %q, want %q", tc.hosts, got, tc.want)
			}
			if len(hosts) == 0 {
				return
			}
			back, err := ExpandHostlist(got)
			if err != nil || !slices.Equal(back, hosts) {
				t.Errorf("ExpandHostlist(%q) = %v, %v; want %v", got, back, err, hosts)
			}
		})
	}
}

// A differential test against the real thing: testdata/slurm/hostlist-scontrol-22.05.txt
// holds what `scontrol show hostnames` (E lines) and `scontrol show hostlist`
// (C lines) printed on Slurm 22.05.8 for hand-picked and generated
// expressions. It is replayed here so it runs without Slurm;
// TestHostlistLiveScontrol compares live where scontrol exists.
const scontrolCapture = "testdata/slurm/hostlist-scontrol-22.05.txt"

type scontrolCase struct {
	kind  byte   // 'E' expand, 'C' compress
	input string // expression (E) or comma-joined names (C)
	want  string // space-joined names (E), the hostlist (C), or "!invalid"
	line  int
}

func readScontrolCapture(t *testing.T) []scontrolCase {
	t.Helper()
	f, err := os.Open(scontrolCapture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []scontrolCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 || (f[0] != "E" && f[0] != "C") {
			t.Fatalf("%s:%d: want KIND<TAB>INPUT<TAB>OUTPUT, got %q", scontrolCapture, line, l)
		}
		out = append(out, scontrolCase{f[0][0], f[1], f[2], line})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkScontrolCase(t *testing.T, where string, c scontrolCase) {
	t.Helper()
	switch c.kind {
	case 'E':
		got, err := ExpandHostlist(c.input)
		if c.want == "!invalid" {
			if err == nil {
				t.Errorf("%s: ExpandHostlist(%q) = %v; Slurm rejects it", where, c.input, abbrev(got))
			}
			return
		}
		if err != nil {
			t.Errorf("%s: ExpandHostlist(%q): %v; Slurm expands it", where, c.input, err)
			return
		}
		if want := strings.Fields(c.want); !slices.Equal(got, want) {
			t.Errorf("%s: ExpandHostlist(%q)\n got %v\nwant %v (scontrol)", where, c.input, abbrev(got), abbrev(want))
		}
	case 'C':
		if got := CompressHostlist(strings.Split(c.input, ",")); got != c.want {
			t.Errorf("%s: CompressHostlist(%q) = %q, scontrol printed %q", where, c.input, got, c.want)
		}
	}
}

func TestHostlistScontrolCapture(t *testing.T) {
	cases := readScontrolCapture(t)
	var nE, nC int
	for _, c := range cases {
		checkScontrolCase(t, fmt.Sprintf("%s:%d", scontrolCapture, c.line), c)
		if c.kind == 'E' {
			nE++
		} else {
			nC++
		}
	}
	if nE < 200 || nC < 100 {
		t.Errorf("capture holds %d expand and %d compress cases; want at least 200 and 100", nE, nC)
	}
}

// scontrolRunner runs scontrol with a throw-away slurm.conf: `show hostnames`
// and `show hostlist` need a configuration source but no daemon.
func scontrolRunner(t *testing.T) func(args ...string) (stdout, stderr string) {
	t.Helper()
	path, err := exec.LookPath("scontrol")
	if err != nil {
		t.Skip("scontrol not installed; the captured outputs are checked by TestHostlistScontrolCapture")
	}
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=hostlisttest\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, string) {
		cmd := exec.Command(path, args...)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Errorf("scontrol %v: %v: %s", args, err, e.String()) // not Fatal: called from worker goroutines
		}
		return o.String(), e.String()
	}
}

// scontrolCase runs one case live.
func liveScontrolCase(run func(...string) (string, string), kind byte, input string) scontrolCase {
	if kind == 'E' {
		o, e := run("show", "hostnames", input)
		if strings.Contains(e, "Invalid hostlist") {
			return scontrolCase{kind: 'E', input: input, want: "!invalid"}
		}
		return scontrolCase{kind: 'E', input: input, want: strings.Join(strings.Fields(o), " ")}
	}
	o, _ := run("show", "hostlist", input)
	return scontrolCase{kind: 'C', input: input, want: strings.TrimSpace(o)}
}

// handPicked are the expressions of the capture besides generated ones.
var handPicked = []string{
	"linux[00-17]", "lx[10-20]", "tux[2,1-2]", "tux[1-2,2]", "linux[0-64,128]", "alpha,beta,gamma",
	"lx[15,18,32-33]", "gpu[001-016,020]", "ml-16-node-[001-002,004],ml-17-node-[001-003]", "node-[0-3]",
	"dev[0-8,18-25],edev[0-25]", "unit[0-31]rack", "gpu[1-4]-ib", "n[08-100]", "n[8-0100]", "n[1-010]",
	"n[001-10]", "n[09-11]", "n1[0-3]", "[1-3]", "x[1-2]-y[3-4]", "a[1-2]b[1-2]c[1-2]", "a[1-2]b[1-2]c[1-2]d[1-2]",
	"a[1,3]b[5-6,8]", "a[1-2][3-4]", "n[1-2]x[3]", "a,,b", "n[5-3]", "n[]", "n[1,,2]", "n[a-b]", "n[1-2-3]",
	"n[-3]", "n[0-65536]", "a[0-65535,0-1]b[1]", "n[1-3]]", "n[[1-3]]", "x[1-2]y",
	"rack[1-2]-node[01-04]", "n[000-5]", "n[0-010]",
}

// compressInputs are hand-picked name lists for `scontrol show hostlist`.
var compressInputs = []string{
	"n1,n2,n3,n5", "n3,n1,n2", "n5,n4,n3", "n1,n1,n2", "n1,n2,n1,n2", "n9,n10,n11", "n09,n10,n11",
	"n098,n099,n100,n101", "n8,n9,n10,n010", "n1,n01,n001,n2,n02", "n1,n2,n3,n01,n02", "n0,n00,n000",
	"n00,n1", "n00,n01", "n7,n08,n9", "n0100,n99,n100", "n01", "n1,n3", "gpu1-ib,gpu2-ib",
	"a1b1,a1b2,a2b1,a2b2", "x1-y3,x1-y4,x2-y3,x2-y4", "alpha,beta,gamma", "n1,m1,n2,m2", "n1,n2,m1,n3",
	"n,n1,n2", "a-1,a-2,a1", "1,2,3", "n98,n99,n100,n0101", "n9,n10,n010", "n099,n100,n1000",
}

// generatedCompressInput turns a generated expression's names into a list to
// compress: as expanded, sorted, or shuffled.
func generatedCompressInput(r *rand.Rand, names []string) []string {
	out := slices.Clone(names)
	switch r.IntN(3) {
	case 1:
		slices.Sort(out)
	case 2:
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// TestHostlistLiveScontrol compares with scontrol where it is installed, and
// with -update rewrites the capture.
func TestHostlistLiveScontrol(t *testing.T) {
	run := scontrolRunner(t)
	n := 30 // the e2e suite compares hundreds more
	if update() {
		n = 250
	}
	r := rand.New(rand.NewPCG(22, 5))
	var cases []scontrolCase // inputs first, scontrol's outputs filled in below
	for _, e := range handPicked {
		cases = append(cases, scontrolCase{kind: 'E', input: e})
	}
	for _, h := range compressInputs {
		cases = append(cases, scontrolCase{kind: 'C', input: h})
	}
	for i := 0; i < n; i++ {
		e := RandomHostlistExpr(r)
		cases = append(cases, scontrolCase{kind: 'E', input: e})
		names, err := ExpandHostlist(e)
		if err != nil {
			t.Errorf("generated %q: %v", e, err)
			continue
		}
		if i%2 == 0 {
			cases = append(cases, scontrolCase{kind: 'C', input: strings.Join(generatedCompressInput(r, names), ",")})
		}
	}
	// scontrol computes these locally (no daemon): a few at once
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				cases[i] = liveScontrolCase(run, cases[i].kind, cases[i].input)
			}
		}()
	}
	for i := range cases {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, c := range cases {
		checkScontrolCase(t, "live scontrol", c)
	}
	if !update() {
		return
	}
	var b strings.Builder
	version, _ := run("--version")
	fmt.Fprintf(&b, "# What scontrol of %s printed (Debian 12 package 22.05.8-4+deb12u3), captured by\n", strings.TrimSpace(version))
	b.WriteString("# `go test ./topo -run TestHostlistLiveScontrol -update` with a throw-away slurm.conf (no daemon).\n")
	b.WriteString("# E<TAB>expression<TAB>`scontrol show hostnames` output joined by spaces, or !invalid\n")
	b.WriteString("# C<TAB>names joined by commas<TAB>`scontrol show hostlist` output\n")
	b.WriteString("# Hand-picked cases come from Slurm's docs (slurm.conf(5), topology.conf(5), quickstart_admin) and\n")
	b.WriteString("# testdata/slurm/hostlist-expressions.cases.txt; the rest from RandomHostlistExpr with PCG(22, 5).\n")
	for _, c := range cases {
		fmt.Fprintf(&b, "%c\t%s\t%s\n", c.kind, c.input, c.want)
	}
	if err := os.WriteFile(scontrolCapture, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRandomHostlistExpr(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var multi, padded, lists, groups3 int
	const n = 1000
	for i := 0; i < n; i++ {
		e := RandomHostlistExpr(r)
		names, err := ExpandHostlist(e)
		if err != nil {
			t.Fatalf("generated %q: %v", e, err)
		}
		if len(names) > 2000*4 {
			t.Errorf("generated %q expands to %d names", e, len(names))
		}
		back, err := ExpandHostlist(CompressHostlist(names))
		if err != nil || !slices.Equal(back, names) {
			t.Fatalf("round trip of %q through %q failed: %v", e, CompressHostlist(names), err)
		}
		if strings.Contains(e, "],") || strings.Contains(e, ",") && !strings.Contains(e, "[") {
			lists++
		}
		if strings.Count(e, "[") > strings.Count(e, ",")+1 {
			multi++
		}
		if strings.Contains(e, "[0") || strings.Contains(e, ",0") {
			padded++
		}
		if strings.Count(strings.Split(e, "],")[0], "[") >= 3 {
			groups3++
		}
	}
	// coverage of the features the e2e comparison relies on
	for what, count := range map[string]int{"lists": lists, "several groups": multi, "padding": padded, "three groups": groups3} {
		if count < n/50 {
			t.Errorf("only %d of %d generated expressions have %s", count, n, what)
		}
	}
}

func FuzzExpandHostlist(f *testing.F) {
	for _, e := range handPicked {
		f.Add(e)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 50; i++ {
		f.Add(RandomHostlistExpr(r))
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := ExpandHostlist(expr)
		if err != nil {
			return
		}
		c := CompressHostlist(names)
		back, err := ExpandHostlist(c)
		if err != nil || !slices.Equal(back, names) {
			t.Fatalf("ExpandHostlist(%q) = %v; compressed %q expands to %v, %v", expr, abbrev(names), c, abbrev(back), err)
		}
	})
}

// FuzzCompressHostlist: any list of names made of hostname characters, each
// at most MaxHostNameLen bytes (longer ones are refused by ExpandHostlist,
// as Slurm itself refuses them), survives a round trip. The fuzz input is
// split on '/' into names.
func FuzzCompressHostlist(f *testing.F) {
	for _, h := range compressInputs {
		f.Add(strings.ReplaceAll(h, ",", "/"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		var hosts []string
		for _, h := range strings.Split(in, "/") {
			if h == "" || len(h) > MaxHostNameLen || strings.ContainsFunc(h, func(c rune) bool {
				return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
			}) {
				return
			}
			hosts = append(hosts, h)
		}
		c := CompressHostlist(hosts)
		back, err := ExpandHostlist(c)
		if err != nil || !slices.Equal(back, hosts) {
			t.Fatalf("CompressHostlist(%q) = %q, which expands to %v, %v", hosts, c, back, err)
		}
	})
}

func BenchmarkExpandHostlist2048(b *testing.B) {
	expr := "rack[01-32]-node[001-064]"
	for b.Loop() {
		if _, err := ExpandHostlist(expr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompressHostlist2048(b *testing.B) {
	names, _ := ExpandHostlist("rack[01-32]-node[001-064]")
	for b.Loop() {
		CompressHostlist(names)
	}
}
