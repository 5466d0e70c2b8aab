package slurm

import "strings"

// Record is one line of `scontrol show ... -o`: its Key=Value fields.
type Record map[string]string

// ParseRecord splits one line of `scontrol -o` output into its fields.
// A field starts at a word of the form Key=..., where Key begins with an
// upper-case letter and holds only letters, digits and ':', '_', '/'
// (AllocNode:Sid, CPUs/Task); everything up to the next such word is its
// value, spaces included (Comment=two words  here, Reason=Not responding
// [slurm@...], OS=Linux 6.1 #1 SMP), without the spaces that separate it from
// the next field. A value that itself holds " Key=" cannot be told from a new
// field; scontrol does not quote. The first of two equal keys wins. Text
// before the first key is dropped.
func ParseRecord(line string) Record {
	r := Record{}
	key, start := "", -1 // the open field and where its value starts
	closeField := func(end int) {
		if key != "" {
			if _, dup := r[key]; !dup {
				r[key] = strings.TrimRight(line[start:end], " \t\r\n")
			}
		}
	}
	for i := 0; i < len(line); {
		// Skip to the next word.
		if isSpace(line[i]) {
			i++
			continue
		}
		j := i
		for j < len(line) && !isSpace(line[j]) {
			j++
		}
		word := line[i:j]
		if k, _, ok := strings.Cut(word, "="); ok && isKey(k) {
			closeField(i)
			key, start = k, i+len(k)+1
		}
		i = j
	}
	closeField(len(line))
	return r
}

// ParseRecords parses every non-empty line of out (`scontrol show node -o`
// prints one record per node).
func ParseRecords(out string) []Record {
	var rs []Record
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		rs = append(rs, ParseRecord(line))
	}
	return rs
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

func isKey(k string) bool {
	if k == "" || k[0] < 'A' || k[0] > 'Z' {
		return false
	}
	for _, r := range k {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == ':' || r == '_' || r == '/') {
			return false
		}
	}
	return true
}
