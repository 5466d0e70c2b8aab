package launch

import "strconv"

// The node health pass (issue 31): before the first step and before every
// restart, one srun runs the shim's health mode (exec-task --health DIR) on
// each node of the step and its spares; each writes DIR/<node>.json.

// HealthCheck is one check's verdict on a node.
type HealthCheck struct {
	Name   string `json:"name"` // gpus, ib, space, script
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"` // what was seen, and on a failure why it fails
}

// HealthReport is what one node's health pass wrote.
type HealthReport struct {
	Node    string        `json:"node"`
	Checks  []HealthCheck `json:"checks"`
	Seconds float64       `json:"seconds"` // how long the node's checks took
}

// Failed are the report's failed checks.
func (h HealthReport) Failed() []HealthCheck {
	var out []HealthCheck
	for _, c := range h.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// HealthSpec is what the controller asks of every node's pass.
type HealthSpec struct {
	GPUs    int      // the GPUs the job holds per node (0: not checked)
	Space   []string // paths whose file system must have MinFree bytes free (the checkpoint store, /dev/shm)
	MinFree int64
	Script  string // the site's HealthCheck= script ("" none), run with Timeout
	Timeout string // a Go duration
	Sysfs   string // the sysfs root, "%n" the node's name ("" /sys): a test's fake InfiniBand ports
}

// Args is the spec as exec-task's flags, after --health DIR.
func (s HealthSpec) Args() []string {
	var a []string
	if s.GPUs > 0 {
		a = append(a, "--health-gpus", strconv.Itoa(s.GPUs))
	}
	for _, p := range s.Space {
		a = append(a, "--health-space", p)
	}
	if s.MinFree > 0 {
		a = append(a, "--health-min-free", strconv.FormatInt(s.MinFree, 10))
	}
	if s.Script != "" {
		a = append(a, "--health-script", s.Script)
	}
	if s.Timeout != "" {
		a = append(a, "--health-timeout", s.Timeout)
	}
	if s.Sysfs != "" {
		a = append(a, "--health-sysfs", s.Sysfs)
	}
	return a
}
