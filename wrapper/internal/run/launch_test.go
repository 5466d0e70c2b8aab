package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/safefs/safefstest"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// writeLaunchDir into a job directory whose launch/ another uid created
// first fails instead of writing into it.
func TestSecLaunchDirPrecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "launch")
	os.Mkdir(dir, 0o777)
	os.Chmod(dir, 0o777)
	safefstest.AsNobody(t, dir)
	if err := writeLaunchDir(dir, launch.Common{JobID: "7", World: 1}, nil, rankEnv{}); err == nil {
		t.Fatal("wrote launch files into another uid's directory")
	}
}

// Issue 12, finding 3: the shim merges launch files into the trainer's
// environment; a file another uid planted (or one anyone can write) would
// set PATH and LD_PRELOAD. launch.Read refuses both.
func TestSecShimRefusesForeignLaunchFiles(t *testing.T) {
	for _, c := range []struct{ name, file string }{
		{"common.json of another uid", launch.CommonFile},
		{"node file of another uid", filepath.Join(launch.NodeDir, "n1.json")},
		{"world-writable common.json", launch.CommonFile + "+w"},
		{"launch dir of another uid", "."},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeTestLaunch(t)
			if strings.HasSuffix(c.file, "+w") {
				p := filepath.Join(dir, strings.TrimSuffix(c.file, "+w"))
				os.Chmod(p, 0o666)
			} else {
				safefstest.AsNobody(t, filepath.Join(dir, c.file))
			}
			if _, _, err := launch.Read(dir, "n1", 0); err == nil {
				t.Fatalf("the shim accepted launch files when %s", c.name)
			}
		})
	}
}
