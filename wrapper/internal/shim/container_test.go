package shim

import (
	"bytes"
	"slices"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/container"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// The runtime prefix passes the heartbeat's variables into the container
// (they are added to the trainer's environment after the command is
// built): without them the trainer client never beats and a hung rank in
// a container goes unseen.
func TestContainerCommandPassesHeartbeat(t *testing.T) {
	c := &launch.Common{JobID: "7", Container: &container.Run{Runtime: "podman", Image: "localhost/t:1"}}
	envl := []string{"PATH=/usr/bin:/bin", "RANK=1"}
	_, argv, err := containerCommand(Env{Stderr: &bytes.Buffer{}}, c, []string{"python3", "t.py"}, envl, 1, "n1")
	if err != nil {
		t.Skipf("podman not on this PATH: %v", err)
	}
	for _, name := range []string{"TRAINRUN_HEARTBEAT_FD", "TRAINRUN_STACK_SIGNAL", "RANK"} {
		i := slices.Index(argv, name)
		if i < 1 || argv[i-1] != "-e" {
			t.Errorf("%s not passed into the container: %v", name, argv)
		}
	}
	if !slices.Contains(argv, "--preserve-fds=1") || argv[len(argv)-2] != "python3" {
		t.Errorf("argv %v", argv)
	}
}
