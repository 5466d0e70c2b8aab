package topo

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// RandomHostlistExpr returns a random hostlist expression that Slurm accepts,
// for comparing ExpandHostlist with `scontrol show hostnames` (the e2e suite)
// and for fuzzing. It covers zero padding (with bounds of different widths,
// as in n[08-100]), several ranges and singles in one bracket (overlaps and
// duplicates included), up to three bracket groups with text between them,
// names that end in digits before a bracket (n1[0-3]), an empty prefix, plain
// names, and comma-separated lists. It never writes text after the last ']'
// (Slurm rejects that) and keeps each expression under about 2,000 names.
// The same r state gives the same expression.
func RandomHostlistExpr(r *rand.Rand) string {
	items := 1 + weighted(r, 50, 30, 15, 5)
	parts := make([]string, items)
	for i := range parts {
		if r.IntN(5) == 0 {
			parts[i] = randName(r, true)
			continue
		}
		parts[i] = randBracketItem(r)
	}
	return strings.Join(parts, ",")
}

// weighted returns i with probability w[i]/sum(w).
func weighted(r *rand.Rand, w ...int) int {
	sum := 0
	for _, x := range w {
		sum += x
	}
	n := r.IntN(sum)
	for i, x := range w {
		if n < x {
			return i
		}
		n -= x
	}
	return len(w) - 1
}

const genLetters = "abcdefghijklmnopqrstuvwxyz"

// randName is a host-name fragment: a letter, then letters, digits, '-', '_'
// or '.'. With mayEndInDigit false it does not end in a digit.
func randName(r *rand.Rand, mayEndInDigit bool) string {
	const rest = genLetters + "0123456789-_."
	n := 1 + r.IntN(8)
	b := make([]byte, n)
	b[0] = genLetters[r.IntN(len(genLetters))]
	for i := 1; i < n; i++ {
		b[i] = rest[r.IntN(len(rest))]
	}
	if !mayEndInDigit && b[n-1] >= '0' && b[n-1] <= '9' {
		b[n-1] = genLetters[r.IntN(len(genLetters))]
	}
	return string(b)
}

// randBracketItem is text[ranges]text[ranges]... ending in ']', with at most
// about 2,000 names.
func randBracketItem(r *rand.Rand) string {
	groups := 1 + weighted(r, 60, 30, 10)
	budget := 2000
	var b strings.Builder
	for g := 0; g < groups; g++ {
		switch {
		case g == 0 && r.IntN(20) == 0: // empty prefix: [1-3]
		case g > 0 && r.IntN(10) == 0: // adjacent groups: a[1-2][3-4]
		case r.IntN(8) == 0: // text ending in a digit: n1[0-3]
			b.WriteString(randName(r, false))
			b.WriteString(strconv.Itoa(r.IntN(10)))
		default:
			b.WriteString(randName(r, false))
			if r.IntN(3) == 0 {
				b.WriteByte("-_."[r.IntN(3)])
			}
		}
		// leave room for the groups still to come: an equal share each
		share := int(math.Pow(float64(budget), 1/float64(groups-g)))
		s, count := randRanges(r, max(share, 1))
		budget = max(budget/max(count, 1), 1)
		b.WriteString(s)
	}
	return b.String()
}

// randRanges is one bracket "[...]" holding at most limit names, and its size.
func randRanges(r *rand.Rand, limit int) (string, int) {
	n := 1 + weighted(r, 45, 30, 15, 10)
	padded := r.IntN(5) < 2
	width := 2 + r.IntN(3)
	var parts []string
	count := 0
	for i := 0; i < n && count < limit; i++ {
		lo := r.IntN(130)
		span := 0
		if r.IntN(3) > 0 {
			span = r.IntN(25)
		}
		span = min(span, limit-count-1)
		hi := lo + span
		loS := strconv.Itoa(lo)
		if padded {
			loS = padNum(uint64(lo), width)
		}
		if span == 0 && r.IntN(2) == 0 {
			parts = append(parts, loS)
		} else {
			hiS := strconv.Itoa(hi)
			switch r.IntN(6) {
			case 0: // the end written with its own padding: n[8-0100]
				hiS = padNum(uint64(hi), len(hiS)+1)
			case 1, 2, 3:
				if padded {
					hiS = padNum(uint64(hi), width)
				}
			}
			parts = append(parts, loS+"-"+hiS)
		}
		count += span + 1
	}
	return "[" + strings.Join(parts, ",") + "]", count
}
