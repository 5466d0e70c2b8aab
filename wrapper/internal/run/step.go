package run

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// The one srun start and the one control channel opener, for the step that
// starts before the plan (early.go) and the one that starts after it
// (prepare.go, monitor.go).

// startSrun starts srun (argv as launch.SrunCommand makes it, env added to
// this process's environment) in its own process group, its output ours;
// done gets its end (one value).
func (r *runner) startSrun(argv, env []string, done chan<- error) (*os.Process, error) {
	cmd := slurm.StepCommand(argv[1:])
	cmd.Env = append(stepEnviron(os.Environ()), env...)
	cmd.Stdout, cmd.Stderr = r.env.Stdout, r.env.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, withCode(exitcode.Slurm, fmt.Errorf("starting srun: %w", err))
	}
	go func() { done <- cmd.Wait() }()
	return cmd.Process, nil
}

// openControl listens for the shims on the batch node's address (addrs:
// Slurm's NodeAddr of each node), accepting only the allocation's nodes and
// this uid; control is the address the launch files give the shims.
func (r *runner) openControl(addrs map[string]string) (ctl *launch.Server, control string, err error) {
	a := r.alloc
	bind, ctlHost := launch.ControlHost(r.controlHost(addrs), len(a.Nodes) > 1)
	if bind == "" {
		r.logf("warning: the batch node's address %s is not one of its own non-loopback addresses; the control channel listens on all interfaces", ctlHost)
	}
	if ctl, err = launch.ListenPeers(bind, a.World(), launch.NodePeers(a.Nodes, addrs, os.Getuid())); err != nil {
		return nil, "", err
	}
	if w := ctl.Weaker(); w != "" {
		r.logf("warning: %s", w)
	}
	return ctl, net.JoinHostPort(ctlHost, strconv.Itoa(ctl.Port())), nil
}
