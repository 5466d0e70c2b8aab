// Command testcluster starts the e2e suite's Slurm cluster (test/harness), as
// root, for trying things by hand or for scripts such as the demo:
//
//	go run ./test/harness/testcluster &   # prints: export SLURM_CONF=...; up until interrupted
//	export SLURM_CONF=...; srun --immediate=10 -N4 hostname
//	kill %1                                # stops it and removes everything
//
//	go run ./test/harness/testcluster -- bash job.sh   # runs one command against it, then stops it
//
// With a command after "--", the command runs with the cluster's environment
// (SLURM_CONF and the rest of harness.Cluster.Env) and its working directory
// unchanged; testcluster exits with the command's exit status after stopping
// the cluster.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/trainrun/trainrun/test/harness"
)

type lines []string

func (l *lines) String() string     { return fmt.Sprint(*l) }
func (l *lines) Set(s string) error { *l = append(*l, s); return nil }

func main() { os.Exit(run()) }

func run() int {
	nodes := flag.Int("nodes", 4, "number of nodes")
	gpus := flag.Int("gpus", 8, "fake GPUs per node")
	keep := flag.Bool("keep", false, "keep the cluster directory (logs, job output) after stopping")
	quiet := flag.Bool("q", false, "do not log the harness's progress")
	hetero := flag.Bool("hetero", false, "heterogeneous mode: partitions hopper (gpu:h100) and ampere (gpu:a100) instead of low and high")
	var extra, plug lines
	flag.Var(&extra, "conf", "a slurm.conf line to add or replace (repeatable), e.g. -conf KillWait=30")
	flag.Var(&plug, "plugstack", "a plugstack.conf line (repeatable)")
	topology := flag.String("topology", "", "a topology.conf for topology/tree (the e2e suite's cluster has one: leaf1 n[1-2], leaf2 n[3-4])")
	flag.Parse()
	var topoConf string
	if *topology != "" {
		b, err := os.ReadFile(*topology)
		if err != nil {
			log.Print(err)
			return 2
		}
		topoConf = string(b)
	}
	logf := log.Printf
	if *quiet {
		logf = func(string, ...any) {}
	}
	c, err := harness.Start(harness.Options{Nodes: *nodes, GPUsPerNode: *gpus, KeepDir: *keep, Heterogeneous: *hetero,
		ExtraSlurmConf: extra, Plugstack: plug, TopologyConf: topoConf, Logf: logf})
	if err != nil {
		log.Print(err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	code := 0
	if args := flag.Args(); len(args) > 0 {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = c.Env()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			log.Print(err)
			code = 127
		} else {
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case s := <-sig:
				_ = cmd.Process.Signal(s)
				err = <-done
			}
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				code = ee.ExitCode()
				if code < 0 {
					code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
				}
			case err != nil:
				log.Print(err)
				code = 1
			}
		}
	} else {
		fmt.Printf("export SLURM_CONF=%s\n", c.ConfPath())
		<-sig
	}
	if err := c.Stop(); err != nil {
		log.Print(err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
