// Command testcluster starts the e2e suite's Slurm cluster (test/harness) and
// keeps it up until interrupted, for trying things by hand as root:
//
//	go run ./test/harness/testcluster &   # prints: export SLURM_CONF=...
//	export SLURM_CONF=...; srun --immediate=10 -N4 hostname
//	kill %1                                # stops it and removes everything
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/trainrun/trainrun/test/harness"
)

type lines []string

func (l *lines) String() string     { return fmt.Sprint(*l) }
func (l *lines) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	nodes := flag.Int("nodes", 4, "number of nodes")
	gpus := flag.Int("gpus", 8, "fake GPUs per node")
	keep := flag.Bool("keep", false, "keep the cluster directory (logs, job output) after stopping")
	var extra lines
	flag.Var(&extra, "conf", "a slurm.conf line to add or replace (repeatable), e.g. -conf KillWait=30")
	flag.Parse()
	c, err := harness.Start(harness.Options{Nodes: *nodes, GPUsPerNode: *gpus, KeepDir: *keep, ExtraSlurmConf: extra, Logf: log.Printf})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("export SLURM_CONF=%s\n", c.ConfPath())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	if err := c.Stop(); err != nil {
		log.Fatal(err)
	}
}
