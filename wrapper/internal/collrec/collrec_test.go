package collrec

import (
	"bytes"
	"strings"
	"testing"
)

// slots builds a raw record as the client writes it: a header slot, then
// fixed-size slots, NUL-padded, in ring order (not sorted).
func slots(lines ...string) []byte {
	const size = 160
	b := make([]byte, size*(len(lines)+2))
	copy(b, Header+" 1 pid=42 rank=0 slots=4\n")
	for i, l := range lines {
		copy(b[size*(i+1):], l+"\n")
	}
	return b
}

func TestParseRawRing(t *testing.T) {
	b := slots("7 3 enter all_reduce world:2 10.5 [1] int64 MAX", "5 2 done all_reduce world:2 9.0 [1] int64 MAX", "6 1 done broadcast g1a2b:2 9.5 [4] float32")
	es := Parse(b)
	if len(es) != 3 || es[0].Seq != 5 || es[2].Seq != 7 || es[2].State != "enter" || es[2].Detail != "[1] int64 MAX" {
		t.Fatalf("Parse = %+v", es)
	}
	var w bytes.Buffer
	if err := Format(&w, "rank 0", es); err != nil {
		t.Fatal(err)
	}
	if again := Parse(w.Bytes()); len(again) != 3 || again[2] != es[2] {
		t.Errorf("Format then Parse = %+v, want %+v", again, es)
	}
}

func TestSummariseNamesTheRankThatDidNotEnter(t *testing.T) {
	waiting := Parse([]byte("1 1 done all_reduce world:3 1 [1]\n2 2 enter all_reduce world:3 2 [1]\n"))
	stopped := Parse([]byte("1 1 done all_reduce world:3 1 [1]\n"))
	f := Summarise([]Rank{{Rank: 0, Entries: waiting}, {Rank: 1, Entries: stopped}, {Rank: 2, Entries: waiting}})
	if len(f) != 1 || f[0].Rank != 1 || !f[0].Behind {
		t.Fatalf("Summarise = %+v, want rank 1 behind", f)
	}
	for _, s := range []string{"rank 1 did not enter collective #2 on world:3", "rank(s) 0,2 wait in", "its last there is #1 (done)"} {
		if !strings.Contains(f[0].Text, s) {
			t.Errorf("%q lacks %q", f[0].Text, s)
		}
	}
}

// A member of another group is not judged on the stuck group; a rank
// without a record is named as such.
func TestSummariseOtherGroupsAndMissing(t *testing.T) {
	a := Parse([]byte("1 1 enter all_reduce gAA:2 1 [1]\n"))
	b := Parse([]byte("1 1 done all_reduce gBB:2 1 [1]\n"))
	f := Summarise([]Rank{{Rank: 0, Entries: a}, {Rank: 2, Entries: b}, {Rank: 3, Missing: "the shim did not answer"}})
	if len(f) != 2 || f[0].Rank != 3 || !strings.Contains(f[0].Text, "the shim did not answer") || f[1].Rank != -1 || f[1].Behind {
		t.Fatalf("Summarise = %+v", f)
	}
}

// No rank inside a recorded collective: the one whose sequence is behind.
func TestSummariseBehindWithoutAWaiter(t *testing.T) {
	a := Parse([]byte("4 4 done barrier world:2 1 -\n"))
	b := Parse([]byte("3 3 done barrier world:2 1 -\n"))
	f := Summarise([]Rank{{Rank: 0, Entries: a}, {Rank: 1, Entries: b}})
	if len(f) != 2 || f[0].Rank != 1 || !f[0].Behind || !strings.Contains(f[1].Text, "rank(s) 0 are at collective #4") {
		t.Fatalf("Summarise = %+v", f)
	}
	f = Summarise([]Rank{{Rank: 0, Entries: a}, {Rank: 1, Entries: a}})
	if len(f) != 1 || f[0].Behind || !strings.Contains(f[0].Text, "outside the collectives") {
		t.Fatalf("Summarise equal = %+v", f)
	}
}

func TestRanges(t *testing.T) {
	if got := ranges([]int{7, 0, 1, 2, 3, 9, 10}); got != "0-3,7,9-10" {
		t.Errorf("ranges = %q", got)
	}
}

// A stopped rank inside the collective the others wait in is named by its
// state: its record alone does not single it out.
func TestSummariseStoppedInside(t *testing.T) {
	in := Parse([]byte("1 1 done all_reduce world:2 1 [1]\n2 2 enter all_reduce world:2 2 [1]\n"))
	f := Summarise([]Rank{{Rank: 0, Entries: in, State: "S"}, {Rank: 1, Entries: in, State: "T"}})
	if len(f) != 2 || f[1].Rank != 1 || !f[1].Behind || !strings.Contains(f[1].Text, "rank 1's process is stopped (state T), its last collective #2 all_reduce") {
		t.Fatalf("Summarise = %+v", f)
	}
	// Named once when the record already singles it out.
	out := Parse([]byte("1 1 done all_reduce world:2 1 [1]\n"))
	f = Summarise([]Rank{{Rank: 0, Entries: in}, {Rank: 1, Entries: out, State: "T"}})
	if len(f) != 1 || !strings.Contains(f[0].Text, "rank 1 did not enter") {
		t.Fatalf("Summarise = %+v", f)
	}
}
