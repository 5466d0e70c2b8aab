package spank

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/topo"
)

// Config is what plugstack.conf says after the plugin's path: strict
// key=value arguments, an unknown key or a repeated one is an error.
//
//	required /usr/local/lib/slurm/spank_trainrun.so policy=/etc/slurm/trainrun.conf trainrun=/usr/local/bin/trainrun
type Config struct {
	// PolicyPath is the site's trainrun.conf ("" = every key at its default).
	PolicyPath string
	// CacheDir holds the node topology cache (keyed by boot id) and per-job
	// files, which the job epilog removes (default /run/trainrun).
	CacheDir string
	// TopologyConf is a Slurm topology.conf placement reads ("" = one switch).
	TopologyConf string
	// Trainrun is the trainrun binary the job epilog runs, as the job's
	// user, to finish the drains of node-local checkpoints (default
	// DefaultTrainrun).
	Trainrun string
	// DrainTimeout bounds each drain the job epilog runs: at the deadline the
	// drain's process group is killed, so the epilog ends (Slurm drains a
	// node whose epilog hangs). Default DefaultDrainTimeout.
	DrainTimeout time.Duration
	// ResumeTimeout bounds the helper that reads the checkpoint store for
	// TRAINRUN_RESUME_DIR as the job's user (default DefaultResumeTimeout).
	ResumeTimeout time.Duration
	// As is the job's user, whose credentials every file a user can name
	// is opened with in root context (spank/doc.go); nil = this process's
	// own (srun, sbatch and salloc run as the user).
	As *Cred

	// Policy is the parsed policy (Load); policy.Default() without a file.
	Policy *policy.Policy
	// Cluster is the parsed topology.conf (Load); nil without one.
	Cluster *topo.Cluster
}

// DefaultCacheDir is where the plugin keeps per-node and per-job data.
const DefaultCacheDir = "/run/trainrun"

// DefaultTrainrun is where `make install` puts trainrun (PREFIX=/usr/local).
const DefaultTrainrun = "/usr/local/bin/trainrun"

// DefaultDrainTimeout bounds one drain in the job epilog.
const DefaultDrainTimeout = 5 * time.Minute

var argKeys = map[string]string{
	"policy":   "path of the site's trainrun.conf",
	"cache":    "directory for the node topology cache and per-job files (default " + DefaultCacheDir + ")",
	"topology": "path of a Slurm topology.conf for rank placement (default: all nodes under one switch)",
	"trainrun": "path of the trainrun binary the job epilog runs to finish checkpoint drains (default " + DefaultTrainrun + ")",

	"drain_timeout":  "bound on each checkpoint drain the job epilog runs, and on all of them together, e.g. 5m (default " + DefaultDrainTimeout.String() + ", 1s to 1h)",
	"resume_timeout": "bound on reading the checkpoint store for TRAINRUN_RESUME_DIR as the job's user, e.g. 10s (default " + DefaultResumeTimeout.String() + ", 1s to 1h)",
}

func acceptedArgs() string {
	ks := make([]string, 0, len(argKeys))
	for k := range argKeys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// ParseArgs reads the plugstack.conf arguments. It does not read files.
func ParseArgs(args []string) (*Config, error) {
	c := &Config{CacheDir: DefaultCacheDir, Trainrun: DefaultTrainrun, DrainTimeout: DefaultDrainTimeout, ResumeTimeout: DefaultResumeTimeout}
	seen := map[string]bool{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("plugstack.conf argument %q is not key=value; accepted keys: %s", a, acceptedArgs())
		}
		if _, known := argKeys[k]; !known {
			return nil, fmt.Errorf("plugstack.conf: unknown key %q in %q; accepted keys: %s", k, a, acceptedArgs())
		}
		if seen[k] {
			return nil, fmt.Errorf("plugstack.conf: key %q given twice; give it once", k)
		}
		seen[k] = true
		if k == "drain_timeout" || k == "resume_timeout" {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second || d > time.Hour {
				return nil, fmt.Errorf("plugstack.conf: %s=%q: want a duration from 1s to 1h, e.g. 5m (%s)", k, v, argKeys[k])
			}
			if k == "drain_timeout" {
				c.DrainTimeout = d
			} else {
				c.ResumeTimeout = d
			}
			continue
		}
		if v == "" || !filepath.IsAbs(v) {
			return nil, fmt.Errorf("plugstack.conf: %s=%q: want an absolute path (%s)", k, v, argKeys[k])
		}
		switch k {
		case "policy":
			c.PolicyPath = filepath.Clean(v)
		case "cache":
			c.CacheDir = filepath.Clean(v)
		case "topology":
			c.TopologyConf = filepath.Clean(v)
		case "trainrun":
			c.Trainrun = filepath.Clean(v)
		}
	}
	return c, nil
}

// Load reads the policy and topology.conf the arguments name. A policy with
// errors is reported with every problem's file, line and key.
func (c *Config) Load() error {
	c.Policy = policy.Default()
	if c.PolicyPath != "" {
		f, err := os.Open(c.PolicyPath)
		if err != nil {
			return fmt.Errorf("policy: %v", err)
		}
		defer f.Close()
		p, err := policy.Parse(f, c.PolicyPath)
		if err != nil {
			var pe policy.Errors
			if errors.As(err, &pe) {
				return fmt.Errorf("policy: %s has %d error(s): %v", c.PolicyPath, len(pe), strings.ReplaceAll(pe.Error(), "\n", "; "))
			}
			return fmt.Errorf("policy: %v", err)
		}
		c.Policy = p
	}
	if c.TopologyConf != "" {
		cl, err := topo.LoadTopologyConf(c.TopologyConf)
		if err != nil {
			return fmt.Errorf("topology: %v", err)
		}
		c.Cluster = cl
	}
	return nil
}

// LoadConfig is ParseArgs then Load.
func LoadConfig(args []string) (*Config, error) {
	c, err := ParseArgs(args)
	if err != nil {
		return nil, err
	}
	return c, c.Load()
}
