package slurm

import "testing"

func TestOpenModeAppend(t *testing.T) {
	env := func(v string) Getenv {
		return func(k string) string {
			if k == "SBATCH_OPEN_MODE" {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name, script, env string
		appends, known    bool
	}{
		{"README example", "#!/bin/bash\n#SBATCH --nodes=2 --requeue\n#SBATCH --signal=B:USR1@600 --open-mode=append\nexec trainrun run -- true\n", "", true, true},
		{"separate value", "#SBATCH --open-mode append\n", "", true, true},
		{"truncate", "#SBATCH --open-mode=truncate\n", "", false, true},
		{"none", "#!/bin/bash\n#SBATCH --requeue\nexec trainrun run -- true\n", "", false, false},
		{"after the first command sbatch reads no more", "#!/bin/bash\necho hi\n#SBATCH --open-mode=append\n", "", false, false},
		{"in a comment", "#SBATCH --requeue # --open-mode=append\n", "", false, false},
		{"env", "", "append", true, true},
		{"env truncate wins", "#SBATCH --open-mode=append\n", "truncate", false, true},
	} {
		a, k := OpenModeAppend([]byte(tc.script), env(tc.env))
		if a != tc.appends || k != tc.known {
			t.Errorf("%s: OpenModeAppend = %v, %v; want %v, %v", tc.name, a, k, tc.appends, tc.known)
		}
	}
}

func TestJobIsBatch(t *testing.T) {
	for line, want := range map[string]bool{
		"JobId=7 JobName=x BatchFlag=1 Requeue=1":           true,
		"JobId=8 JobName=interactive BatchFlag=0 Requeue=1": false,
	} {
		j, err := ParseJob(line, nil)
		if err != nil {
			t.Fatal(err)
		}
		if j.IsBatch() != want {
			t.Errorf("%s: IsBatch %v", line, !want)
		}
	}
	if !(Job{}).IsBatch() {
		t.Error("an unknown job counts as batch")
	}
}
