package obs

import (
	"encoding/json"
	"time"
)

// MarshalJSON is `trainrun report --format json`: the report's fields as
// before (their Go names, durations in nanoseconds: kept, scripts read
// them), plus "summary", the same facts in the one output convention
// (issue 30): snake_case keys, durations in seconds as numbers, times in
// RFC 3339 with their zone, the job id beside each incarnation.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report // without this method
	b, err := json.Marshal((*plain)(r))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	s, err := json.Marshal(r.summary())
	if err != nil {
		return nil, err
	}
	m["summary"] = s
	return json.Marshal(m)
}

type summaryIncarnation struct {
	JobID      string  `json:"job_id"`
	Restart    int     `json:"restart"`
	Start      string  `json:"start"`
	End        string  `json:"end,omitempty"` // absent: no end recorded
	Ended      string  `json:"ended"`         // how it ended, as the table says
	Cause      string  `json:"cause,omitempty"`
	Exit       int     `json:"exit"`
	ResumeFrom string  `json:"resume_from,omitempty"`
	LostS      float64 `json:"lost_s"`
	FirstStep  int64   `json:"first_step"`
	LastStep   int64   `json:"last_step"`
	GPUs       int     `json:"gpus"`
}

type reportSummary struct {
	JobID        string               `json:"job_id"`
	JobName      string               `json:"job_name,omitempty"`
	Partition    string               `json:"partition,omitempty"`
	Run          string               `json:"run,omitempty"`
	Sweep        string               `json:"sweep,omitempty"`
	Container    string               `json:"container_image,omitempty"`
	Runtime      string               `json:"container_runtime,omitempty"`
	First        string               `json:"first"`
	Last         string               `json:"last"`
	Incarnations []summaryIncarnation `json:"incarnations"`
	RunningS     float64              `json:"running_s"`
	WaitingS     float64              `json:"waiting_s"`
	LostS        float64              `json:"lost_s"`
	SavingS      float64              `json:"saving_s"`
	CommittingS  float64              `json:"committing_s"`
	FinalStep    int64                `json:"final_step"`
	Checkpoints  int                  `json:"checkpoints"`
	Goodput      Goodput              `json:"goodput"`
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

func (r *Report) summary() reportSummary {
	t := r.Totals()
	s := reportSummary{JobID: r.JobID, JobName: r.JobName, Partition: r.Partition, Run: r.Run, Sweep: r.Sweep,
		First: rfc3339(r.First), Last: rfc3339(r.Last), Incarnations: []summaryIncarnation{},
		RunningS: t.Running.Seconds(), WaitingS: t.Waiting.Seconds(), LostS: t.Lost.Seconds(), SavingS: t.Saving.Seconds(),
		CommittingS: t.Committing.Seconds(), FinalStep: t.FinalStep, Checkpoints: len(r.Checkpoints), Goodput: r.Goodput}
	if r.Start != nil {
		s.Container, s.Runtime = r.Start.ContainerImage, r.Start.ContainerRuntime
	}
	for _, in := range r.Incarnations {
		s.Incarnations = append(s.Incarnations, summaryIncarnation{JobID: r.JobID, Restart: in.Restart, Start: rfc3339(in.Start), End: rfc3339(in.End),
			Ended: in.EndText(), Cause: in.Cause, Exit: in.Exit, ResumeFrom: in.ResumeFrom, LostS: in.Lost.Seconds(),
			FirstStep: in.FirstStep, LastStep: in.LastStep, GPUs: in.GPUs})
	}
	return s
}
