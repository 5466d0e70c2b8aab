package shim

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/internal/failclass"
)

// A failed rank's class (issue 31): the shim keeps the trainer's last
// stderr lines (failclass.Tail, while passing them on) and reads its
// cgroup's OOM-kill count before and after, and names the class in its exit
// message; the controller acts on the step's (failclass.Step).

// cgroupRoot is where the cgroup file system is mounted (a test points it
// at a fixture).
var cgroupRoot = "/sys/fs/cgroup"

// oomKills is the OOM-kill count of this process's cgroup (v2's
// memory.events oom_kill, v1's memory.oom_control oom_kill), -1 when
// unreadable.
func oomKills(procCgroup string) int64 {
	b, err := os.ReadFile(procCgroup)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			file = filepath.Join(cgroupRoot, parts[2], "memory.events")
		case strings.Contains(","+parts[1]+",", ",memory,"): // v1
			file = filepath.Join(cgroupRoot, "memory", parts[2], "memory.oom_control")
		default:
			continue
		}
		if n := readCounter(file, "oom_kill"); n >= 0 {
			return n
		}
	}
	return -1
}

// readCounter reads "KEY N" from a cgroup file (-1: none).
func readCounter(file, key string) int64 {
	f, err := os.Open(file)
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// failureWatch is what the shim watches of one rank for its class.
type failureWatch struct {
	tail *failclass.Tail
	oom0 int64
}

func newFailureWatch() *failureWatch {
	return &failureWatch{tail: failclass.NewTail(), oom0: oomKills("/proc/self/cgroup")}
}

// classify names the rank's failure (a zero Result for exit 0).
func (w *failureWatch) classify(code int) failclass.Result {
	if code == 0 {
		return failclass.Result{}
	}
	oom := false
	if w.oom0 >= 0 {
		oom = oomKills("/proc/self/cgroup") > w.oom0
	}
	return failclass.Classify(failclass.Evidence{Code: code, Tail: w.tail.Text(), OOMKill: oom})
}
