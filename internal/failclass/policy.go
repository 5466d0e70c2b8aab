package failclass

import (
	"fmt"
	"slices"
	"strings"
)

// Action is what the controller does with a failed step of a class.
type Action string

// The actions of RestartOn=.
const (
	Restart Action = "restart" // restart the step (inside the job, else requeue), as any failure
	Exclude Action = "exclude" // restart, and keep the failing rank's node out (a spare takes its place)
	Stop    Action = "stop"    // stop at once: no restart, no requeue (the same error would recur)
)

// DefaultPolicy is RestartOn='s default: what a hardware fault or a
// collective's failure points at is the node, so it is left; an OOM or the
// trainer's own error recurs on any node from the same checkpoint, so
// restarting spends the failure budget for nothing; a signal from outside
// (a kill, the chaos monkey) and a failure without evidence restart.
const DefaultPolicy = "hardware=exclude,oom=stop,nccl=exclude,user=stop,signal=restart,unknown=restart"

// Policy maps each class to its action.
type Policy map[Class]Action

// ParsePolicy reads RestartOn=: comma-separated CLASS=ACTION pairs over
// DefaultPolicy (a class not named keeps its default). An unknown class or
// action is an error naming it and the choices.
func ParsePolicy(s string) (Policy, error) {
	p := Policy{}
	for _, src := range []string{DefaultPolicy, s} {
		for _, item := range strings.Split(src, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			k, v, ok := strings.Cut(item, "=")
			c, a := Class(strings.ToLower(strings.TrimSpace(k))), Action(strings.ToLower(strings.TrimSpace(v)))
			if !ok || !Valid(c) {
				return nil, fmt.Errorf("RestartOn item %q: want CLASS=ACTION with CLASS one of %s", item, classList())
			}
			if !slices.Contains([]Action{Restart, Exclude, Stop}, a) {
				return nil, fmt.Errorf("RestartOn item %q: action %q is not restart, exclude or stop", item, v)
			}
			p[c] = a
		}
	}
	return p, nil
}

// Of is the class's action (Restart for "" or a class the policy lacks).
func (p Policy) Of(c Class) Action {
	if a, ok := p[c]; ok {
		return a
	}
	return Restart
}

// String is the policy in Classes' order, as ParsePolicy reads it.
func (p Policy) String() string {
	var out []string
	for _, c := range Classes {
		out = append(out, string(c)+"="+string(p.Of(c)))
	}
	return strings.Join(out, ",")
}

func classList() string {
	s := make([]string, len(Classes))
	for i, c := range Classes {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}
