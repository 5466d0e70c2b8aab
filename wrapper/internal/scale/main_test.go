package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary is also each child of the benchmark: roleEnv names which
// (shims, controller, commit, noop), and the child prints one JSON result
// on its stdout.
const roleEnv = "TRAINRUN_SCALE_ROLE"

func TestMain(m *testing.M) {
	role := os.Getenv(roleEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	var res any
	var err error
	switch role {
	case "shims":
		res, err = runShims(envInt("TRAINRUN_SCALE_WORLD"), os.Getenv("TRAINRUN_SCALE_LAUNCH"), os.Getenv("TRAINRUN_SCALE_STORE"))
	case "controller":
		res, err = runController(envInt("TRAINRUN_SCALE_WORLD"), os.Getenv("TRAINRUN_SCALE_LAUNCH"), os.Getenv("TRAINRUN_SCALE_STORE"))
	case "commit":
		res, err = runCommit(os.Getenv("TRAINRUN_SCALE_STORE"), os.Getenv("TRAINRUN_SCALE_TAG"), envInt("TRAINRUN_SCALE_WORLD"))
	case "noop":
		res = struct{}{}
	default:
		err = fmt.Errorf("%s=%q: not a role (shims, controller, commit, noop)", roleEnv, role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "scale %s: %v\n", role, err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

func envInt(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		fmt.Fprintf(os.Stderr, "scale: %s=%q: not a number\n", name, os.Getenv(name))
		os.Exit(2)
	}
	return n
}

// raiseNoFile lifts the soft descriptor limit to the hard one and says
// whether want descriptors fit under it.
func raiseNoFile(want int) error {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	l.Cur = l.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur < uint64(want) {
		return fmt.Errorf("RLIMIT_NOFILE hard limit is %d, %d ranks need %d descriptors in one process: raise it (ulimit -Hn, limits.conf) or simulate fewer ranks", l.Max, want-256, want)
	}
	return nil
}

// child runs this test binary as role with env and decodes its JSON result
// into out. wrap, when set, is a command line put before the binary
// (strace).
func child(role string, env []string, out any, wrap ...string) error {
	args := append(wrap, os.Args[0], "-test.run=^$")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s child: %w", role, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s child: result %q: %w", role, b, err)
	}
	return nil
}
