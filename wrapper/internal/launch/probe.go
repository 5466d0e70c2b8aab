package launch

import "github.com/trainrun/trainrun/topo"

// NodeFacts is what the probe learns on one node of the allocation.
type NodeFacts struct {
	Node     string `json:"node"`                // SLURMD_NODENAME
	Hostname string `json:"hostname"`            // os.Hostname
	GPUs     []int  `json:"gpus"`                // SLURM_STEP_GPUS (else SLURM_JOB_GPUS): the node's GPU indices the job holds
	CVD      string `json:"cuda_visible"`        // CUDA_VISIBLE_DEVICES as Slurm set it for the probe step
	GPUName  string `json:"gpu_name,omitempty"`  // the first GPU's name in the node topology
	NCCLConf string `json:"nccl_conf,omitempty"` // /etc/nccl.conf, when present
	Restart  string `json:"restart"`             // SLURM_RESTART_COUNT of the probe ("" on a first start): the incarnation whose GPUs these are
	// Topo is the node's topology (topo.Discover on the node); nil when
	// discovery failed (TopoError says why).
	Topo      *topo.Node `json:"topo,omitempty"`
	TopoError string     `json:"topo_error,omitempty"`
}
