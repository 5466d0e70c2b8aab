package harness

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Partition names of the default configuration: "low" is the default
// partition and can be preempted (with a GraceTime) by jobs in "high".
const (
	LowPartition  = "low"
	HighPartition = "high"
)

// Defaults of the generated slurm.conf that tests may want to extend rather
// than replace (an ExtraSlurmConf line with the same key replaces the default
// line, so write e.g. "SchedulerParameters="+DefaultSchedulerParameters+",preempt_send_user_signal").
const (
	DefaultSchedulerParameters = "batch_sched_delay=0,sched_interval=1,sched_min_interval=0,bf_interval=1"
	DefaultSlurmdParameters    = "config_overrides"
	DefaultKillWait            = 5 // seconds
	DefaultGraceTime           = 5 // seconds, on the low partition
)

// Layout of one emulated node. The machine may have far fewer cores: see the
// package doc for why config_overrides makes this work.
const (
	socketsPerNode = 2
	coresPerSocket = 16
	nodeMemoryMB   = 16384
)

// layout holds every path and port of one cluster; config rendering is a pure
// function of it so it can be checked without starting anything.
type layout struct {
	dir         string   // root of everything this cluster writes
	clusterName string   // ClusterName=
	host        string   // this machine's short hostname
	ctldPort    int      // SlurmctldPort=
	nodePorts   []int    // Port= of n1..nN
	gpus        int      // GPUs per node
	extra       []string // Options.ExtraSlurmConf
	partitions  []string // Options.Partitions, or nil for the defaults
	topology    bool     // a topology.conf is written
	hetero      bool     // Options.Heterogeneous: typed GRES, partitions hopper and ampere
	gresTypes   []string // Options.GresTypes: node i's GRES type, overriding hetero's
}

func (l *layout) nodeName(i int) string { return fmt.Sprintf("n%d", i+1) }
func (l *layout) etc() string           { return filepath.Join(l.dir, "etc") }
func (l *layout) confPath() string      { return filepath.Join(l.etc(), "slurm.conf") }
func (l *layout) plugstackPath() string { return filepath.Join(l.etc(), "plugstack.conf") }
func (l *layout) gresPath() string      { return filepath.Join(l.etc(), "gres.conf") }
func (l *layout) topologyPath() string  { return filepath.Join(l.etc(), "topology.conf") }
func (l *layout) logDir() string        { return filepath.Join(l.dir, "log") }
func (l *layout) runDir() string        { return filepath.Join(l.dir, "run") }
func (l *layout) spoolDir() string      { return filepath.Join(l.dir, "spool") }
func (l *layout) stateDir() string      { return filepath.Join(l.dir, "state") }
func (l *layout) jobsDir() string       { return filepath.Join(l.dir, "jobs") }
func (l *layout) mungeDir() string      { return filepath.Join(l.dir, "munge") }
func (l *layout) mungeKeyDir() string   { return filepath.Join(l.dir, "munge-key") }
func (l *layout) mungeSocket() string   { return filepath.Join(l.mungeDir(), "munge.socket.2") }
func (l *layout) mungeKey() string      { return filepath.Join(l.mungeKeyDir(), "munge.key") }
func (l *layout) devDir(node string) string {
	return filepath.Join(l.dir, "dev", node)
}
func (l *layout) gpuDevice(node string, i int) string {
	return filepath.Join(l.devDir(node), fmt.Sprintf("nvidia%d", i))
}
func (l *layout) ctldLog() string { return filepath.Join(l.logDir(), "slurmctld.log") }
func (l *layout) slurmdLog(node string) string {
	return filepath.Join(l.logDir(), "slurmd-"+node+".log")
}
func (l *layout) mungeLog() string { return filepath.Join(l.logDir(), "munged.log") }

// confEntry is one line of slurm.conf: key is what replacement matches on.
type confEntry struct{ key, line string }

// slurmConf renders slurm.conf. Lines of l.extra whose key matches a default
// single-valued key replace it in place; other keys are appended to the
// settings, and NodeName and PartitionName lines to the node and partition
// definitions.
func (l *layout) slurmConf() string {
	kv := func(k, v string) confEntry { return confEntry{k, k + "=" + v} }
	var e []confEntry
	add := func(k, v string) { e = append(e, kv(k, v)) }
	add("ClusterName", l.clusterName)
	add("SlurmctldHost", l.host+"(127.0.0.1)")
	add("SlurmctldPort", fmt.Sprint(l.ctldPort))
	// Bind to 127.0.0.1 (the SlurmctldHost address, each node's NodeAddr and
	// what the hostname resolves to) instead of every interface.
	add("CommunicationParameters", "NoCtldInAddrAny,NoInAddrAny")
	add("SlurmUser", "root")
	add("SlurmdUser", "root")
	add("AuthType", "auth/munge")
	add("CredType", "cred/munge")
	// cred_expire is also how long a requeued job waits before it may run again.
	add("AuthInfo", "socket="+l.mungeSocket()+",cred_expire=10")
	add("StateSaveLocation", l.stateDir())
	add("SlurmdSpoolDir", filepath.Join(l.spoolDir(), "%n"))
	add("SlurmctldPidFile", filepath.Join(l.runDir(), "slurmctld.pid"))
	add("SlurmdPidFile", filepath.Join(l.runDir(), "slurmd-%n.pid"))
	add("SlurmctldLogFile", l.ctldLog())
	add("SlurmdLogFile", filepath.Join(l.logDir(), "slurmd-%n.log"))
	add("SlurmctldDebug", "info")
	add("SlurmdDebug", "info")
	add("PlugStackConfig", l.plugstackPath())
	add("MailProg", "/bin/true")
	add("ProctrackType", "proctrack/linuxproc")
	add("TaskPlugin", "task/none")
	add("SelectType", "select/cons_tres")
	add("SelectTypeParameters", "CR_Core")
	add("GresTypes", "gpu")
	add("SchedulerType", "sched/backfill")
	add("SchedulerParameters", DefaultSchedulerParameters)
	add("PreemptType", "preempt/partition_prio")
	add("PreemptMode", "REQUEUE")
	add("JobRequeue", "1")
	add("KillWait", fmt.Sprint(DefaultKillWait))
	// Keep finished jobs visible to scontrol for the whole test run (there is
	// no accounting database, so sacct cannot answer).
	add("MinJobAge", "3600")
	add("ReturnToService", "2")
	add("MpiDefault", "none")
	add("SwitchType", "switch/none")
	add("AccountingStorageType", "accounting_storage/none")
	add("JobAcctGatherType", "jobacct_gather/none")
	add("JobCompType", "jobcomp/none")
	add("SlurmdParameters", DefaultSlurmdParameters)
	if l.topology {
		add("TopologyPlugin", "topology/tree")
	}
	var tail []string // extra NodeName/PartitionName lines, after the defaults
	for _, x := range l.extra {
		k := confKey(x)
		if k == "nodename" || k == "partitionname" {
			tail = append(tail, x)
			continue
		}
		replaced := false
		if k != "" {
			for i := range e {
				if strings.EqualFold(e[i].key, k) {
					e[i].line, replaced = x, true
					break
				}
			}
		}
		if !replaced {
			e = append(e, confEntry{k, x})
		}
	}
	var b strings.Builder
	b.WriteString("# Generated by test/harness for one throw-away test cluster.\n")
	for _, x := range e {
		b.WriteString(x.line)
		b.WriteByte('\n')
	}
	for i, port := range l.nodePorts {
		fmt.Fprintf(&b, "NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=%d Boards=1 SocketsPerBoard=%d CoresPerSocket=%d ThreadsPerCore=1 RealMemory=%d Gres=gpu:%s%d State=UNKNOWN\n",
			l.nodeName(i), l.host, port, socketsPerNode*coresPerSocket, socketsPerNode, coresPerSocket, nodeMemoryMB, l.gresType(i, ":"), l.gpus)
	}
	parts := l.partitions
	switch {
	case parts != nil:
	case l.hetero:
		parts = l.heteroPartitions()
	default:
		parts = l.defaultPartitions()
	}
	for _, p := range append(parts, tail...) {
		b.WriteString(p)
		b.WriteByte('\n')
	}
	return b.String()
}

// NodeList is the hostlist expression of all nodes, e.g. "n[1-4]".
func (l *layout) nodeList() string {
	if len(l.nodePorts) == 1 {
		return "n1"
	}
	return fmt.Sprintf("n[1-%d]", len(l.nodePorts))
}

func (l *layout) defaultPartitions() []string {
	nodes := l.nodeList()
	return []string{
		fmt.Sprintf("PartitionName=%s Nodes=%s Default=YES PriorityTier=1 GraceTime=%d MaxTime=UNLIMITED State=UP", LowPartition, nodes, DefaultGraceTime),
		fmt.Sprintf("PartitionName=%s Nodes=%s PriorityTier=10 MaxTime=UNLIMITED State=UP", HighPartition, nodes),
	}
}

// Partition names and GRES types of the heterogeneous mode
// (Options.Heterogeneous): the first half of the nodes are "hopper" with
// gpu:h100, the rest "ampere" with gpu:a100.
const (
	HopperPartition = "hopper"
	AmperePartition = "ampere"
	HopperGresType  = "h100"
	AmpereGresType  = "a100"
)

// gresType is node i's GRES type followed by sep ("" when untyped, the
// default mode).
func (l *layout) gresType(i int, sep string) string {
	if i < len(l.gresTypes) && l.gresTypes[i] != "" {
		return l.gresTypes[i] + sep
	}
	if !l.hetero {
		return ""
	}
	if i < l.hopperNodes() {
		return HopperGresType + sep
	}
	return AmpereGresType + sep
}

// hopperNodes is how many of the nodes are in the hopper partition: half,
// and at least one.
func (l *layout) hopperNodes() int { return max(1, len(l.nodePorts)/2) }

// heteroPartitions are hopper (the first half of the nodes, default) and
// ampere (the rest). Neither preempts the other.
func (l *layout) heteroPartitions() []string {
	h := l.hopperNodes()
	return []string{
		fmt.Sprintf("PartitionName=%s Nodes=%s Default=YES MaxTime=UNLIMITED State=UP", HopperPartition, nodeRange(1, h)),
		fmt.Sprintf("PartitionName=%s Nodes=%s MaxTime=UNLIMITED State=UP", AmperePartition, nodeRange(h+1, len(l.nodePorts))),
	}
}

func nodeRange(lo, hi int) string {
	if lo == hi {
		return fmt.Sprintf("n%d", lo)
	}
	return fmt.Sprintf("n[%d-%d]", lo, hi)
}

// gresConf names each node's fake GPU devices: 0..gpus/2-1 near socket 0,
// the rest near socket 1, as on a two-socket 8-GPU server.
func (l *layout) gresConf() string {
	var b strings.Builder
	b.WriteString("# Generated by test/harness: fake GPUs are character devices (major 195).\nAutoDetect=off\n")
	half := l.gpus / 2
	for i := range l.nodePorts {
		n := l.nodeName(i)
		typ := ""
		if t := l.gresType(i, ""); t != "" {
			typ = " Type=" + t
		}
		if half == 0 {
			fmt.Fprintf(&b, "NodeName=%s Name=gpu%s File=%s\n", n, typ, l.gpuDevice(n, 0))
			continue
		}
		fmt.Fprintf(&b, "NodeName=%s Name=gpu%s File=%s Cores=0-%d\n", n, typ, devRange(l.devDir(n), 0, half-1), coresPerSocket-1)
		fmt.Fprintf(&b, "NodeName=%s Name=gpu%s File=%s Cores=%d-%d\n", n, typ, devRange(l.devDir(n), half, l.gpus-1), coresPerSocket, 2*coresPerSocket-1)
	}
	return b.String()
}

func devRange(dir string, lo, hi int) string {
	if lo == hi {
		return filepath.Join(dir, fmt.Sprintf("nvidia%d", lo))
	}
	return filepath.Join(dir, fmt.Sprintf("nvidia[%d-%d]", lo, hi))
}

// confKey is the lower-cased key of a slurm.conf line ("" for blank lines and
// comments).
func confKey(line string) string {
	s := strings.TrimSpace(line)
	if s == "" || strings.HasPrefix(s, "#") {
		return ""
	}
	k, _, _ := strings.Cut(s, "=")
	return strings.ToLower(strings.TrimSpace(k))
}
