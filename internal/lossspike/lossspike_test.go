package lossspike

import (
	"math"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for in, want := range map[string]string{"off": "off", "nan": "nan", Default: "mad:6:window=50", "mad:4.5:window=20:metric=lm_loss": "mad:4.5:window=20"} {
		r, err := ParseRule(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRule(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	if r, _ := ParseRule("mad:3:metric=lm_loss"); r.Metric != "lm_loss" {
		t.Errorf("metric = %q", r.Metric)
	}
	for _, bad := range []string{"", "mad", "mad:0", "mad:x", "mad:6:window=3", "mad:6:win=50", "median:6", "off:1"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q): no error", bad)
		}
	}
}

func TestDetector(t *testing.T) {
	r, _ := ParseRule("mad:6:window=20")
	d := New(r)
	// A falling, noisy loss is never a spike.
	for s := int64(1); s <= 30; s++ {
		v := 3.0/float64(s) + 0.01*float64(s%3)
		if sp, bad := d.Observe(s, v); bad {
			t.Fatalf("step %d loss %g judged %v", s, v, sp)
		}
	}
	sp, bad := d.Observe(31, 5)
	if !bad || sp.Kind != "spike" || sp.LastGood != 30 || !(sp.Threshold < 5) || !strings.Contains(sp.String(), "is a spike") {
		t.Fatalf("a jump to 5 = %+v, %v", sp, bad)
	}
	// The spike stayed out of the window: the next normal value is fine.
	if sp, bad := d.Observe(32, 0.1); bad {
		t.Errorf("after the spike: %v", sp)
	}
	if sp, bad := d.Observe(33, math.NaN()); !bad || sp.Kind != "nan" || sp.LastGood != 32 {
		t.Errorf("NaN = %+v, %v", sp, bad)
	}
	if sp, bad := d.Observe(34, math.Inf(1)); !bad || sp.Kind != "inf" {
		t.Errorf("Inf = %+v, %v", sp, bad)
	}
	// Too few values yet: only NaN counts.
	n, _ := ParseRule("nan")
	d = New(n)
	if _, bad := d.Observe(1, 1e9); bad {
		t.Error("nan rule judged a finite value")
	}
	if _, bad := New(Rule{Off: true}).Observe(1, math.NaN()); bad {
		t.Error("off judged")
	}
}

func TestParseAction(t *testing.T) {
	for in, want := range map[string]string{"report": "report", "stop": "stop", "rollback": "rollback:3", "rollback:1": "rollback:1"} {
		a, err := ParseAction(in)
		if err != nil || a.String() != want {
			t.Errorf("ParseAction(%q) = %v, %v", in, a, err)
		}
	}
	for _, bad := range []string{"", "rollback:0", "rollback:x", "stop:2", "restart"} {
		if _, err := ParseAction(bad); err == nil {
			t.Errorf("ParseAction(%q): no error", bad)
		}
	}
}

func TestSteps(t *testing.T) {
	s, err := ParseSteps("120-121, 57-63,64,200")
	if err != nil || s.String() != "57-64,120-121,200" {
		t.Fatalf("ParseSteps = %v, %v", s, err)
	}
	if !s.Contains(57) || !s.Contains(64) || s.Contains(65) || s.Contains(56) || !s.Contains(200) {
		t.Errorf("Contains wrong for %v", s)
	}
	if got := s.Add(50, 58).String(); got != "50-64,120-121,200" {
		t.Errorf("Add = %s", got)
	}
	if e, _ := ParseSteps(""); len(e) != 0 {
		t.Errorf("empty = %v", e)
	}
	for _, bad := range []string{"0", "5-3", "a-b", "-4"} {
		if _, err := ParseSteps(bad); err == nil {
			t.Errorf("ParseSteps(%q): no error", bad)
		}
	}
}
