package main

import (
	"os"

	"github.com/trainrun/trainrun/spank"
)

// resumeHelper runs `trainrun __resume-dir DIR`, the hidden helper the SPANK
// plugin starts as the job's user to read the checkpoint store for
// TRAINRUN_RESUME_DIR (spank.ResumeDirAs), so root slurmstepd never opens
// the store itself. ok is false for every other command line.
func resumeHelper(args []string) (code int, ok bool) {
	if len(args) == 0 || args[0] != spank.ResumeHelperArg {
		return 0, false
	}
	return spank.ResumeHelperMain(args[1:], os.Stdout), true
}
