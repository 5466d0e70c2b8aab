package slurm

import (
	"os/exec"
	"strings"
	"testing"
)

// The hint is safe to paste: a hostile node name reaches scontrol as one
// argument (checked by bash itself), and a plain one stays readable.
func TestDrainHintQuotes(t *testing.T) {
	if got := DrainHint([]string{"n1", "gpu[2-3]"}, "trainrun"); got != "scontrol update nodename=n1,gpu[2-3] state=drain reason=trainrun" {
		t.Errorf("plain: %s", got)
	}
	hint := DrainHint([]string{"n1;touch /tmp/pwned", "$(id)'`x`"}, "trainrun: failed in job 7")
	out, err := exec.Command("bash", "-c", `f() { printf '%s\n' "$@"; }; f `+strings.TrimPrefix(hint, "scontrol ")).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "update\nnodename=n1;touch /tmp/pwned,$(id)'`x`\nstate=drain\nreason=trainrun: failed in job 7\n"
	if string(out) != want {
		t.Errorf("bash read %q as:\n%s\nwant:\n%s", hint, out, want)
	}
}
