package obs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadHangsAndText(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"10", "2", "notes"} {
		os.MkdirAll(filepath.Join(dir, "hangs", n), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "hangs", "2", "summary.txt"), []byte("hang 2: rank 1 stopped\n\nrank 1 did not enter collective #9\n"), 0o644)
	hs := ReadHangs(dir)
	if len(hs) != 2 || hs[0].N != 2 || hs[1].N != 10 || len(hs[0].Summary) != 2 || hs[0].Files != 1 {
		t.Fatalf("ReadHangs = %+v", hs)
	}
	var w bytes.Buffer
	(&Report{Hangs: hs}).writeHangs(&w)
	for _, s := range []string{"hangs: 2, evidence kept", filepath.Join(dir, "hangs", "2"), "rank 1 did not enter collective #9", "no summary.txt"} {
		if !strings.Contains(w.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, w.String())
		}
	}
	if ReadHangs(t.TempDir()) != nil {
		t.Error("a run without hangs/ lists hangs")
	}
}

func TestReportLossSpikes(t *testing.T) {
	at := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	r := BuildReport([]Event{{Kind: KindStart, Time: at}, {Kind: KindLossSpike, Time: at.Add(time.Minute), Step: 57, Cause: "nan", Message: "loss NaN at step 57"}})
	if len(r.LossSpikes) != 1 || r.LossSpikes[0].Step != 57 || r.LossSpikes[0].Kind != "nan" {
		t.Fatalf("LossSpikes = %+v", r.LossSpikes)
	}
	var w bytes.Buffer
	r.WriteText(&w)
	if !strings.Contains(w.String(), "loss spikes: 1") || !strings.Contains(w.String(), "loss NaN at step 57") {
		t.Errorf("report:\n%s", w.String())
	}
}

func TestLossSpikeWebhook(t *testing.T) {
	if name, ok := webhookEvent(Event{Kind: KindLossSpike, Cause: "nan"}); !ok || name != "loss-spike" {
		t.Errorf("webhookEvent(loss-spike) = %q, %v", name, ok)
	}
}

func TestReadHangsFlightRecorder(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "hangs", "1"), 0o755)
	os.WriteFile(filepath.Join(dir, "hangs", "nccl_trace_rank_3"), []byte("x"), 0o644)
	hs := ReadHangs(dir)
	if len(hs) != 2 || hs[1].N != 0 || !strings.Contains(hs[1].Summary[0], "nccl_trace_rank_3") {
		t.Fatalf("ReadHangs = %+v", hs)
	}
	var w bytes.Buffer
	(&Report{Hangs: hs}).writeHangs(&w)
	if !strings.Contains(w.String(), "hangs: 1,") || !strings.Contains(w.String(), "flight recorder dumps") {
		t.Errorf("text:\n%s", w.String())
	}
}
