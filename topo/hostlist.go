package topo

import (
	"fmt"
	"strconv"
	"strings"
)

// Slurm hostlist expressions, both ways, with the behaviour of Slurm's own
// src/common/hostlist.c as measured with `scontrol show hostnames` and
// `scontrol show hostlist` of Slurm 22.05.8 (Debian 12); the captured outputs
// are in testdata/slurm/hostlist-scontrol-22.05.txt and the tests replay them.
//
// Grammar (top level):
//
//	list    = item { sep item }          sep = "," | " " | "\t" (outside brackets)
//	item    = name | { text "[" ranges "]" } text? ... ending in "]"
//	ranges  = range { "," range }
//	range   = digits [ "-" digits ]
//
// What Slurm does, and so do we:
//   - zero padding: a range's width is the length of its first bound as written
//     (n[08-100] -> n08 .. n99, n100; n[8-0100] -> n8 .. n100);
//   - several bracket groups form a cartesian product in Slurm's order: the last
//     group varies fastest, the others nest from the second-to-last (outermost)
//     down to the first: a[1-2]b[1-2]c[1-2] -> a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 ...
//     (for two groups this is the plain order x1-y3 x1-y4 x2-y3 x2-y4);
//   - duplicates are kept: tux[2,1-2] -> tux2 tux1 tux2;
//   - empty items between separators are skipped: "a,,b" -> a b;
//   - text after the last "]" is invalid: gpu[1-4]-ib is rejected by Slurm
//     ("Invalid hostlist"), so it is an error here too; text between groups is fine;
//   - one range may hold at most 65,536 names (MAX_RANGE), and every bracket
//     group but the last at most 65,536 names in all (MAX_PREFIX_CNT).
//
// Where we are stricter than Slurm (Slurm's parser accepts these by accident of
// strtoul and strrchr; none is a hostlist any Slurm tool prints): a "[" without
// "]" (Slurm silently yields the host "n]" for "n[1-3"), a stray "]", nested
// brackets, signs or spaces inside brackets ("n[ 1-2]" gives n01 n02 in Slurm),
// a range with an empty end ("n[3-]" gives n3 in Slurm), bounds above 2^64-1
// (Slurm wraps them), a line break (Slurm keeps it inside a name; a trailing
// one is trimmed here), and an expression with no names at all. trainrun also
// refuses expansions of more than MaxHostlistNames names, which Slurm does not
// cap.

// Slurm's limits (src/common/hostlist.c, 22.05, confirmed with scontrol:
// n[0-65535] expands, n[0-65536] is "Too many hosts in range", and
// a[0-65535,0-1]b[1] is "Invalid hostlist").
const (
	// MaxHostlistRange is the most names one range a-b may hold (MAX_RANGE).
	MaxHostlistRange = 64 * 1024
	// MaxHostlistPrefix is the most names a bracket group that is not the
	// last of its item may hold (MAX_PREFIX_CNT).
	MaxHostlistPrefix = 64 * 1024
	// MaxHostlistNames is trainrun's own cap on one expansion, so a typo like
	// a[0-65535]b[0-65535] fails fast instead of allocating 4 billion strings.
	// The largest Slurm clusters have tens of thousands of nodes.
	MaxHostlistNames = 1 << 20
	// MaxHostNameLen is the longest host name an expansion may produce:
	// 255 bytes, the longest DNS name (RFC 1035 2.3.4) and Linux's
	// HOST_NAME_MAX is 64, so no real node name comes near it. A range's
	// zero-pad width counts towards it before anything is allocated.
	MaxHostNameLen = 255
	// MaxHostlistBytes caps the bytes of all names one expansion produces
	// (16 MiB: a million names of 16 bytes). A 4 KB SLURM_STEP_NODELIST
	// written by a user reaches root slurmstepd, and widths alone once
	// made 4 KB expand to 259 MiB; the cap is checked before allocating.
	MaxHostlistBytes = 16 << 20
)

// HostlistError is a malformed hostlist expression. Pos is the 0-based byte
// offset in Expr of the offending part; Error prints it as a 1-based column.
type HostlistError struct {
	Expr string
	Pos  int
	Msg  string
}

func (e *HostlistError) Error() string {
	expr := e.Expr
	if len(expr) > 120 { // a hostile nodelist is not copied whole into root's logs
		expr = expr[:120] + fmt.Sprintf("...(%d bytes)", len(e.Expr))
	}
	return fmt.Sprintf("hostlist %q, column %d: %s", expr, e.Pos+1, e.Msg)
}

func hlErr(expr string, pos int, format string, a ...any) error {
	return &HostlistError{Expr: expr, Pos: pos, Msg: fmt.Sprintf(format, a...)}
}

// isHostlistSep: Slurm 22.05 splits on commas, spaces and tabs; a newline
// is not a separator (scontrol: "a[1-2]\nb1" is an invalid hostlist).
func isHostlistSep(c byte) bool { return c == ',' || c == ' ' || c == '\t' }

// ExpandHostlist expands a Slurm hostlist expression into host names, in the
// order and with the duplicates `scontrol show hostnames` prints.
func ExpandHostlist(expr string) ([]string, error) {
	expr = strings.TrimRight(expr, "\r\n") // as read from a file or a command's output
	var out []string
	depth, start, open := 0, -1, 0
	var bytes uint64 // of the names in out, for MaxHostlistBytes
	flush := func(end int) error {
		if start < 0 {
			return nil
		}
		names, err := expandItem(expr, start, end, len(out), bytes)
		if err != nil {
			return err
		}
		for _, n := range names {
			bytes += uint64(len(n))
		}
		out = append(out, names...)
		start = -1
		return nil
	}
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '[':
			if depth > 0 {
				return nil, hlErr(expr, i, "nested '[' inside the bracket opened at column %d", open+1)
			}
			depth, open = 1, i
			if start < 0 {
				start = i
			}
		case c == ']':
			if depth == 0 {
				return nil, hlErr(expr, i, "']' without a matching '['")
			}
			depth = 0
		case c == '\n' || c == '\r':
			return nil, hlErr(expr, i, "line break inside the expression; separate names with commas")
		case depth == 0 && isHostlistSep(c):
			if err := flush(i); err != nil {
				return nil, err
			}
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if depth > 0 {
		return nil, hlErr(expr, open, "'[' is never closed; a range is written like n[1-4]")
	}
	if err := flush(len(expr)); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, hlErr(expr, 0, "empty expression: no host names")
	}
	return out, nil
}

// hlRange is one "lo-hi" (or single "lo") inside brackets.
type hlRange struct {
	lo, hi uint64
	width  int
}

// hlGroup is one bracketed list with the literal text before it.
type hlGroup struct {
	text   string
	pos    int // offset of its '[' in the expression
	ranges []hlRange
	count  uint64
}

// expandItem expands expr[start:end], which holds no top-level separator and
// balanced brackets. have and haveBytes are the names and bytes already
// expanded, for the caps.
func expandItem(expr string, start, end, have int, haveBytes uint64) ([]string, error) {
	item := expr[start:end]
	var groups []hlGroup
	textStart := 0
	for i := 0; i < len(item); i++ {
		if item[i] != '[' {
			continue
		}
		j := i + 1 + strings.IndexByte(item[i+1:], ']') // balanced: always found
		ranges, count, err := parseRanges(expr, start+i+1, item[i+1:j])
		if err != nil {
			return nil, err
		}
		groups = append(groups, hlGroup{text: item[textStart:i], pos: start + i, ranges: ranges, count: count})
		textStart = j + 1
		i = j
	}
	if len(groups) == 0 {
		if len(item) > MaxHostNameLen {
			return nil, hlErr(expr, start, "host name of %d bytes; a host name has at most %d", len(item), MaxHostNameLen)
		}
		if uint64(have)+1 > MaxHostlistNames || haveBytes+uint64(len(item)) > MaxHostlistBytes {
			return nil, hlErr(expr, start, "expands to more than %d names or %d bytes (trainrun's limit)", MaxHostlistNames, MaxHostlistBytes)
		}
		return []string{item}, nil
	}
	if textStart < len(item) {
		return nil, hlErr(expr, start+textStart,
			"text %q after the last ']': Slurm rejects a name that goes on after its last range (scontrol: Invalid hostlist)",
			item[textStart:])
	}
	total := uint64(1)
	for gi, g := range groups {
		if gi < len(groups)-1 && g.count > MaxHostlistPrefix {
			return nil, hlErr(expr, g.pos,
				"bracket group holds %d names; Slurm allows at most %d in a group that is not the last", g.count, MaxHostlistPrefix)
		}
		if g.count > MaxHostlistNames { // keeps the product below from overflowing
			return nil, hlErr(expr, g.pos, "expands to more than %d names (trainrun's limit)", MaxHostlistNames)
		}
		total *= g.count // both factors <= 2^20
		if total > MaxHostlistNames || uint64(have)+total > MaxHostlistNames {
			return nil, hlErr(expr, start, "expands to more than %d names (trainrun's limit)", MaxHostlistNames)
		}
	}
	if err := checkItemSize(expr, start, groups, total, haveBytes); err != nil {
		return nil, err
	}
	vals := make([][]string, len(groups))
	for gi, g := range groups {
		vals[gi] = make([]string, 0, g.count)
		for _, r := range g.ranges {
			for v := r.lo; ; v++ {
				vals[gi] = append(vals[gi], padNum(v, r.width))
				if v == r.hi {
					break
				}
			}
		}
	}
	// Slurm's nesting: the second-to-last group outermost, down to the first,
	// then the last group innermost.
	n := len(groups)
	order := make([]int, 0, n)
	for gi := n - 2; gi >= 0; gi-- {
		order = append(order, gi)
	}
	order = append(order, n-1)
	out := make([]string, 0, total)
	idx := make([]int, n)
	var b strings.Builder
	for {
		b.Reset()
		for gi, g := range groups {
			b.WriteString(g.text)
			b.WriteString(vals[gi][idx[gi]])
		}
		out = append(out, b.String())
		// advance the odometer, innermost (last of order) first
		k := n - 1
		for ; k >= 0; k-- {
			gi := order[k]
			idx[gi]++
			if idx[gi] < len(vals[gi]) {
				break
			}
			idx[gi] = 0
		}
		if k < 0 {
			return out, nil
		}
	}
}

// checkItemSize refuses, before anything is allocated, an item whose longest
// name exceeds MaxHostNameLen or whose names, with haveBytes already
// expanded, exceed MaxHostlistBytes. total is the item's name count.
func checkItemSize(expr string, start int, groups []hlGroup, total, haveBytes uint64) error {
	longest, bytes := 0, uint64(0)
	for _, g := range groups {
		w, sum := 0, uint64(0) // widest value of the group; bytes of all its values
		for _, r := range g.ranges {
			rw := max(r.width, len(strconv.FormatUint(r.hi, 10)))
			w = max(w, rw)
			sum += (r.hi - r.lo + 1) * uint64(rw) // an upper bound; rw <= 20 + MaxHostNameLen
		}
		longest += len(g.text) + w
		// every value of g appears total/g.count times, each text total times
		bytes += uint64(len(g.text))*total + sum*(total/g.count)
	}
	if longest > MaxHostNameLen {
		return hlErr(expr, start, "names up to %d bytes long; a host name has at most %d (check the ranges' zero padding)", longest, MaxHostNameLen)
	}
	if haveBytes+bytes > MaxHostlistBytes {
		return hlErr(expr, start, "expands to about %d bytes of names; trainrun's limit is %d", haveBytes+bytes, MaxHostlistBytes)
	}
	return nil
}

// parseRanges parses the inside of one bracket, which starts at expr[pos].
func parseRanges(expr string, pos int, s string) ([]hlRange, uint64, error) {
	var out []hlRange
	var count uint64
	off := 0
	for _, part := range strings.Split(s, ",") {
		p := pos + off
		off += len(part) + 1
		if part == "" {
			return nil, 0, hlErr(expr, p, "empty range in %q; write n[1-3,5]", "["+s+"]")
		}
		loS, hiS, isRange := strings.Cut(part, "-")
		lo, err := parseBound(expr, p, part, loS)
		if err != nil {
			return nil, 0, err
		}
		hi := lo
		if isRange {
			if hi, err = parseBound(expr, p+len(loS)+1, part, hiS); err != nil {
				return nil, 0, err
			}
		}
		if lo > hi {
			return nil, 0, hlErr(expr, p, "bad range %q: start %d is greater than end %d", part, lo, hi)
		}
		if hi-lo >= MaxHostlistRange {
			return nil, 0, hlErr(expr, p, "range %q holds %d names; Slurm allows at most %d in one range", part, hi-lo+1, MaxHostlistRange)
		}
		out = append(out, hlRange{lo: lo, hi: hi, width: len(loS)})
		count += hi - lo + 1
	}
	return out, count, nil
}

func parseBound(expr string, pos int, part, s string) (uint64, error) {
	if s == "" {
		return 0, hlErr(expr, pos, "bad range %q: a bound is missing; write a-b with decimal numbers", part)
	}
	if len(s) > MaxHostNameLen {
		return 0, hlErr(expr, pos, "bad range %q: a bound of %d digits; a host name has at most %d bytes", part, len(s), MaxHostNameLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, hlErr(expr, pos+i, "bad range %q: %q is not a decimal digit", part, s[i:i+1])
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, hlErr(expr, pos, "bad range %q: %s does not fit in 64 bits", part, s)
	}
	return v, nil
}

// padNum formats v in decimal, left-padded with zeros to width (Slurm's %0*lu).
func padNum(v uint64, width int) string {
	s := strconv.FormatUint(v, 10)
	if len(s) >= width {
		return s
	}
	return strings.Repeat("0", width-len(s)) + s
}

// hostName is a host split into prefix and numeric suffix, as Slurm's
// hostname_create does: the suffix is the trailing run of digits.
type hostName struct {
	name   string
	prefix string
	num    uint64
	digits string // the suffix as written; "" when the name has none
}

func splitHost(h string) hostName {
	i := len(h)
	for i > 0 && h[i-1] >= '0' && h[i-1] <= '9' {
		i--
	}
	hn := hostName{name: h, prefix: h[:i]}
	if i == len(h) {
		return hn
	}
	v, err := strconv.ParseUint(h[i:], 10, 64)
	if err != nil { // too long for a number: keep the name whole
		hn.prefix = h
		return hn
	}
	hn.num, hn.digits = v, h[i:]
	return hn
}

// hostWidths is the set of zero-pad widths under which digits prints as written:
// exactly len(digits) when zero padded, any width up to len(digits) otherwise.
func hostWidths(digits string) (lo, hi int) {
	if len(digits) > 1 && digits[0] == '0' {
		return len(digits), len(digits)
	}
	return 1, len(digits)
}

// hostRun is a run of consecutive numbers under one prefix that share a width.
type hostRun struct {
	prefix       string
	single       string // a name without numeric suffix; the run is that name alone
	lo, hi       uint64
	loS, hiS     string
	wmin, wmax   int
	numericValid bool
}

// CompressHostlist is the inverse of ExpandHostlist: what `scontrol show
// hostlist` prints for hosts. Like Slurm it keeps the order of hosts (sort
// them first for the shortest form), merges only neighbours that count up by
// one under the same prefix and a compatible zero padding, and groups
// neighbouring runs of one prefix in one bracket: n1,n2,n3,n5 -> n[1-3,5];
// n8,n9,n10,n010 -> n[8-10,010]; n3,n1,n2 -> n[3,1-2]. Names with several
// numbers are compressed on the last one only (x1-y3,x1-y4 -> x1-y[3-4]), as
// Slurm does. ExpandHostlist(CompressHostlist(h)) == h for every list of
// names made of letters, digits, '-', '_' and '.'.
func CompressHostlist(hosts []string) string {
	var runs []hostRun
	for _, h := range hosts {
		hn := splitHost(h)
		if hn.digits == "" {
			runs = append(runs, hostRun{single: h})
			continue
		}
		wlo, whi := hostWidths(hn.digits)
		if n := len(runs); n > 0 {
			r := &runs[n-1]
			if r.numericValid && r.prefix == hn.prefix && r.hi != ^uint64(0) && hn.num == r.hi+1 &&
				max(r.wmin, wlo) <= min(r.wmax, whi) {
				r.hi, r.hiS = hn.num, hn.digits
				r.wmin, r.wmax = max(r.wmin, wlo), min(r.wmax, whi)
				continue
			}
		}
		runs = append(runs, hostRun{prefix: hn.prefix, lo: hn.num, hi: hn.num, loS: hn.digits, hiS: hn.digits,
			wmin: wlo, wmax: whi, numericValid: true})
	}
	var b strings.Builder
	for i := 0; i < len(runs); {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		r := runs[i]
		if !r.numericValid {
			b.WriteString(r.single)
			i++
			continue
		}
		j := i + 1
		for j < len(runs) && runs[j].numericValid && runs[j].prefix == r.prefix {
			j++
		}
		b.WriteString(r.prefix)
		if j == i+1 && r.lo == r.hi {
			b.WriteString(r.loS)
			i = j
			continue
		}
		b.WriteByte('[')
		for k := i; k < j; k++ {
			if k > i {
				b.WriteByte(',')
			}
			b.WriteString(runs[k].loS)
			if runs[k].hi != runs[k].lo {
				b.WriteByte('-')
				// printed at the run's width, which is len(loS): that is hiS
				b.WriteString(runs[k].hiS)
			}
		}
		b.WriteByte(']')
		i = j
	}
	return b.String()
}
