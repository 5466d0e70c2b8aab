package plan

import (
	"encoding/json"
	"fmt"
	"io"
)

// DeepSpeedVersion is the DeepSpeed whose config rules the deepspeed format
// follows (deepspeed/runtime/config.py, zero/offload_config.py,
// pipe/engine.py at that commit).
const DeepSpeedVersion = "DeepSpeed master edaa7221 (2026-08-22)"

// FormatError is what a framework format cannot express; Instead names
// what to use.
type FormatError struct {
	Format, What, Instead string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("the %s format cannot express %s: %s", e.Format, e.What, e.Instead)
}

// dsConfig is the part of DeepSpeed's ds_config JSON the plan decides.
type dsConfig struct {
	TrainBatchSize int       `json:"train_batch_size"`
	MicroBatch     int       `json:"train_micro_batch_size_per_gpu"`
	GradAccum      int       `json:"gradient_accumulation_steps"`
	Zero           dsZero    `json:"zero_optimization"`
	BF16           *dsBF16   `json:"bf16,omitempty"`
	FP16           *dsFP16   `json:"fp16,omitempty"`
	Activation     *dsActive `json:"activation_checkpointing,omitempty"`
}

type dsZero struct {
	Stage               int        `json:"stage"`
	OverlapComm         bool       `json:"overlap_comm,omitempty"`
	ContiguousGradients bool       `json:"contiguous_gradients,omitempty"`
	OffloadOptimizer    *dsOffload `json:"offload_optimizer,omitempty"`
	OffloadParam        *dsOffload `json:"offload_param,omitempty"`
}

type dsOffload struct {
	Device    string `json:"device"`
	PinMemory bool   `json:"pin_memory"`
}

type dsBF16 struct {
	Enabled bool `json:"enabled"`
}

type dsFP16 struct {
	Enabled          bool `json:"enabled"`
	LossScale        int  `json:"loss_scale"` // 0: dynamic
	InitialScalePow  int  `json:"initial_scale_power"`
	LossScaleWindow  int  `json:"loss_scale_window"`
	MinLossScale     int  `json:"min_loss_scale"`
	HysteresisWindow int  `json:"hysteresis"`
}

// dsActive is Megatron-DeepSpeed's activation checkpointing section (the
// layers themselves are checkpointed by the model code it configures).
type dsActive struct {
	PartitionActivations bool `json:"partition_activations"`
	ContiguousMemory     bool `json:"contiguous_memory_optimization"`
}

// DeepSpeedConfig is the ds_config for the plan (`--stack
// deepspeed[:zeroN|:pipe]`): the batch (DeepSpeed asserts train_batch_size
// = micro-batch × accumulation × data-parallel size, config.py
// _batch_assertion), the ZeRO stage with its offload, precision. TP and PP
// are the model code's (Megatron-DeepSpeed's mpu, PipelineModule), not the
// config's; LoRA is the model code's too (PEFT wraps the model the config
// trains). A plan DeepSpeed cannot run is a *FormatError.
func DeepSpeedConfig(j Job, e Evaluation) (any, error) {
	l := normalizeLayout(e.Layout)
	c := dsConfig{MicroBatch: l.MicroBatch, GradAccum: l.GradAccum, TrainBatchSize: l.MicroBatch * l.GradAccum * l.DP}
	if j.GlobalBatch > 0 && c.TrainBatchSize != j.GlobalBatch {
		return nil, fmt.Errorf("deepspeed format: micro-batch %d × accumulation %d × dp %d = %d, not the global batch %d",
			l.MicroBatch, l.GradAccum, l.DP, c.TrainBatchSize, j.GlobalBatch)
	}
	if l.PP > 1 && l.Zero >= 2 {
		// pipe/engine.py:76-77: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
		return nil, &FormatError{"deepspeed", fmt.Sprintf("zero=%d with pp=%d (DeepSpeed's pipeline engine allows ZeRO 0-1)", l.Zero, l.PP),
			"pin zero=1 or pp=1 (--fix zero=1)"}
	}
	c.Zero.Stage = l.Zero
	if l.Zero >= 1 {
		c.Zero.OverlapComm, c.Zero.ContiguousGradients = true, l.Zero >= 2
	}
	switch l.Offload {
	case "optimizer":
		c.Zero.OffloadOptimizer = &dsOffload{Device: "cpu", PinMemory: true}
	case "params":
		c.Zero.OffloadOptimizer = &dsOffload{Device: "cpu", PinMemory: true}
		c.Zero.OffloadParam = &dsOffload{Device: "cpu", PinMemory: true}
	case "nvme":
		return nil, &FormatError{"deepspeed", "offload=nvme without the NVMe mount (zero_optimization.offload_param.nvme_path, zero/offload_config.py)",
			"take this config with offload=params and set offload_param {\"device\": \"nvme\", \"nvme_path\": YOUR_MOUNT} and the same for offload_optimizer"}
	}
	switch j.Precision {
	case FP16:
		c.FP16 = &dsFP16{Enabled: true, InitialScalePow: 16, LossScaleWindow: 1000, MinLossScale: 1, HysteresisWindow: 2}
	case FP8:
		return nil, &FormatError{"deepspeed", "precision fp8 (a ds_config has no FP8 recipe)", "wrap the model's layers in Transformer Engine's fp8_autocast and plan the config with --precision bf16"}
	default:
		c.BF16 = &dsBF16{Enabled: true}
	}
	if l.Recompute == "full" || l.Recompute == "selective" {
		c.Activation = &dsActive{PartitionActivations: l.TP > 1, ContiguousMemory: false}
	}
	return c, nil
}

// RenderDeepSpeed writes DeepSpeedConfig as indented JSON.
func RenderDeepSpeed(w io.Writer, j Job, e Evaluation) error {
	c, err := DeepSpeedConfig(j, e)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
