package submit

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/trainrun/trainrun/plan"
)

// ambiguous are typed GRES names that name a family with several memory
// sizes in the catalog: the partition's GPUType, else its nodes' memory
// feature, decides.
var ambiguous = map[string][]string{
	"a100":      {"a100-40gb", "a100-80gb"},
	"a100-sxm4": {"a100-40gb", "a100-80gb"},
	"a100-sxm":  {"a100-40gb", "a100-80gb"},
	"a100-pcie": {"a100-40gb", "a100-80gb"},
}

// memFeatureRE finds a GPU memory size in a node feature: 80gb, 40GB,
// gpumem=80G, gpu_mem:40g, a100_80gb.
var memFeatureRE = regexp.MustCompile(`(?i)(^|[^0-9])(\d{2,3})\s*g(b|ib)?$`)

// GPUType maps a partition's GPUs to the planner's catalog. gres is the
// type of its nodes' typed GRES (gpu:h100:8 → "h100"; "" untyped), policy
// the partition's GPUType= ("" = auto), features the nodes' features,
// fallback the user's --gpu ("" = none). An unambiguous GRES type wins; an
// ambiguous one (a100: 40 or 80 GB) or none takes the policy's type, else a
// memory size among the features (80gb, gpumem=40G), else fallback; the
// error says which key to set.
func GPUType(partition, gres, policy string, features []string, fallback string) (string, error) {
	name := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(gres)), "_", "-")
	choices, isAmbiguous := ambiguous[name]
	if name != "" && !isAmbiguous {
		if g, err := plan.LookupGPU(name); err == nil {
			return g.Name, nil
		}
		if t := plan.GPUTypeOf(name); t != "" {
			return t, nil
		}
	}
	if policy != "" {
		g, err := plan.LookupGPU(policy)
		if err != nil {
			return "", fmt.Errorf("partition %s: the policy's GPUType=%s: %v", partition, policy, err)
		}
		return g.Name, nil
	}
	if isAmbiguous {
		if t := byMemory(choices, features); t != "" {
			return t, nil
		}
	}
	if fallback != "" {
		g, err := plan.LookupGPU(fallback)
		if err != nil {
			return "", fmt.Errorf("--gpu %s: %v", fallback, err)
		}
		return g.Name, nil
	}
	set := fmt.Sprintf("set GPUType= on the policy's line 'PartitionName=%s' (types: %s)", partition, strings.Join(plan.GPUNames(), " "))
	switch {
	case isAmbiguous:
		return "", fmt.Errorf("partition %s: GRES type %q is ambiguous (%s) and its nodes report no GPU memory feature (e.g. 80gb): give --gpu %s (or %s), or the admin can %s, e.g. GPUType=%s",
			partition, gres, strings.Join(choices, " or "), choices[len(choices)-1], strings.Join(choices[:len(choices)-1], ", "), set, choices[len(choices)-1])
	case name != "":
		return "", fmt.Errorf("partition %s: GRES type %q is not a GPU type the planner knows: %s, or give --gpu TYPE", partition, gres, set)
	}
	return "", fmt.Errorf("partition %s: its nodes' GPUs have no GRES type (Gres=gpu:N, not gpu:TYPE:N): %s, or give --gpu TYPE", partition, set)
}

// byMemory picks the choice whose catalog memory matches a size in the
// features (within 10 %); "" when none or several match.
func byMemory(choices, features []string) string {
	found := ""
	for _, f := range features {
		m := memFeatureRE.FindStringSubmatch(strings.TrimSpace(f))
		if m == nil {
			continue
		}
		var gb float64
		fmt.Sscan(m[2], &gb)
		for _, c := range choices {
			g, _ := plan.LookupGPU(c)
			if mem := g.MemoryBytes / 1e9; mem > 0.9*gb && mem < 1.15*gb {
				if found != "" && found != c {
					return ""
				}
				found = c
			}
		}
	}
	return found
}
