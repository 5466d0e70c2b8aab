// Package topo owns the facts about hardware: a node's GPUs, NVLink, PCIe, NUMA
// and NICs read from sysfs (rooted at a directory value, so a captured tree works
// in tests) and, where the driver loads, from NVML through the topo/nvml adapter;
// and a cluster's shape from Slurm hostlists and topology.conf.
//
// topo sits at the bottom of the import graph: it imports nothing else of trainrun.
package topo
