package shim

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestCatchesSignal(t *testing.T) {
	plain := exec.Command("sleep", "5")
	trap := exec.Command("sh", "-c", `trap "echo got" USR2; sleep 5 & wait`)
	for _, c := range []*exec.Cmd{plain, trap} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Process.Kill()
	}
	time.Sleep(200 * time.Millisecond) // let sh install its trap
	if got, err := catchesSignal(plain.Process.Pid, syscall.SIGUSR2); got || err != nil {
		t.Errorf("sleep catches USR2: %v %v", got, err)
	}
	if got, err := catchesSignal(trap.Process.Pid, syscall.SIGUSR2); !got || err != nil {
		t.Errorf("sh with a trap does not catch USR2: %v %v", got, err)
	}
	if _, err := catchesSignal(1<<22+12345, syscall.SIGUSR2); err == nil {
		t.Error("no error for a missing process")
	}
}

func TestCPULists(t *testing.T) {
	set, err := parseCPUList("0-3,8,10-11")
	if err != nil || set.Count() != 7 || !set.IsSet(8) || set.IsSet(9) {
		t.Errorf("parseCPUList: %v %v", set, err)
	}
	if _, err := parseCPUList("3-1"); err == nil {
		t.Error("3-1 accepted")
	}
}
