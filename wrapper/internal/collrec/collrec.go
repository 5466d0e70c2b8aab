// Package collrec reads the trainer's record of its last collectives
// (contrib/trainer/trainrun_client.py, record_collectives) and sums up a
// hang from every rank's record: which rank did not enter the collective
// the others wait in, and at which sequence number they part.
//
// The record is a file of fixed-size slots the client keeps mapped in
// memory (node-local, TRAINRUN_COLLECTIVE_LOG): slot 0 is the header
// "trainrun-collectives 1 pid=P rank=R slots=N", each other slot one
// collective, rewritten in place as it completes:
//
//	SEQ GSEQ STATE OP GROUP UNIX_TIME DETAIL...
//
// SEQ counts the process's collectives, GSEQ those on GROUP (a key equal on
// every member: "world:N", or "gHEX:N" over the sorted member ranks), STATE
// is enter (called, not returned), done, or issued (async_op: returned a
// handle). Unused slots are NUL. A stopped process (SIGSTOP, a dead GPU)
// cannot answer a request, but its file is still readable: its last
// collective is known even then.
package collrec

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Header is the first word of a record's first slot.
const Header = "trainrun-collectives"

// Entry is one collective of a rank's record.
type Entry struct {
	Seq    int64  // the process's collectives so far
	GSeq   int64  // its group's
	State  string // enter, done, issued
	Op     string // all_reduce, broadcast, ...
	Group  string // the group's key
	Time   float64
	Detail string // sizes, dtype, the op
}

func (e Entry) String() string {
	s := fmt.Sprintf("#%d %s on %s (its #%d there), %s", e.Seq, e.Op, e.Group, e.GSeq, e.State)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Parse reads a record (the raw slot file, or the text a shim wrote from
// it: one entry a line, '#' lines ignored). The entries come back oldest
// first; lines that are not entries are skipped.
func Parse(b []byte) []Entry {
	var out []Entry
	for _, line := range bytes.FieldsFunc(b, func(r rune) bool { return r == '\n' || r == 0 }) {
		if e, ok := parseLine(string(bytes.TrimSpace(line))); ok {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

func parseLine(s string) (Entry, bool) {
	if s == "" || s[0] == '#' || strings.HasPrefix(s, Header) {
		return Entry{}, false
	}
	f := strings.SplitN(s, " ", 7)
	if len(f) < 6 {
		return Entry{}, false
	}
	var e Entry
	var err1, err2, err3 error
	e.Seq, err1 = strconv.ParseInt(f[0], 10, 64)
	e.GSeq, err2 = strconv.ParseInt(f[1], 10, 64)
	e.Time, err3 = strconv.ParseFloat(f[5], 64)
	if err1 != nil || err2 != nil || err3 != nil || e.Seq <= 0 {
		return Entry{}, false
	}
	e.State, e.Op, e.Group = f[2], f[3], f[4]
	if len(f) == 7 {
		e.Detail = strings.TrimSpace(f[6])
	}
	return e, true
}

// Format writes entries as text, oldest first, after a comment line.
func Format(w io.Writer, comment string, es []Entry) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# %s\n# SEQ GSEQ STATE OP GROUP UNIX_TIME DETAIL\n", comment)
	for _, e := range es {
		fmt.Fprintf(bw, "%d %d %s %s %s %.3f %s\n", e.Seq, e.GSeq, e.State, e.Op, e.Group, e.Time, e.Detail)
	}
	return bw.Flush()
}

// ReadFile parses the record at path.
func ReadFile(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b), nil
}

// Rank is one rank's evidence for Summarise: its record (nil: none came).
type Rank struct {
	Rank    int
	Entries []Entry
	Missing string // why there is no record ("" when there is one)
	State   string // the process's state letter from /proc (T stopped, D in the kernel, ...); "" unknown
}

// Finding is one line of a hang's summary.
type Finding struct {
	Rank   int    // the rank it is about (-1: every rank)
	Behind bool   // the rank did not enter the collective the others wait in
	Text   string // for the log
}

// Summarise compares the ranks' last collectives: on the group of the
// latest collective any rank entered and did not leave, the members whose
// record on that group stops at a lower group sequence number did not enter
// it. With no rank inside a collective, the ranks whose last collective is
// behind the others' are named.
func Summarise(ranks []Rank) []Finding {
	out := summarise(ranks)
	named := map[int]bool{}
	for _, f := range out {
		if f.Behind {
			named[f.Rank] = true
		}
	}
	// A process that cannot run (stopped, in the kernel, a zombie) is named
	// even when the records do not single it out (it stopped inside the
	// collective, or in C++ code the client does not see).
	for _, r := range ranks {
		if why, bad := badStates[r.State]; bad && !named[r.Rank] {
			last := "no recorded collective"
			if len(r.Entries) > 0 {
				last = "its last collective " + r.Entries[len(r.Entries)-1].String()
			}
			out = append(out, Finding{Rank: r.Rank, Behind: true, Text: fmt.Sprintf("rank %d's process is %s (state %s), %s", r.Rank, why, r.State, last)})
		}
	}
	return out
}

// badStates are the /proc states of a process that makes no progress.
var badStates = map[string]string{"T": "stopped", "t": "stopped by a tracer", "D": "in an uninterruptible wait in the kernel", "Z": "a zombie"}

func summarise(ranks []Rank) []Finding {
	var out []Finding
	var have []Rank
	for _, r := range ranks {
		if len(r.Entries) == 0 {
			why := r.Missing
			if why == "" {
				why = "no collective recorded"
			}
			out = append(out, Finding{Rank: r.Rank, Text: fmt.Sprintf("rank %d: no record of its collectives (%s)", r.Rank, why)})
			continue
		}
		have = append(have, r)
	}
	if len(have) == 0 {
		return out
	}
	// The collective the hang is in: the latest entered and not left.
	var stuck *Entry
	for _, r := range have {
		if e := r.Entries[len(r.Entries)-1]; e.State == "enter" && (stuck == nil || e.GSeq > stuck.GSeq) {
			e := e
			stuck = &e
		}
	}
	if stuck == nil {
		return append(out, behindSeq(have)...)
	}
	var waiting []int
	type lag struct {
		r    Rank
		last Entry
	}
	var behind []lag
	for _, r := range have {
		last, ok := lastOn(r.Entries, stuck.Group)
		switch {
		case !ok:
			// not a member, or it never used the group: no evidence
		case last.GSeq >= stuck.GSeq && last.State == "enter":
			waiting = append(waiting, r.Rank)
		case last.GSeq < stuck.GSeq:
			behind = append(behind, lag{r, last})
		}
	}
	w := ranges(waiting)
	for _, b := range behind {
		out = append(out, Finding{Rank: b.r.Rank, Behind: true, Text: fmt.Sprintf(
			"rank %d did not enter collective #%d on %s (%s) that rank(s) %s wait in: its last there is #%d (%s); its last collective of all is %s",
			b.r.Rank, stuck.GSeq, stuck.Group, stuck.Op, w, b.last.GSeq, b.last.State, b.r.Entries[len(b.r.Entries)-1])})
	}
	if len(behind) == 0 {
		out = append(out, Finding{Rank: -1, Text: fmt.Sprintf("rank(s) %s wait in collective #%d on %s (%s); every rank with a record on that group entered it", w, stuck.GSeq, stuck.Group, stuck.Op)})
	}
	return out
}

// behindSeq: no rank is inside a recorded collective (they wait elsewhere,
// e.g. in DDP's gradient all-reduce, which the client does not see); the
// ranks whose last sequence number is below the others' are named.
func behindSeq(have []Rank) []Finding {
	top := int64(0)
	for _, r := range have {
		top = max(top, r.Entries[len(r.Entries)-1].Seq)
	}
	var out []Finding
	var at []int
	for _, r := range have {
		last := r.Entries[len(r.Entries)-1]
		if last.Seq < top {
			out = append(out, Finding{Rank: r.Rank, Behind: true, Text: fmt.Sprintf("rank %d's last collective is %s, behind the others' #%d", r.Rank, last, top)})
		} else {
			at = append(at, r.Rank)
		}
	}
	if len(out) == 0 {
		out = append(out, Finding{Rank: -1, Text: fmt.Sprintf("every rank's last recorded collective is #%d, completed: the hang is outside the collectives the client records (compute, I/O, or a collective of C++ code such as DDP's gradient all-reduce)", top)})
	} else {
		out = append(out, Finding{Rank: -1, Text: fmt.Sprintf("rank(s) %s are at collective #%d", ranges(at), top)})
	}
	return out
}

func lastOn(es []Entry, group string) (Entry, bool) {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Group == group {
			return es[i], true
		}
	}
	return Entry{}, false
}

// ranges writes ranks as "0-3,7".
func ranges(rs []int) string {
	rs = slices.Clone(rs)
	slices.Sort(rs)
	var b strings.Builder
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", rs[i], rs[j])
		} else {
			fmt.Fprintf(&b, "%d", rs[i])
		}
		i = j + 1
	}
	return b.String()
}
