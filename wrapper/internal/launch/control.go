package launch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is a message's first word.
type Kind string

// The messages.
const (
	Hello  Kind = "hello"  // shim → controller, first: TOKEN RANK PID NODE STEPID
	Signal Kind = "signal" // shim → controller: RANK NAME
	Exit   Kind = "exit"   // shim → controller: RANK CODE [CLASS EVIDENCE...] (the failure's class, internal/failclass)
	Ckpt   Kind = "ckpt"   // controller → shim: ID
	Beat   Kind = "beat"   // shim → controller: RANK STEP AGE_MS STEP_MS STATE PHASE (liveness, about one per BeatInterval)
	Stack  Kind = "stack"  // controller → shim: ID (ask the training process for a stack dump)
	// Delivered: the checkpoint signal of request ID reached the training
	// process (the shim holds it until the process catches it).
	Delivered Kind = "delivered" // shim → controller: RANK ID
	// A step started before its plan (the controller plans while Slurm
	// starts the tasks): each shim first says wait, and starts its rank only
	// on go.
	Wait   Kind = "wait"   // shim → controller, first: TOKEN RANK NODE STEPID
	Probe  Kind = "probe"  // controller → waiting shim: probe your node (the first to wait on it)
	Probed Kind = "probed" // shim → controller: RANK (its node's facts are written)
	Go     Kind = "go"     // controller → shim: the launch files are complete; start the rank
	Abort  Kind = "abort"  // controller → shim: the step will not run; exit 0 without starting
)

// Msg is one line of the control channel. Which fields a kind carries is
// the table in the package doc.
type Msg struct {
	Kind   Kind
	Token  string // Hello, Wait: the job's token (from the launch files)
	Rank   int    // Hello, Wait, Probed, Signal, Exit
	PID    int    // Hello: the training process
	Node   string // Hello, Wait
	StepID string // Hello, Wait: SLURM_STEP_ID
	Signal string // Signal: TERM, USR1, ... (SignalName)
	Code   int    // Exit: the exit code, 128+n for signal n
	CkptID int    // Ckpt, Stack, Delivered: one request; a shim acts once per ID
	Step   int64  // Beat: the last step the trainer reported (-1: none yet)
	AgeMS  int64  // Beat: milliseconds since the step last advanced (since the trainer started when none)
	StepMS int64  // Beat: the trainer's recent step time in milliseconds (0: unknown)
	State  string // Beat: the process state from /proc/PID/stat (R S D T t Z X), "-" unknown
	Phase  string // Beat: PhaseTrain, or PhaseSave while the trainer writes a checkpoint
	// Exit of a failed rank: its class (internal/failclass) and the line
	// that says so (one line, whitespace collapsed; optional: older shims).
	Class    string
	Evidence string
}

// The phases of a beat.
const (
	PhaseTrain = "train"
	PhaseSave  = "save"
)

// Encode is the message's line, without the newline.
func (m Msg) Encode() string {
	switch m.Kind {
	case Hello:
		return strings.TrimRight(fmt.Sprintf("hello %s %d %d %s %s", m.Token, m.Rank, m.PID, m.Node, m.StepID), " ")
	case Signal:
		return fmt.Sprintf("signal %d %s", m.Rank, m.Signal)
	case Exit:
		if m.Class != "" {
			return strings.TrimRight(fmt.Sprintf("exit %d %d %s %s", m.Rank, m.Code, strings.Join(strings.Fields(m.Class), "-"), evidenceText(m.Evidence)), " ")
		}
		return fmt.Sprintf("exit %d %d", m.Rank, m.Code)
	case Ckpt:
		return fmt.Sprintf("ckpt %d", m.CkptID)
	case Stack:
		return fmt.Sprintf("stack %d", m.CkptID)
	case Beat:
		return fmt.Sprintf("beat %d %d %d %d %s %s", m.Rank, m.Step, m.AgeMS, m.StepMS, cmpOr(m.State, "-"), cmpOr(m.Phase, PhaseTrain))
	case Wait:
		return fmt.Sprintf("wait %s %d %s %s", m.Token, m.Rank, cmpOr(m.Node, "-"), cmpOr(m.StepID, "-"))
	case Probed:
		return fmt.Sprintf("probed %d", m.Rank)
	case Delivered:
		return fmt.Sprintf("delivered %d %d", m.Rank, m.CkptID)
	}
	return string(m.Kind)
}

// maxEvidence bounds an exit's evidence on the line.
const maxEvidence = 1024

// evidenceText is an exit's evidence as the line carries it: one line,
// whitespace collapsed, at most maxEvidence bytes.
func evidenceText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxEvidence {
		s = strings.TrimSpace(s[:maxEvidence])
	}
	return s
}

// MaxLine bounds a line: the longest real one is a hello of about 100 bytes.
const MaxLine = 4096

// Parse reads one line. A hello's PID, node and step are optional (older
// shims, or a task outside a step); every other field is required.
func Parse(line string) (Msg, error) {
	if len(line) > MaxLine {
		return Msg{}, fmt.Errorf("control line of %d bytes (at most %d)", len(line), MaxLine)
	}
	f := strings.Fields(line)
	if len(f) == 1 && (f[0] == string(Go) || f[0] == string(Abort) || f[0] == string(Probe)) {
		return Msg{Kind: Kind(f[0])}, nil
	}
	if len(f) < 2 {
		//lint:ignore ST1005 the "..." is grammar (more arguments), not punctuation
		return Msg{}, fmt.Errorf("control line %q: want KIND ARGS...", clip(line))
	}
	m := Msg{Kind: Kind(f[0])}
	var err error
	switch m.Kind {
	case Hello:
		if len(f) < 3 {
			return Msg{}, fmt.Errorf("control line %q: want hello TOKEN RANK [PID NODE STEPID]", clip(line))
		}
		m.Token = f[1]
		if m.Rank, err = rankOf(f[2]); err != nil {
			return Msg{}, err
		}
		if len(f) > 3 {
			m.PID, _ = strconv.Atoi(f[3])
		}
		if len(f) > 4 {
			m.Node = f[4]
		}
		if len(f) > 5 {
			m.StepID = f[5]
		}
	case Probed:
		if len(f) != 2 {
			return Msg{}, fmt.Errorf("control line %q: want probed RANK", clip(line))
		}
		if m.Rank, err = rankOf(f[1]); err != nil {
			return Msg{}, err
		}
	case Delivered:
		if len(f) != 3 {
			return Msg{}, fmt.Errorf("control line %q: want delivered RANK ID", clip(line))
		}
		if m.Rank, err = rankOf(f[1]); err != nil {
			return Msg{}, err
		}
		if m.CkptID, err = strconv.Atoi(f[2]); err != nil || m.CkptID <= 0 {
			return Msg{}, fmt.Errorf("control line %q: request id %q is not a positive number", clip(line), f[2])
		}
	case Signal, Exit:
		if m.Kind == Exit && len(f) > 3 {
			m.Class, m.Evidence = f[3], evidenceText(strings.Join(f[4:], " "))
			f = f[:3]
		}
		if len(f) != 3 {
			return Msg{}, fmt.Errorf("control line %q: want %s RANK ARG", clip(line), m.Kind)
		}
		if m.Rank, err = rankOf(f[1]); err != nil {
			return Msg{}, err
		}
		if m.Kind == Signal {
			m.Signal = f[2]
		} else if m.Code, err = strconv.Atoi(f[2]); err != nil {
			return Msg{}, fmt.Errorf("control line %q: exit code %q is not a number", clip(line), f[2])
		}
	case Ckpt, Stack:
		if len(f) != 2 {
			return Msg{}, fmt.Errorf("control line %q: want %s ID", clip(line), m.Kind)
		}
		if m.CkptID, err = strconv.Atoi(f[1]); err != nil || m.CkptID <= 0 {
			return Msg{}, fmt.Errorf("control line %q: request id %q is not a positive number", clip(line), f[1])
		}
	case Beat:
		return parseBeat(line, f)
	case Wait:
		return parseWait(line, f)
	default:
		return Msg{}, fmt.Errorf("control line %q: unknown kind %q", clip(line), f[0])
	}
	return m, nil
}

// parseBeat reads "beat RANK STEP AGE_MS STEP_MS STATE PHASE".
func parseBeat(line string, f []string) (Msg, error) {
	if len(f) != 7 {
		return Msg{}, fmt.Errorf("control line %q: want beat RANK STEP AGE_MS STEP_MS STATE PHASE", clip(line))
	}
	m := Msg{Kind: Beat, State: f[5], Phase: f[6]}
	if m.Phase != PhaseTrain && m.Phase != PhaseSave {
		return Msg{}, fmt.Errorf("control line %q: phase %q is not %s or %s", clip(line), m.Phase, PhaseTrain, PhaseSave)
	}
	var err error
	if m.Rank, err = rankOf(f[1]); err != nil {
		return Msg{}, err
	}
	for i, p := range []*int64{&m.Step, &m.AgeMS, &m.StepMS} {
		v, err := strconv.ParseInt(f[2+i], 10, 64)
		if err != nil || v < -1 || i > 0 && v < 0 {
			return Msg{}, fmt.Errorf("control line %q: %q is not a step or a duration in ms", clip(line), f[2+i])
		}
		*p = v
	}
	if len(m.State) != 1 && m.State != "-" {
		return Msg{}, fmt.Errorf("control line %q: process state %q is not one letter", clip(line), m.State)
	}
	return m, nil
}

// parseWait reads "wait TOKEN RANK NODE STEPID" ("-" for an unknown node or step).
func parseWait(line string, f []string) (Msg, error) {
	if len(f) != 5 {
		return Msg{}, fmt.Errorf("control line %q: want wait TOKEN RANK NODE STEPID", clip(line))
	}
	m := Msg{Kind: Wait, Token: f[1], Node: f[3], StepID: f[4]}
	var err error
	if m.Rank, err = rankOf(f[2]); err != nil {
		return Msg{}, err
	}
	if m.Node == "-" {
		m.Node = ""
	}
	if m.StepID == "-" {
		m.StepID = ""
	}
	return m, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func rankOf(s string) (int, error) {
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 {
		return 0, fmt.Errorf("rank %q is not a number >= 0", s)
	}
	return r, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// BeatInterval is how often a shim sends a beat in a step of world ranks:
// the controller receives at most about 1000 beats a second whatever the
// size of the job (16,384 ranks: one beat per rank every 16.4 s, about 50
// KB/s), and at least one every 2 s per rank in small jobs. A state change
// (stopped, uninterruptible, exited) is sent at once; those are rare.
func BeatInterval(world int) time.Duration {
	return min(max(time.Duration(world)*time.Millisecond, 2*time.Second), 30*time.Second)
}

// NewToken is a fresh secret for one run's hello lines.
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", errors.New("control channel: no randomness for the token: " + err.Error())
	}
	return hex.EncodeToString(b), nil
}
