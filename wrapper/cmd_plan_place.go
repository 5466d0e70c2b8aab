package main

import "github.com/trainrun/trainrun/plan"

// planPlaceOptions are the placement inputs of `trainrun plan`.
// This file is a placeholder: the placement helper replaces it.
type planPlaceOptions struct {
	Nodelist, TopologyConf string
}

// renderPlacement writes --format hostfile|placement for the chosen plan.
func renderPlacement(env *runEnv, format string, o *planPlaceOptions, m plan.Model, j plan.Job, c plan.Cluster, e *plan.Evaluation) error {
	return usageErrorf("--format %s needs placement support, not built yet", format)
}
