package scale

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// Incarnations is how many runs of one job the history and the event log
// hold: a job requeued hourly for six weeks.
const Incarnations = 1000

// atSize is the rest of the table: the store's history and the job's event
// log after Incarnations incarnations of a 16,384-GPU job, and the planner
// for 100,000 GPUs.
func atSize(b *testing.B) []string {
	var out []string
	d := b.TempDir()
	if n, took, err := historyLoad(d); err != nil {
		b.Fatal(err)
	} else {
		out = append(out, fmt.Sprintf("history: %d incarnations (%.1f MiB) loaded in %.0f ms", Incarnations, float64(n)/(1<<20), ms(took.Nanoseconds())))
	}
	if n, took, err := report(d); err != nil {
		b.Fatal(err)
	} else {
		out = append(out, fmt.Sprintf("report: %d incarnations (%.1f MiB of events) read, built, written as table and SVG in %.0f ms", Incarnations, float64(n)/(1<<20), ms(took.Nanoseconds())))
	}
	took, evals, err := search(100000)
	if err != nil {
		b.Fatal(err)
	}
	out = append(out, fmt.Sprintf("plan: plan.Search, a 405B model on 100,000 H100s (CP allowed): %.0f ms, %s", ms(took.Nanoseconds()), evals))
	return out
}

// historyLoad writes a store's history of Incarnations incarnations
// (start, ckpt, end each, as the controller appends them) and times Load.
func historyLoad(dir string) (int64, time.Duration, error) {
	meta := filepath.Join(dir, "ckpt", ".trainrun")
	if err := os.MkdirAll(meta, 0o755); err != nil {
		return 0, 0, err
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := writeJSONL(filepath.Join(meta, "history.jsonl"), func(emit func(any)) {
		for i := 0; i < Incarnations; i++ {
			at := t0.Add(time.Duration(i) * time.Hour)
			tag := fmt.Sprintf("step-%d", i*1000)
			emit(checkpoint.Event{Time: at, Type: "start", JobID: "4242", Restart: i, Node: "n00000", WorldSize: 16384, ResumeFrom: tag})
			emit(checkpoint.Event{Time: at.Add(50 * time.Minute), Type: "ckpt", JobID: "4242", Restart: i, Tag: tag, CkptSeconds: 41, Why: "time-limit"})
			emit(checkpoint.Event{Time: at.Add(59 * time.Minute), Type: "end", JobID: "4242", Restart: i, Cause: checkpoint.CauseTimeLimit, LastCommitted: tag, Progress: int64(i * 1000)})
		}
	})
	if err != nil {
		return 0, 0, err
	}
	st, err := checkpoint.Open(filepath.Join(dir, "ckpt"))
	if err != nil {
		return 0, 0, err
	}
	t := time.Now()
	incs, err := st.History().Load()
	took := time.Since(t)
	if err == nil && len(incs) != Incarnations {
		err = fmt.Errorf("history: %d incarnations loaded, %d written", len(incs), Incarnations)
	}
	return n, took, err
}

// report writes a job directory's event log of Incarnations incarnations
// (start, progress every 5 minutes, a checkpoint request and commit, the
// interruption and the end) and times what trainrun report does with it.
func report(dir string) (int64, time.Duration, error) {
	job := filepath.Join(dir, "job")
	if err := os.MkdirAll(job, 0o755); err != nil {
		return 0, 0, err
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := writeJSONL(filepath.Join(job, obs.EventsFile), func(emit func(any)) {
		for i := 0; i < Incarnations; i++ {
			at := t0.Add(time.Duration(i) * time.Hour)
			ev := func(d time.Duration, e obs.Event) obs.Event {
				e.Time, e.JobID, e.Restart = at.Add(d), "4242", i
				return e
			}
			emit(ev(0, obs.Event{Kind: obs.KindStart, Start: &obs.Start{Partition: "gpu", Nodes: 2048, GPUs: 16384, GPUType: "h100",
				Layout: map[string]int{"tp": 8, "pp": 16, "dp": 128}, StepSeconds: 9.5}}))
			for m := 5; m < 50; m += 5 {
				emit(ev(time.Duration(m)*time.Minute, obs.Event{Kind: obs.KindProgress, Step: int64(i*1000 + m*20), Tokens: int64(i*1000+m*20) << 24}))
			}
			emit(ev(50*time.Minute, obs.Event{Kind: obs.KindInterrupt, Cause: obs.InterruptTimeLimit}))
			emit(ev(50*time.Minute, obs.Event{Kind: obs.KindCkptRequest, Why: obs.InterruptTimeLimit}))
			emit(ev(51*time.Minute, obs.Event{Kind: obs.KindCkptCommit, Ckpt: &obs.Ckpt{Tag: fmt.Sprintf("step-%d", i*1000+1000), Step: int64(i*1000 + 1000),
				Bytes: 5 << 40, Save: 40 * time.Second, Commit: 3 * time.Second}}))
			emit(ev(52*time.Minute, obs.Event{Kind: obs.KindEnd, Cause: obs.EndRequeued, Requeued: true}))
		}
	})
	if err != nil {
		return 0, 0, err
	}
	t := time.Now()
	evs, err := obs.ReadEvents(job)
	if err != nil {
		return 0, 0, err
	}
	rep := obs.BuildReport(evs)
	rep.WriteText(io.Discard)
	err = rep.WriteSVG(io.Discard)
	return n, time.Since(t), err
}

func writeJSONL(path string, gen func(emit func(any))) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	var eerr error
	gen(func(v any) {
		if err := enc.Encode(v); err != nil && eerr == nil {
			eerr = err
		}
	})
	if err := w.Flush(); err != nil && eerr == nil {
		eerr = err
	}
	if err := f.Close(); err != nil && eerr == nil {
		eerr = err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), eerr
}

// search times the planner's whole search for a 405B-class model (Llama
// 3.1 405B, 8K sequence, CP allowed) on gpus H100s.
func search(gpus int) (time.Duration, string, error) {
	g, err := plan.LookupGPU("h100-sxm")
	if err != nil {
		return 0, "", err
	}
	m := plan.Model{Name: "llama3.1-405b", Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, HeadDim: 128,
		FFN: 53248, FFNType: plan.FFNSwiGLU, Vocab: 128256}
	j := plan.Job{SeqLen: 8192, GlobalBatch: 5000, Precision: plan.BF16}
	t := time.Now()
	r := plan.Search(m, j, plan.ClusterOf(g, gpus), plan.SearchOptions{AllowCP: true})
	took := time.Since(t)
	if r.Plan == nil {
		return took, "", fmt.Errorf("plan: no layout for %d GPUs", gpus)
	}
	return took, fmt.Sprintf("chose TP%d PP%d DP%d CP%d", r.Plan.TP, r.Plan.PP, r.Plan.DP, r.Plan.CP), nil
}
