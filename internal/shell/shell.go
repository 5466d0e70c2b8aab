// Package shell quotes words for a POSIX shell, as trainrun writes them into
// batch scripts, summaries and the environment lines it prints.
package shell

import "strings"

// Quote leaves safe words alone and single-quotes the rest.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_@%+=:,./-", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word of argv (Quote) and joins them with spaces: a
// command line a shell reads back as argv.
func Join(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}
