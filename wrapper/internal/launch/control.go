package launch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Kind is a message's first word.
type Kind string

// The messages.
const (
	Hello  Kind = "hello"  // shim → controller, first: TOKEN RANK PID NODE STEPID
	Signal Kind = "signal" // shim → controller: RANK NAME
	Exit   Kind = "exit"   // shim → controller: RANK CODE
	Ckpt   Kind = "ckpt"   // controller → shim: ID
)

// Msg is one line of the control channel. Which fields a kind carries is
// the table in the package doc.
type Msg struct {
	Kind   Kind
	Token  string // Hello: the job's token (from the launch files)
	Rank   int    // Hello, Signal, Exit
	PID    int    // Hello: the training process
	Node   string // Hello
	StepID string // Hello: SLURM_STEP_ID
	Signal string // Signal: TERM, USR1, ... (SignalName)
	Code   int    // Exit: the exit code, 128+n for signal n
	CkptID int    // Ckpt: one request; a shim acts once per ID
}

// Encode is the message's line, without the newline.
func (m Msg) Encode() string {
	switch m.Kind {
	case Hello:
		return strings.TrimRight(fmt.Sprintf("hello %s %d %d %s %s", m.Token, m.Rank, m.PID, m.Node, m.StepID), " ")
	case Signal:
		return fmt.Sprintf("signal %d %s", m.Rank, m.Signal)
	case Exit:
		return fmt.Sprintf("exit %d %d", m.Rank, m.Code)
	case Ckpt:
		return fmt.Sprintf("ckpt %d", m.CkptID)
	}
	return string(m.Kind)
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
	if len(f) < 2 {
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
	case Signal, Exit:
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
	case Ckpt:
		if len(f) != 2 {
			return Msg{}, fmt.Errorf("control line %q: want ckpt ID", clip(line))
		}
		if m.CkptID, err = strconv.Atoi(f[1]); err != nil || m.CkptID <= 0 {
			return Msg{}, fmt.Errorf("control line %q: request id %q is not a positive number", clip(line), f[1])
		}
	default:
		return Msg{}, fmt.Errorf("control line %q: unknown kind %q", clip(line), f[0])
	}
	return m, nil
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

// NewToken is a fresh secret for one run's hello lines.
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", errors.New("control channel: no randomness for the token: " + err.Error())
	}
	return hex.EncodeToString(b), nil
}
