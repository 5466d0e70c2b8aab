package plan

// The planner's vocabulary. JSON tags on Layout, Memory, Time and Evaluation
// follow the `trainrun plan --format json` contract in PRODUCT.md; renaming a
// tag breaks users' scripts.

// FFNType is the MLP's shape: gelu/relu/squared-relu use two matrices
// (h→f→h), swiglu three (gate, up, down).
type FFNType string

const (
	FFNGelu        FFNType = "gelu"
	FFNSwiGLU      FFNType = "swiglu"
	FFNReLU        FFNType = "relu"
	FFNSquaredReLU FFNType = "squared-relu"
	// FFNGeGLU is the GELU-gated MLP (Shazeer 2020): three matrices like
	// SwiGLU (Grok-1, Gemma).
	FFNGeGLU FFNType = "geglu"
)

// Model is a decoder-only transformer's architecture.
type Model struct {
	Name           string  `json:"name"`
	Layers         int     `json:"layers"`
	Hidden         int     `json:"hidden"`
	Heads          int     `json:"heads"`
	KVHeads        int     `json:"kv_heads"`               // = Heads for MHA; fewer for GQA/MQA
	HeadDim        int     `json:"head_dim"`               // usually Hidden/Heads
	FFN            int     `json:"ffn"`                    // dense MLP hidden size
	FFNType        FFNType `json:"ffn_type"`               //
	Vocab          int     `json:"vocab"`                  //
	TiedEmbeddings bool    `json:"tied_embeddings"`        // input and output embeddings share weights
	Experts        int     `json:"experts,omitempty"`      // routed experts per MoE layer; 0 = dense model
	TopK           int     `json:"topk,omitempty"`         // experts per token
	MoEFFN         int     `json:"moe_ffn,omitempty"`      // each routed expert's MLP hidden size
	SharedFFN      int     `json:"shared_ffn,omitempty"`   // shared-expert MLP hidden size (0 = none)
	DenseLayers    int     `json:"dense_layers,omitempty"` // leading dense layers of a MoE model
	// MTPLayers is DeepSeek-V3's multi-token-prediction depth (report §2.2):
	// each adds one transformer layer (MoE when the model is), a 2h→h
	// projection and a second pass of the output layer and loss on the
	// last pipeline stage. 0 = none (the presets' main model).
	MTPLayers int `json:"mtp_layers,omitempty"`

	// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2); KVLoRA > 0 turns
	// it on. Queries and keys have HeadDim (no-RoPE part) + QKRopeDim per
	// head, values VHeadDim; Q and KV are low-rank factored through latents of
	// width QLoRA (0 = full-rank Q) and KVLoRA (DeepSeek-V2 paper §2.1).
	QLoRA     int `json:"q_lora_rank,omitempty"`
	KVLoRA    int `json:"kv_lora_rank,omitempty"`
	QKRopeDim int `json:"qk_rope_head_dim,omitempty"`
	VHeadDim  int `json:"v_head_dim,omitempty"`

	// What a framework needs to build this very model beyond its sizes
	// (issue 26): "" and 0 mean the family's usual (Model.Arch says which).
	// None of them changes a figure the planner computes.
	Norm          string  `json:"norm,omitempty"`           // rmsnorm | layernorm | layernorm1p (zero-centred gamma)
	NormEps       float64 `json:"norm_eps,omitempty"`       // the norms' epsilon
	Position      string  `json:"position,omitempty"`       // rope | learned | alibi
	RopeTheta     float64 `json:"rope_theta,omitempty"`     // RoPE base
	RopeScaling   float64 `json:"rope_scaling,omitempty"`   // Llama-3.1 frequency scaling factor; YaRN factor with MLA (0 = none)
	RotaryPercent float64 `json:"rotary_percent,omitempty"` // fraction of each head rotated (0 = all)
	Bias          string  `json:"bias,omitempty"`           // linear-layer biases: none | qkv | all
	QKNorm        bool    `json:"qk_norm,omitempty"`        // an RMSNorm on each head's queries and keys (Qwen3, Gemma 3)
	// MoE routing (DeepSeek's grouped, sigmoid-scored router); "" = softmax top-k.
	Router          string  `json:"router,omitempty"` // softmax | sigmoid (sigmoid: with a load-balancing expert bias)
	RouterGroups    int     `json:"router_groups,omitempty"`
	RouterGroupTopK int     `json:"router_group_topk,omitempty"`
	RouterScale     float64 `json:"router_scale,omitempty"` // routed_scaling_factor
}

// Precision is the training number format for matmuls.
type Precision string

const (
	BF16 Precision = "bf16"
	FP16 Precision = "fp16"
	FP8  Precision = "fp8"
)

// Job is what is trained and how much.
type Job struct {
	SeqLen      int       `json:"seq_len"`
	GlobalBatch int       `json:"global_batch"` // sequences per optimizer step
	Precision   Precision `json:"precision"`
	LoRARank    int       `json:"lora_rank,omitempty"` // 0 = full training
	// Finetune is the fine-tuning kind (finetune.go); its zero value with
	// LoRARank > 0 is LoRA of that rank (FinetuneOf), with 0 full training.
	Finetune Finetune `json:"finetune,omitempty"`
	Tokens   float64  `json:"tokens,omitempty"` // total tokens, for time-to-train; 0 = not asked
	Stack    Stack    `json:"stack,omitempty"`  // training software generation; "" = Megatron-Core + TE
	// FP8Recipe is how FP8 tensors are scaled (precision.go, fp8.go);
	// "" = delayed scaling.
	FP8Recipe FP8Recipe `json:"fp8_recipe,omitempty"`
	// MoECapacity is the MoE capacity factor (token dropping, Megatron-Core
	// --moe-expert-capacity-factor, inputs padded to capacity); 0 = dropless.
	MoECapacity float64 `json:"moe_capacity_factor,omitempty"`
	// MoEA2AOverlap: the EP all-to-all of one micro-batch overlaps another's
	// compute (Megatron-Core --overlap-moe-expert-parallel-comm; DeepSeek's
	// DualPipe), moe.go.
	MoEA2AOverlap bool `json:"moe_a2a_overlap,omitempty"`
	// MoEDispatcher is the token dispatcher: "" or "alltoall" (NCCL
	// all-to-all, every routed copy sent) or "flex" (DeepEP / HybridEP:
	// one copy per remote NVLink domain, fanned out over NVLink), moe.go.
	MoEDispatcher string `json:"moe_dispatcher,omitempty"`
}

// Stack is the generation of the training software. It decides mechanisms the
// time and memory model must know: which attention kernel runs and which
// collectives hide behind compute. The planner plans for the current stack;
// the older one exists so that published runs made with it can be predicted
// (calibration) with the kernels they really used, not with tuned constants.
type Stack string

const (
	// StackMegatronCore is Megatron-Core with Transformer Engine (2024 on):
	// fused flash attention (no s×s scores stored, causal half skipped), TP
	// collectives overlapped with GEMMs when SP is on (TE userbuffers),
	// gradient reduce-scatter and parameter all-gather overlapped, FP8 GEMMs.
	StackMegatronCore Stack = ""
	// StackMegatron2022 is Megatron-LM of Narayanan et al. 2021 and
	// Korthikanti et al. 2022 (and DeepSpeed runs built on its model code):
	// softmax attention that materialises the s×s scores (Korthikanti's 5as/h
	// term), computes the masked half anyway, and blocking TP all-reduces.
	StackMegatron2022 Stack = "megatron-2022"
	// StackNeMo is Megatron-Core + TE as NeMo 24.x configures it: as
	// StackMegatronCore but gradients are kept and reduced in BF16
	// (optim.grad_sync_dtype: bf16 in NeMo's performance configs, recalled),
	// where Megatron-LM forces FP32 main gradients for bf16
	// (arguments.py: accumulate_allreduce_grads_in_fp32).
	StackNeMo Stack = "nemo"
)

// GPU is one accelerator type of the catalog. Bandwidths in bytes/s,
// peaks are dense (no 2:4 sparsity).
type GPU struct {
	Name            string  `json:"name"`
	PeakBF16        float64 `json:"peak_bf16_flops"` // dense FLOP/s
	PeakFP8         float64 `json:"peak_fp8_flops"`  // dense FLOP/s; 0 = no FP8
	MemoryBytes     float64 `json:"memory_bytes"`
	HBMBandwidth    float64 `json:"hbm_bandwidth"`        // bytes/s
	NVLinkBandwidth float64 `json:"nvlink_bandwidth"`     // bytes/s per GPU, one direction; 0 = no NVLink
	PCIeBandwidth   float64 `json:"pcie_bandwidth"`       // bytes/s per GPU, one direction
	InterNode       float64 `json:"inter_node_bandwidth"` // usual fabric, bytes/s per GPU, one direction
	NVLinkDomain    int     `json:"nvlink_domain"`        // usual GPUs per NVLink domain
	GPUsPerNode     int     `json:"gpus_per_node"`        // usual
	Source          string  `json:"source"`               // where the figures come from

	// Achievable fractions, the model's only per-GPU efficiency constants
	// (gpus.go documents each value's origin).
	MatmulEff    float64 `json:"matmul_efficiency"`     // large BF16 GEMM, fraction of PeakBF16 (maximum achievable matmul FLOPS)
	FP8MatmulEff float64 `json:"fp8_matmul_efficiency"` // large FP8 GEMM, fraction of PeakFP8
	AttentionEff float64 `json:"attention_efficiency"`  // fused flash attention fwd+bwd, fraction of PeakBF16; 0 = no fused kernel
	HostMemory   float64 `json:"host_memory_bytes"`     // usual host memory per node (offload capacity)
	Arch         string  `json:"arch"`                  // volta, ampere, hopper, blackwell, ada, cdna3: kernel generations differ
}

// Cluster is where the job runs.
type Cluster struct {
	GPU          GPU     `json:"gpu"`
	GPUs         int     `json:"gpus"`
	GPUsPerNode  int     `json:"gpus_per_node"`
	NVLinkDomain int     `json:"nvlink_domain"`               // GPUs sharing one NVLink domain (node, or 72 for NVL72)
	InterNode    float64 `json:"inter_node_bandwidth"`        // bytes/s per GPU, one direction
	HostMemory   float64 `json:"host_memory_bytes,omitempty"` // per node, for offload; 0 = unknown
	NVMeBW       float64 `json:"nvme_bandwidth,omitempty"`    // per node, bytes/s, for offload=nvme; 0 = defaultNVMeBW
	MemoryMargin float64 `json:"memory_margin,omitempty"`     // share of capacity a plan should leave free (margin.go); 0 = DefaultMemoryMargin, negative = none
}

// defaultNVMeBW is a node's local NVMe bandwidth when none is given: 8 Gen4
// NVMe drives at ~3 GB/s sustained mixed read/write each (DGX H100 has 8
// U.2 data drives; recalled, an assumption): 25 GB/s.
const defaultNVMeBW = 25e9

// Layout is one parallel configuration.
type Layout struct {
	TP  int `json:"tp"`
	PP  int `json:"pp"`
	VPP int `json:"vpp"` // virtual stages per pipeline rank (1 = not interleaved)
	CP  int `json:"cp"`
	EP  int `json:"ep"`
	// ETP is the expert layers' tensor-parallel size (Megatron-Core
	// --expert-tensor-parallel-size); 0 = TP. With ETP < TP the expert
	// layers fold the TP ranks into expert parallelism ("MoE parallel
	// folding", Megatron-Core 0.10): EP·ETP divides TP·CP·DP.
	ETP        int    `json:"etp,omitempty"`
	DP         int    `json:"dp"`
	SP         bool   `json:"sp"`
	MicroBatch int    `json:"micro_batch"`
	GradAccum  int    `json:"grad_accum"`
	Recompute  string `json:"recompute"` // none | selective | full
	// RecomputeLayers, with Recompute "full", is how many layers of each model
	// chunk are recomputed (Megatron --recompute-method block
	// --recompute-num-layers N); 0 = all of them.
	RecomputeLayers int    `json:"recompute_layers,omitempty"`
	Zero            int    `json:"zero"`    // 0-3 (1 = Megatron's distributed optimizer)
	Offload         string `json:"offload"` // none | optimizer | params
}

// Memory is the per-GPU memory of the most loaded pipeline stage, in bytes.
type Memory struct {
	PerGPU      float64 `json:"per_gpu_bytes"`
	Capacity    float64 `json:"capacity_bytes"`
	Fits        bool    `json:"fits"`
	Weights     float64 `json:"weights_bytes"`
	Grads       float64 `json:"grads_bytes"`
	Optimizer   float64 `json:"optimizer_bytes"`
	Activations float64 `json:"activations_bytes"`
	Other       float64 `json:"other_bytes"`
}

// Time is one optimizer step's predicted duration and its parts, in seconds.
type Time struct {
	Step          float64 `json:"step_s"`
	Compute       float64 `json:"compute_s"`
	TPComm        float64 `json:"tp_comm_s"`
	PPBubble      float64 `json:"pp_bubble_s"`
	DPCommExposed float64 `json:"dp_comm_exposed_s"`
	CPComm        float64 `json:"cp_comm_s"`
	EPComm        float64 `json:"ep_comm_s"`
	Offload       float64 `json:"offload_s"`
	// Added by the planner (the parts above sum with these to Step):
	Recompute float64 `json:"recompute_s"` // recomputed forward work (selective or full)
	PPComm    float64 `json:"pp_comm_s"`   // exposed pipeline point-to-point transfers
	Optimizer float64 `json:"optimizer_s"` // the optimizer step itself (HBM-bound Adam update)
	// StepRange is the uncertainty band of Step, [low, high] seconds, from the
	// cross-validated error of the nearest calibration rows (uncertainty.go).
	StepRange [2]float64 `json:"step_s_range"`
	Straggler float64    `json:"straggler_s"` // waiting for the slowest GPU of a synchronous step (jitter at scale)
}

// Traffic is the bytes one GPU sends per optimizer step in each kind of
// group; placement uses it to weigh which groups must stay on fast links.
type Traffic struct {
	TP float64 `json:"tp_bytes"`
	CP float64 `json:"cp_bytes"`
	EP float64 `json:"ep_bytes"`
	DP float64 `json:"dp_bytes"`
	PP float64 `json:"pp_bytes"`
}

// Evaluation is one layout with its predictions: the "plan" object of the contract.
type Evaluation struct {
	Layout
	Memory             Memory   `json:"memory"`
	Time               Time     `json:"time"`
	TokensPerSPerGPU   float64  `json:"tokens_per_s_per_gpu"`
	ModelFlopsPerToken float64  `json:"model_flops_per_token"`
	ModelTFLOPSPerGPU  float64  `json:"model_tflops_per_gpu"`
	MFU                float64  `json:"mfu"`
	Why                []string `json:"why"`
	Traffic            Traffic  `json:"traffic"`
	// Reason is empty for a valid layout that fits; otherwise the rule it
	// breaks or the figure that does not fit.
	Reason string `json:"reason,omitempty"`
	// Tight: it fits, but inside the cluster's memory margin (margin.go);
	// a Why line says so.
	Tight bool `json:"-"`
	// Calibration says how a site calibration moved this evaluation
	// (calibrate.go); nil without one.
	Calibration *CalibrationNote `json:"calibration,omitempty"`
	// Finetune describes a frozen-base plan (finetune.go); nil for full training.
	Finetune *FinetuneNote `json:"finetune,omitempty"`
}

// Rejection is a layout that was considered and why it lost.
type Rejection struct {
	Config string `json:"config"` // "tp=4,pp=2,..."
	Reason string `json:"reason"` // the figure that did not fit
}

// Result is the whole answer of a search: the contract's top-level object.
type Result struct {
	Plan         *Evaluation  `json:"plan"` // nil when nothing fits
	Alternatives []Evaluation `json:"alternatives"`
	Rejected     []Rejection  `json:"rejected"`
	// Invalid is why nothing was evaluated against memory when Plan is nil:
	// InvalidLayout (divisibility) or InvalidCapability; "" when layouts
	// were evaluated and none fit (or one did). NoFit words each apart.
	Invalid string `json:"-"`
}
