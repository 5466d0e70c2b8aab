// Package failclass names the cause of a failed training rank (issue 31):
// oom, nccl, hardware, user, signal or unknown, from its exit status, the
// last lines it wrote to stderr and what the node's kernel said (a cgroup
// OOM kill). It is pure and lean: the per-task shim classifies its own
// rank's end before it reports the exit, and the controller combines the
// ranks' classes into the step's (Step) and acts on the policy's RestartOn
// (ParsePolicy).
package failclass

import (
	"fmt"
	"slices"
	"strings"
)

// Class is a failure's cause.
type Class string

// The classes, in the order of their precedence when one rank's evidence
// names several (a hardware fault explains the OOM or NCCL error it causes;
// an OOM explains the NCCL error of its peers).
const (
	Hardware Class = "hardware" // XID, ECC, a GPU fallen off the bus, a lost node
	OOM      Class = "oom"      // CUDA out of memory, or the host's OOM killer
	NCCL     Class = "nccl"     // the collective library: watchdog timeout, NCCL/gloo error, a peer gone
	User     Class = "user"     // the trainer's own error: a Python exception, command not found, bad arguments
	Signal   Class = "signal"   // killed by a signal from outside, with no other evidence
	Unknown  Class = "unknown"  // a non-zero exit with no evidence
)

// Classes are every class, in precedence order.
var Classes = []Class{Hardware, OOM, NCCL, User, Signal, Unknown}

// Valid says whether c is one of Classes.
func Valid(c Class) bool { return slices.Contains(Classes, c) }

// Evidence is what one rank's end tells.
type Evidence struct {
	Code    int      // the exit code, 128+n for signal n
	Tail    []string // the rank's last lines of stderr, oldest first
	OOMKill bool     // the rank's cgroup counted an OOM kill during its run
}

// Result is a rank's (or the step's) class and the line that says so.
type Result struct {
	Class    Class
	Evidence string // the deciding line or fact, at most MaxEvidence bytes, one line
	// Echo: the evidence only says that a peer went away (gloo's
	// "Connection closed by peer"): the rank failed because another did,
	// which says nothing of its own node.
	Echo bool
}

// MaxEvidence bounds Result.Evidence.
const MaxEvidence = 240

// pattern is a substring (matched case-insensitively when fold) naming a class.
type pattern struct {
	class Class
	text  string
	fold  bool
}

// patterns are the messages of real failures (PyTorch 2.x, NCCL 2.x, gloo,
// the NVIDIA driver's kernel log, CPython, bash), most specific first
// within a class.
var patterns = []pattern{
	{Hardware, "NVRM: Xid", false},
	{Hardware, "Xid (PCI:", false},
	{Hardware, "uncorrectable ECC error", true},
	{Hardware, "cudaErrorECCUncorrectable", false},
	{Hardware, "ECC error encountered", true},
	{Hardware, "fallen off the bus", true},
	{Hardware, "GPU is lost", true},
	{Hardware, "unrecoverable GPU", true},
	{Hardware, "NVLink error", true},
	{Hardware, "row remapping failure", true},
	{OOM, "OutOfMemoryError", false},
	{OOM, "CUDA out of memory", true},
	{OOM, "CUDA error: out of memory", true},
	{OOM, "CUBLAS_STATUS_ALLOC_FAILED", false},
	{OOM, "cudaErrorMemoryAllocation", false},
	{OOM, "HIP out of memory", true},
	{OOM, "MemoryError", false},
	{OOM, "Out of memory: Killed process", true},
	{OOM, "oom-kill", true},
	{OOM, "Cannot allocate memory", true},
	{NCCL, "Watchdog caught collective operation timeout", true},
	{NCCL, "NCCL error", true},
	{NCCL, "ncclSystemError", false},
	{NCCL, "ncclInternalError", false},
	{NCCL, "ncclRemoteError", false},
	{NCCL, "ncclUnhandledCudaError", false},
	{NCCL, "unhandled system error", true},
	{NCCL, "NCCL communicator was aborted", true},
	{NCCL, "ProcessGroupNCCL", false},
	{NCCL, "DistBackendError", false},
	// The process group's set-up and its peers (the rendezvous, the
	// TCPStore, gloo's sockets): a communication failure, but one that
	// says nothing of this rank's node (an echo: a peer went away, the
	// rendezvous port was taken, the master was not reachable yet).
	{NCCL, echoPrefix + "DistNetworkError", false},
	{NCCL, echoPrefix + "DistStoreError", false},
	{NCCL, echoPrefix + "gloo/transport", false},
	{NCCL, echoPrefix + "Connection closed by peer", true},
	{NCCL, echoPrefix + "Connection reset by peer", true},
	{NCCL, echoPrefix + "Connection refused", true},
	{NCCL, echoPrefix + "server socket has failed to listen", true},
	{NCCL, echoPrefix + "Address already in use", true},
	{NCCL, echoPrefix + "TCPStore", false},
	{NCCL, echoPrefix + "Socket Timeout", true},
	{NCCL, echoPrefix + "Rendezvous", false},
	{NCCL, echoPrefix + "torch/distributed/", false},
	{User, "command not found", true},
	{User, "No such file or directory", true},
	{User, "error: unrecognized arguments", true},
	{User, "error: the following arguments are required", true},
	{User, "Traceback (most recent call last)", false},
}

// notUser are the exceptions that end a Python traceback but are not the
// trainer's own bug, so they must not stop the job: an interrupt is a
// signal; a failing file system, a transport gone and a GPU fault Python
// only sees as a CUDA error restart (class unknown), where the failure
// budget still ends a loop.
var notUser = []pattern{
	{Signal, "KeyboardInterrupt", false},
	{Unknown, "Input/output error", true},
	{Unknown, "Stale file handle", true},
	{Unknown, "Remote I/O error", true},
	{Unknown, "Transport endpoint is not connected", true},
	{Unknown, "No space left on device", true},
	{Unknown, "Disk quota exceeded", true},
	{Unknown, "CUDA error: an illegal memory access", true},
	{Unknown, "CUDA error: unspecified launch failure", true},
	{Unknown, "CUDA error: misaligned address", true},
	{Unknown, "CUDA-capable device(s) is/are busy or unavailable", true},
	{Unknown, "CUDA error: no CUDA-capable device is detected", true},
}

// notUserLine is the last line of tail one of notUser names, and its class.
func notUserLine(tail []string) (Class, string) {
	for i := len(tail) - 1; i >= 0; i-- {
		lower := strings.ToLower(tail[i])
		for _, p := range notUser {
			if p.fold && strings.Contains(lower, strings.ToLower(p.text)) || !p.fold && strings.Contains(tail[i], p.text) {
				return p.class, tail[i]
			}
		}
	}
	return "", ""
}

// echoPrefix marks a pattern whose line is an echo (Result.Echo).
const echoPrefix = "\x00echo:"

// Classify names one rank's failure. A zero exit is no failure (Class "").
// The tail's evidence wins over the exit status (an OOM ends Python with
// exit 1, a watchdog with SIGABRT); among the tail's, the class of highest
// precedence (Classes' order), its first line (a watchdog's timeout before
// the abort it causes; for a Python exception, the traceback's last line).
// An OOM kill counted by the cgroup outranks a collective's error; an
// exception that is not the trainer's bug (notUser: an I/O error, an
// interrupt, a CUDA fault) outranks a traceback's user class. Without
// evidence: exit 127 or 126 is user (not found, not executable), 128+n is
// signal, anything else unknown.
func Classify(e Evidence) Result {
	if e.Code == 0 {
		return Result{}
	}
	best, line, echo := Class(""), "", false
	for _, l := range e.Tail {
		c, ec := lineClass(l)
		if c == "" {
			continue
		}
		if best == "" || rank(c) < rank(best) || c == best && (echo && !ec || echo == ec && isFrame(line) && !isFrame(l)) {
			best, line, echo = c, l, ec
		}
	}
	switch {
	case best == OOM || best == Hardware:
		return Result{Class: best, Evidence: clip(line)}
	case e.OOMKill: // the peers' collective errors it caused may be in the tail
		return Result{Class: OOM, Evidence: fmt.Sprintf("exit %d; the node's kernel counted an OOM kill in the rank's cgroup (memory.events oom_kill)", e.Code)}
	case best == NCCL:
		return Result{best, clip(line), echo}
	}
	if c, l := notUserLine(e.Tail); c != "" {
		return Result{Class: c, Evidence: clip(l)}
	}
	switch {
	case best == User:
		if l := lastException(e.Tail); l != "" {
			line = l
		}
		return Result{Class: User, Evidence: clip(line)}
	case e.Code == 127 || e.Code == 126:
		return Result{Class: User, Evidence: fmt.Sprintf("exit %d: the command was not found or not executable", e.Code)}
	case e.Code > 128 && e.Code < 128+65:
		return Result{Class: Signal, Evidence: fmt.Sprintf("exit %d: killed by signal %d", e.Code, e.Code-128)}
	}
	return Result{Class: Unknown, Evidence: fmt.Sprintf("exit %d with no evidence in the rank's last output", e.Code)}
}

func rank(c Class) int { return slices.Index(Classes, c) }

// isFrame says whether l is a traceback's frame line (`File "...", line
// N, in f`): weaker evidence than the exception it leads to.
func isFrame(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), `File "`) }

// lineClass is the class one line names ("" none), the highest first, and
// whether the line is only an echo of a peer's failure.
func lineClass(l string) (Class, bool) {
	lower := ""
	best, echo := Class(""), false
	for _, p := range patterns {
		if best != "" && (rank(p.class) > rank(best) || rank(p.class) == rank(best) && !echo) {
			continue
		}
		text, isEcho := strings.CutPrefix(p.text, echoPrefix)
		hit := false
		if p.fold {
			if lower == "" {
				lower = strings.ToLower(l)
			}
			hit = strings.Contains(lower, strings.ToLower(text))
		} else {
			hit = strings.Contains(l, text)
		}
		if hit && (best == "" || rank(p.class) < rank(best) || echo && !isEcho) {
			best, echo = p.class, isEcho
		}
	}
	return best, echo
}

// lastException is a Python traceback's last line, "ValueError: ..." (the
// exception), or "".
func lastException(tail []string) string {
	for i := len(tail) - 1; i >= 0; i-- {
		l := strings.TrimSpace(tail[i])
		name, _, ok := strings.Cut(l, ":")
		if !ok {
			name = l
		}
		if name != "" && !strings.ContainsAny(name, " \t()[]/'\"") && (strings.HasSuffix(name, "Error") || strings.HasSuffix(name, "Exception") ||
			strings.HasSuffix(name, "Exit") || strings.HasSuffix(name, "Interrupt")) {
			return l
		}
	}
	return ""
}

// clip makes s one line of at most MaxEvidence bytes (cut at a rune).
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= MaxEvidence {
		return s
	}
	cut := MaxEvidence - 3
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}

// Rank is one rank's result in a step.
type Rank struct {
	Rank int
	Result
}

// Step is the step's class: the first failing rank's (the root cause; its
// peers' NCCL errors and signals are echoes), unless the first's is an echo
// (a peer went away: the earliest of the others (in their order) with a
// cause of its own is taken), or another rank names a hardware fault or an
// OOM while the first names nccl, signal or unknown: a rank's OOM or XID
// makes a peer's collective fail first. A lost node is hardware whatever
// the ranks said. who is the deciding rank (-1: none, or the lost node).
func Step(first *Rank, others []Rank, lostNode string) (Result, int) {
	if lostNode != "" {
		return Result{Class: Hardware, Evidence: "node " + lostNode + " was lost"}, -1
	}
	if first == nil {
		return Result{}, -1
	}
	res, who := first.Result, first.Rank
	if res.Class == "" {
		res = Result{Class: Unknown, Evidence: "no class reported"}
	}
	// An echo (a peer went away) yields to the first rank with a cause of
	// its own: the one killed, the one that failed by itself.
	if res.Echo {
		for _, o := range others {
			if o.Class != "" && !o.Echo {
				res, who = o.Result, o.Rank
				break
			}
		}
	}
	if res.Class == NCCL || res.Class == Signal || res.Class == Unknown {
		for _, o := range others {
			if (o.Class == Hardware || o.Class == OOM) && (rank(o.Class) < rank(res.Class) || res.Class != Hardware && res.Class != OOM) {
				res, who = o.Result, o.Rank
			}
		}
	}
	return res, who
}

// FromWire is a rank's result as its exit message carries it (the class
// and the evidence line; the echo flag is the line's).
func FromWire(class, evidence string) Result {
	r := Result{Class: Class(class), Evidence: evidence}
	if r.Class == NCCL {
		c, echo := lineClass(evidence)
		r.Echo = c == NCCL && echo
	}
	if r.Class != "" && !Valid(r.Class) {
		r = Result{Class: Unknown, Evidence: "class " + clip(class) + " from the shim: " + evidence}
	}
	return r
}
