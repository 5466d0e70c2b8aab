package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Renderers turn a plan into what people and programs read. They are pure:
// they write to the io.Writer they are given and read nothing else.

// jsonPlan is the contract's "plan" object (PRODUCT.md, `trainrun plan`):
// exactly its keys, in its order. Evaluation carries more (Traffic, for
// placement); that stays out of the contract.
type jsonPlan struct {
	TP                 int        `json:"tp"`
	PP                 int        `json:"pp"`
	VPP                int        `json:"vpp"`
	CP                 int        `json:"cp"`
	EP                 int        `json:"ep"`
	DP                 int        `json:"dp"`
	SP                 bool       `json:"sp"`
	MicroBatch         int        `json:"micro_batch"`
	GradAccum          int        `json:"grad_accum"`
	Recompute          string     `json:"recompute"`
	Zero               int        `json:"zero"`
	Offload            string     `json:"offload"`
	Memory             jsonMemory `json:"memory"`
	Time               jsonTime   `json:"time"`
	TokensPerSPerGPU   float64    `json:"tokens_per_s_per_gpu"`
	ModelFlopsPerToken float64    `json:"model_flops_per_token"`
	ModelTFLOPSPerGPU  float64    `json:"model_tflops_per_gpu"`
	MFU                float64    `json:"mfu"`
	Why                []string   `json:"why"`
	// Added by issue 13 (a new key only): the expert layers' tensor-parallel
	// size, present when it is set (absent: it is tp).
	ETP int `json:"etp,omitempty"`
	// Added by issue 29 (a new key only, absent without a site
	// calibration): how the calibration moved the plan (calibrate.go).
	Calibration *CalibrationNote `json:"calibration,omitempty"`
	// Added by issue 37 (a new key only, absent for full training): what a
	// frozen-base plan trains and what binds it (finetune.go).
	Finetune *FinetuneNote `json:"finetune,omitempty"`
	// Added by issue 30 (a new key only, present and true for a tight
	// plan): it fits but leaves less than the memory margin free
	// (margin.go); the search ranks it below a plan with headroom up to
	// TightPenalty slower.
	Tight bool `json:"tight,omitempty"`
}

// jsonMemory and jsonTime are the contract's "memory" and "time" objects.
// They are spelled out, not Memory and Time themselves, so that a field the
// planner adds to those types cannot leak into the contract.
type jsonMemory struct {
	PerGPU      float64 `json:"per_gpu_bytes"`
	Capacity    float64 `json:"capacity_bytes"`
	Fits        bool    `json:"fits"`
	Weights     float64 `json:"weights_bytes"`
	Grads       float64 `json:"grads_bytes"`
	Optimizer   float64 `json:"optimizer_bytes"`
	Activations float64 `json:"activations_bytes"`
	Other       float64 `json:"other_bytes"`
}

type jsonTime struct {
	Step          float64 `json:"step_s"`
	Compute       float64 `json:"compute_s"`
	TPComm        float64 `json:"tp_comm_s"`
	PPBubble      float64 `json:"pp_bubble_s"`
	DPCommExposed float64 `json:"dp_comm_exposed_s"`
	CPComm        float64 `json:"cp_comm_s"`
	EPComm        float64 `json:"ep_comm_s"`
	Offload       float64 `json:"offload_s"`
	// Added by issue 13 (new keys only): the uncertainty band of step_s.
	StepRange [2]float64 `json:"step_s_range"`
}

// toJSONTime maps the planner's ten step parts onto the contract's seven so
// that they still add up to step_s: compute_s holds the GPU's own work
// (compute, recomputation, the optimizer step and the wait for stragglers),
// pp_bubble_s the pipeline's
// idle time (the bubble and exposed stage-to-stage transfers). The table
// shows all ten.
func toJSONTime(t Time) jsonTime {
	return jsonTime{Step: t.Step, Compute: t.Compute + t.Recompute + t.Optimizer + t.Straggler, TPComm: t.TPComm,
		PPBubble: t.PPBubble + t.PPComm, DPCommExposed: t.DPCommExposed, CPComm: t.CPComm, EPComm: t.EPComm, Offload: t.Offload,
		StepRange: t.StepRange}
}

type jsonRejection struct {
	Config string `json:"config"`
	Reason string `json:"reason"`
}

type jsonResult struct {
	Plan         *jsonPlan       `json:"plan"`
	Alternatives []jsonPlan      `json:"alternatives"`
	Rejected     []jsonRejection `json:"rejected"`
}

// toJSONPlan keeps to the contract's keys. Block recompute (Recompute "full"
// with RecomputeLayers N) has no key there and is written as "full": a
// trainer that recomputes every layer uses less memory than the plan, so the
// plan still fits (it runs slower than predicted). The megatron and env
// formats carry N.
func toJSONPlan(e Evaluation) jsonPlan {
	why := e.Why
	if why == nil {
		why = []string{}
	}
	return jsonPlan{
		TP: e.TP, PP: e.PP, VPP: e.VPP, CP: e.CP, EP: e.EP, ETP: e.ETP, DP: e.DP, SP: e.SP,
		MicroBatch: e.MicroBatch, GradAccum: e.GradAccum, Recompute: e.Recompute, Zero: e.Zero, Offload: e.Offload,
		Memory: jsonMemory(e.Memory), Time: toJSONTime(e.Time),
		TokensPerSPerGPU: e.TokensPerSPerGPU, ModelFlopsPerToken: e.ModelFlopsPerToken,
		ModelTFLOPSPerGPU: e.ModelTFLOPSPerGPU, MFU: e.MFU, Why: why, Calibration: e.Calibration, Finetune: e.Finetune, Tight: e.Tight,
	}
}

func toJSONResult(r Result) jsonResult {
	out := jsonResult{Alternatives: []jsonPlan{}, Rejected: []jsonRejection{}}
	if r.Plan != nil {
		p := toJSONPlan(*r.Plan)
		out.Plan = &p
	}
	for _, a := range r.Alternatives {
		out.Alternatives = append(out.Alternatives, toJSONPlan(a))
	}
	for _, rj := range r.Rejected {
		out.Rejected = append(out.Rejected, jsonRejection(rj))
	}
	return out
}

// RenderJSON writes the contract's object {"plan", "alternatives",
// "rejected"}, indented, with "plan": null when nothing fits. A non-finite
// figure is an error (it would be a planner bug, and JSON cannot carry it).
func RenderJSON(w io.Writer, r Result) error {
	b, err := json.MarshalIndent(toJSONResult(r), "", "  ")
	if err != nil {
		return fmt.Errorf("plan JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// GPUResult is one GPU type's answer in a comparison (--gpu a:N,b:M).
type GPUResult struct {
	Cluster Cluster
	Result  Result
}

// RenderComparisonJSON writes {"comparison": [{"gpu", "gpus", "result"}...]},
// each "result" being the contract's object for that GPU type.
func RenderComparisonJSON(w io.Writer, rs []GPUResult) error {
	type entry struct {
		GPU    string     `json:"gpu"`
		GPUs   int        `json:"gpus"`
		Result jsonResult `json:"result"`
	}
	out := struct {
		Comparison []entry `json:"comparison"`
	}{Comparison: []entry{}}
	for _, g := range rs {
		out.Comparison = append(out.Comparison, entry{g.Cluster.GPU.Name, g.Cluster.GPUs, toJSONResult(g.Result)})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("plan JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// LayoutGPUs is the number of GPUs a layout occupies: TP·PP·CP·DP (EP lives
// inside DP·CP, as in Megatron).
func LayoutGPUs(l Layout) int { return l.TP * l.PP * l.CP * l.DP }

// PlanEnv returns the plan's TRAINRUN_* variables for every training process
// (PRODUCT.md, "Environment of every training process"), in a fixed order.
// TRAINRUN_PLAN, the path of the plan JSON, is the launcher's to add.
// TRAINRUN_RECOMPUTE_LAYERS (block recompute: layers per model chunk that
// keep only their input; 0 = all with full), TRAINRUN_SP, TRAINRUN_ZERO and
// TRAINRUN_OFFLOAD are added beyond the contract's list so a trainer other
// than Megatron can apply the whole plan.
func PlanEnv(e Evaluation) [][2]string {
	var out [][2]string
	for _, v := range PlanVars(e.Layout) {
		out = append(out, [2]string{v.Key, v.Value})
	}
	return out
}

// RenderEnv writes PlanEnv as KEY=VALUE lines (values are plain words and
// numbers: no quoting needed).
func RenderEnv(w io.Writer, e Evaluation) error {
	var b strings.Builder
	for _, kv := range PlanEnv(e) {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// [A-Za-z0-9_.,:=/+-].
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.,:=/+-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Formatting helpers shared by the text renderers.

const bytesPerGiB = 1 << 30

func fmtGiB(b float64) string { return fmt.Sprintf("%.2f", b/bytesPerGiB) }

// fmtCount prints large counts with thousands separators ("12,345").
func fmtCount(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// fmtMillis prints seconds as milliseconds with one decimal and thousands
// separators ("51,842.6").
func fmtMillis(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return fmt.Sprint(s)
	}
	f := strconv.FormatFloat(s*1e3, 'f', 1, 64)
	whole, frac, _ := strings.Cut(f, ".")
	w, _ := strconv.ParseFloat(whole, 64)
	out := fmtCount(w)
	if strings.HasPrefix(whole, "-") && !strings.HasPrefix(out, "-") {
		out = "-" + out // -0.4 ms
	}
	return out + "." + frac
}

// fmtTokens prints a token count the way people say it (300B, 1.5T).
func fmtTokens(t float64) string {
	switch {
	case t >= 1e12:
		return strconv.FormatFloat(t/1e12, 'g', 4, 64) + "T"
	case t >= 1e9:
		return strconv.FormatFloat(t/1e9, 'g', 4, 64) + "B"
	case t >= 1e6:
		return strconv.FormatFloat(t/1e6, 'g', 4, 64) + "M"
	}
	return fmtCount(t)
}

// TrainSeconds is the predicted time to train j.Tokens with e: steps of
// global_batch·seq_len tokens, each e.Time.Step long. 0 when Tokens is 0.
func TrainSeconds(j Job, e Evaluation) float64 {
	if j.Tokens <= 0 || j.GlobalBatch <= 0 || j.SeqLen <= 0 {
		return 0
	}
	steps := math.Ceil(j.Tokens / float64(j.GlobalBatch*j.SeqLen))
	return steps * e.Time.Step
}
