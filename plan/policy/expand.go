package policy

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// ExpandCkptDirChecked is ExpandCkptDir for a root process (the SPANK plugin
// in slurmstepd; issue 12 finding 4): user and jobName must come from Slurm
// (the job's uid through getpwuid, the job record), not from the job's
// environment, and no expansion may hold '/', NUL or "..", or be "." or
// empty, so %u and %x stay one path component each. The result must be
// absolute and already clean (expanding must not make "." or "//"
// components), and, with roots, under one of them (checked again after
// expanding). Errors name the placeholder and the value.
func ExpandCkptDirChecked(dir, user, jobID, jobName string, roots []string) (string, error) {
	for _, e := range []struct{ ph, what, v string }{{"%u", "user", user}, {"%j", "job id", jobID}, {"%x", "job name", jobName}} {
		if !strings.Contains(dir, e.ph) {
			continue
		}
		if e.v == "" || e.v == "." || strings.Contains(e.v, "..") || strings.ContainsAny(e.v, "/\x00\n") {
			return "", fmt.Errorf("CkptDir %s: %s (the %s) is %s, which cannot be one directory name (no '/', '..', NUL, not empty or '.'); rename the job or use a CkptDir without %s",
				dir, e.ph, e.what, strconv.QuoteToASCII(e.v), e.ph)
		}
	}
	out := ExpandCkptDir(dir, user, jobID, jobName)
	if !path.IsAbs(out) || path.Clean(out) != out || strings.Contains("/"+out+"/", "/../") {
		return "", fmt.Errorf("CkptDir %s expands to %s, which is not a clean absolute path", dir, strconv.QuoteToASCII(out))
	}
	if len(roots) > 0 && !underRoot(out, roots) {
		return "", fmt.Errorf("CkptDir %s expands to %s, which is not under CkptRoots=%s", dir, out, strings.Join(roots, ","))
	}
	return out, nil
}
