package plan

import "fmt"

// DefaultMemoryMargin is the share of a GPU's memory a plan should leave
// free. The memory model counts weights, gradients, optimizer states,
// activations and a fixed allowance for the CUDA context, NCCL buffers and
// fragmentation (memory.go); what it cannot know (allocator fragmentation
// growing over a long run, a data loader's pinned buffers, a longer
// sequence in the data, a framework's workspace) is of the order of a few
// per cent of HBM: PyTorch's caching allocator typically reserves 2-5 %
// more than it has allocated (torch.cuda.memory_reserved vs
// memory_allocated, "CUDA semantics: memory management"). A plan inside
// the margin still "fits" but is shown as tight. Policy MemoryMargin=
// sets it per partition.
const DefaultMemoryMargin = 0.05

// MarginOf is c's memory margin as a share of capacity (0 for none).
func MarginOf(c Cluster) float64 {
	switch {
	case c.MemoryMargin < 0:
		return 0
	case c.MemoryMargin == 0:
		return DefaultMemoryMargin
	}
	return c.MemoryMargin
}

// tightLabel is the table's memory verdict for a tight plan.
func tightLabel(m Memory, c Cluster) string {
	return fmt.Sprintf("TIGHT: %.2f GiB free, under the %.0f %% margin", (m.Capacity-m.PerGPU)/bytesPerGiB, 100*MarginOf(c))
}

// tightWhy is the plan's Why line for a tight plan.
func tightWhy(m Memory, c Cluster) string {
	return fmt.Sprintf("memory is tight: %.1f of %.1f GiB leaves %.1f GiB, under the %.0f%% margin (policy MemoryMargin=): fragmentation or a longer batch can run out of memory; recompute=selective|full, more GPUs or a smaller micro-batch give headroom",
		m.PerGPU/gib, m.Capacity/gib, (m.Capacity-m.PerGPU)/gib, 100*MarginOf(c))
}
