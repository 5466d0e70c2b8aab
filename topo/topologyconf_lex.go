package topo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The lexical rules of Slurm's configuration files (slurm.conf, gres.conf,
// topology.conf), as src/common/parse_config.c applies them, shared by the
// topology.conf parser here and trainrun's policy file (plan/policy), which
// follows the same style on purpose:
//
//   - '#' starts a comment to the end of the line, also inside quotes; "\#" is
//     a literal '#';
//   - a line ending in '\' continues on the next line;
//   - a line is whitespace-separated Key=Value pairs; spaces around '=' are
//     allowed; a value in double quotes may hold spaces;
//   - keys are case-insensitive (callers compare with strings.EqualFold);
//   - blank lines are ignored.
//
// Slurm's "Include" directive and its Key+=/Key-= operators are not supported:
// the reader reports them as errors rather than misreading them.

// ConfPair is one Key=Value of a configuration line.
type ConfPair struct {
	Key   string // as written
	Value string // unquoted
	Line  int    // 1-based physical line of the key (continuations have their own)
}

// ConfLine is one logical line (continuations joined).
type ConfLine struct {
	Line  int // 1-based physical line where it starts
	Pairs []ConfPair
}

// ConfError is an error at a place in a configuration file. Its text is
// "file:line: key: message" (without "key: " when Key is empty).
type ConfError struct {
	File  string
	Line  int
	Key   string // the key as written, when the error is about one
	Value string // the offending value, when there is one
	Msg   string
}

func (e *ConfError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Key, e.Msg)
}

// ReadConfLines splits r into logical lines of Key=Value pairs. filename is
// used in error messages only. A physical line with a lexical error is left
// out and reading goes on, so a checker can report every error: the error
// returned joins one *ConfError per bad line (errors.Join), with the lines
// that did parse.
func ReadConfLines(r io.Reader, filename string) ([]ConfLine, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var out []ConfLine
	var cur *ConfLine
	var errs []error
	lineNo := 0
	for sc.Scan() {
		lineNo++
		text, cont := stripConfComment(sc.Text())
		pairs, err := splitConfPairs(text, filename, lineNo)
		if err != nil {
			errs = append(errs, err)
			pairs = nil
		}
		if cur == nil && len(pairs) > 0 {
			out = append(out, ConfLine{Line: lineNo})
			cur = &out[len(out)-1]
		}
		if cur != nil {
			cur.Pairs = append(cur.Pairs, pairs...)
		}
		if !cont {
			cur = nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", filename, err)
	}
	return out, errors.Join(errs...)
}

// stripConfComment removes a comment and reports a trailing continuation '\'.
// Like Slurm's _strip_comments it does not look at quotes: a '#' in a value
// must be written "\#".
func stripConfComment(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) && s[i+1] == '#' {
			b.WriteByte('#')
			i++
			continue
		}
		if c == '#' {
			break
		}
		b.WriteByte(c)
	}
	t := strings.TrimRight(b.String(), " \t\r")
	if strings.HasSuffix(t, "\\") {
		return t[:len(t)-1], true
	}
	return t, false
}

func isConfSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

func isConfKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.'
}

func splitConfPairs(s, filename string, line int) ([]ConfPair, error) {
	var out []ConfPair
	i := 0
	for {
		for i < len(s) && isConfSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			return out, nil
		}
		k := i
		for i < len(s) && isConfKeyChar(s[i]) {
			i++
		}
		key := s[k:i]
		for i < len(s) && isConfSpace(s[i]) {
			i++
		}
		if key == "" {
			return nil, &ConfError{File: filename, Line: line, Msg: fmt.Sprintf("expected Key=Value, found %q", confExcerpt(s[k:]))}
		}
		if strings.EqualFold(key, "include") {
			return nil, &ConfError{File: filename, Line: line, Key: key, Msg: "Include is not supported here; put the lines in this file"}
		}
		if i >= len(s) || s[i] != '=' {
			if i < len(s) && (s[i] == '+' || s[i] == '-' || s[i] == '*' || s[i] == '/') {
				return nil, &ConfError{File: filename, Line: line, Key: key, Msg: fmt.Sprintf("operator %q is not supported; write %s=VALUE", s[i:i+1]+"=", key)}
			}
			if n := len(out); n > 0 {
				prev := out[n-1]
				return nil, &ConfError{File: filename, Line: line, Key: prev.Key, Value: prev.Value,
					Msg: fmt.Sprintf("%q after %s=%s is not Key=Value (a value with spaces needs quotes)", key, prev.Key, prev.Value)}
			}
			return nil, &ConfError{File: filename, Line: line, Key: key, Msg: fmt.Sprintf("expected %s=VALUE, found %q", key, confExcerpt(s[k:]))}
		}
		i++
		for i < len(s) && isConfSpace(s[i]) {
			i++
		}
		var val string
		if i < len(s) && s[i] == '"' {
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, &ConfError{File: filename, Line: line, Key: key, Msg: "unterminated '\"' in value"}
			}
			val = s[i+1 : i+1+j]
			i += j + 2
		} else {
			v := i
			for i < len(s) && !isConfSpace(s[i]) {
				i++
			}
			val = s[v:i]
		}
		out = append(out, ConfPair{Key: key, Value: val, Line: line})
	}
}

// confExcerpt is s up to a readable length, for messages.
func confExcerpt(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// suggestKey returns the accepted key closest to key (case-insensitive edit
// distance at most 2), or "".
func suggestKey(key string, accepted []string) string {
	best, bestD := "", 3
	lk := strings.ToLower(key)
	for _, a := range accepted {
		if d := EditDistance(lk, strings.ToLower(a)); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b, for the "did
// you mean" hints of every error that names an unknown key or name.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// UnknownKeyMessage is the message for an unknown key: the accepted keys and,
// when one is close, a suggestion.
func UnknownKeyMessage(key string, accepted []string) string {
	msg := fmt.Sprintf("unknown key %q; accepted: %s", key, strings.Join(accepted, ", "))
	if s := suggestKey(key, accepted); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return msg
}
