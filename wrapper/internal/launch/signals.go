package launch

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

var signalNames = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
	"CONT": syscall.SIGCONT, "HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL, "URG": syscall.SIGURG,
}

// SignalByName accepts USR2, SIGUSR2 or a number; nil for anything else.
func SignalByName(s string) os.Signal {
	s = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	if sig, ok := signalNames[s]; ok {
		return sig
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n)
	}
	return nil
}

// SignalName is the name the control channel uses: TERM, USR2, ... or the
// number.
func SignalName(s os.Signal) string {
	for n, v := range signalNames {
		if v == s {
			return n
		}
	}
	if ss, ok := s.(syscall.Signal); ok {
		return strconv.Itoa(int(ss))
	}
	return s.String()
}

// StackSignal is the signal a shim sends for a stack dump
// (TRAINRUN_STACK_SIGNAL): its default action is to ignore, so a trainer
// without a handler is unharmed; the trainer client registers Python's
// faulthandler on it.
const StackSignal = "URG"
