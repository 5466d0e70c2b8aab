package topo

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/trainrun/trainrun/topo/snapshot"
)

// The mutation test (issue 14): seeded random damage to every built-in
// capture (files and symlinks removed, path components renamed, unknown
// attributes added, files truncated or emptied); discovery must return
// without error or panic for every mutation and keep every GPU whose own
// directory survived. `go test` runs -mutations trials per machine; `make
// fuzz` runs FuzzDiscoverMutations for thousands more.
var mutationsPerMachine = flag.Int("mutations", 30, "trials per built-in machine in TestDiscoverSurvivesMutations (each one to two mutations)")

// mutator damages a captured tree and undoes the damage.
type mutator struct {
	root  string
	files []string // regular files, relative to root
	hot   []string // the files GPUs, NICs, NVML and addresses are read from
	links []string // symlinks
	dirs  []string // directories strictly below sys/devices
	gpus  []string // the GPUs' directories, relative to root
	gpu   int      // the GPU this trial damages (identity mutations)
	undo  []func() error
	did   []string
}

var (
	mutatorsMu sync.Mutex
	mutators   = map[string]*mutator{}
)

// treeMutator returns the machine's shared tree (see machineTree) ready to
// damage. Callers hold mutatorsMu for the whole trial, and undo before
// releasing it.
func treeMutator(tb testing.TB, name string) *mutator {
	if m, ok := mutators[name]; ok {
		return m
	}
	m := &mutator{root: machineTree(tb, name)}
	devs := filepath.Join("sys", "devices")
	err := filepath.WalkDir(m.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(m.root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			m.links = append(m.links, rel)
		case d.IsDir():
			if strings.HasPrefix(rel, devs+string(filepath.Separator)) {
				m.dirs = append(m.dirs, rel)
			}
		default:
			m.files = append(m.files, rel)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	// Half the damage goes to the files that matter most, so that two
	// mutations of one trial often hit the same GPU or NIC.
	var keys []string
	for _, b := range gpuBusIDs(discoverMachine(tb, name)) {
		if real, err := filepath.EvalSymlinks(filepath.Join(m.root, "sys/bus/pci/devices", b)); err == nil {
			rel, _ := filepath.Rel(m.root, real)
			m.gpus = append(m.gpus, rel)
		}
		keys = append(keys, string(filepath.Separator)+b+string(filepath.Separator))
	}
	keys = append(keys, "infiniband", "nvml.json", "proc/net", "system/node", "etc/")
	for _, f := range m.files {
		for _, k := range keys {
			if strings.Contains(f, k) {
				m.hot = append(m.hot, f)
				break
			}
		}
	}
	mutators[name] = m
	return m
}

func (m *mutator) abs(rel string) string { return filepath.Join(m.root, rel) }

// restoreFile puts back a file's content and mode.
func restoreFile(p string, b []byte, mode fs.FileMode) func() error {
	return func() error {
		os.Remove(p)
		return os.WriteFile(p, b, mode.Perm())
	}
}

// mutate applies one random mutation; it returns false when the chosen
// target no longer exists (an earlier mutation of the trial moved it).
func (m *mutator) mutate(r *rand.Rand) bool {
	k := r.IntN(9)
	if k >= 6 && len(m.gpus) == 0 {
		k = 0
	}
	switch k {
	case 0, 4, 5, 6, 7, 8: // remove, truncate or empty a file
		pool := m.files
		if len(m.hot) > 0 && r.IntN(2) == 0 {
			pool = m.hot
		}
		rel := pool[r.IntN(len(pool))]
		if k >= 6 { // one of what identifies this trial's GPU
			rel = filepath.Join(m.gpus[m.gpu], []string{"class", "vendor", "device", "driver"}[r.IntN(4)])
			k = []int{0, 0, 4, 5}[r.IntN(4)]
			if strings.HasSuffix(rel, "driver") {
				return m.removeLink(rel)
			}
		}
		p := m.abs(rel)
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() {
			return false
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return false
		}
		m.undo = append(m.undo, restoreFile(p, b, st.Mode()))
		os.Remove(p)
		switch k {
		case 0:
			m.did = append(m.did, "remove "+rel)
		case 4:
			cut := 0
			if len(b) > 1 {
				cut = 1 + r.IntN(len(b)-1)
			}
			m.did = append(m.did, fmt.Sprintf("truncate %s to %d bytes", rel, cut))
			return os.WriteFile(p, b[:cut], 0o644) == nil
		case 5:
			m.did = append(m.did, "empty "+rel)
			return os.WriteFile(p, nil, 0o644) == nil
		}
	case 1:
		return m.removeLink(m.links[r.IntN(len(m.links))])
	case 2:
		return m.rename(r)
	case 3: // an attribute discovery has never seen
		dirs := m.dirs
		rel := filepath.Join(dirs[r.IntN(len(dirs))], fmt.Sprintf("unknown_attr_%d", r.IntN(1000)))
		p := m.abs(rel)
		if _, err := os.Lstat(filepath.Dir(p)); err != nil {
			return false
		}
		if _, err := os.Lstat(p); err == nil {
			return false
		}
		if os.WriteFile(p, []byte("0xzz garbage\x00\n"), 0o444) != nil {
			return false
		}
		m.undo = append(m.undo, func() error { return os.Remove(p) })
		m.did = append(m.did, "add "+rel)
	}
	return true
}

func (m *mutator) removeLink(rel string) bool {
	p := m.abs(rel)
	t, err := os.Readlink(p)
	if err != nil {
		return false
	}
	os.Remove(p)
	m.undo = append(m.undo, func() error { return os.Symlink(t, p) })
	m.did = append(m.did, "remove link "+rel)
	return true
}

var renames = []string{"VMBUS:00", "renamed", "pci_bus", "virtio7", "LNXSYBUS:01", "0000:ff:1f.7", "pciffff:ff"}

// rename renames one directory below sys/devices and repoints every symlink
// that led through it, as if the kernel had named it so: an unexpected path
// shape, not a broken tree.
func (m *mutator) rename(r *rand.Rand) bool {
	rel := m.dirs[r.IntN(len(m.dirs))]
	old := m.abs(rel)
	nu := filepath.Join(filepath.Dir(old), renames[r.IntN(len(renames))])
	if _, err := os.Lstat(old); err != nil {
		return false
	}
	if _, err := os.Lstat(nu); err == nil {
		return false
	}
	if os.Rename(old, nu) != nil {
		return false
	}
	m.undo = append(m.undo, func() error { return os.Rename(nu, old) })
	move := func(p string) string {
		if p == old || strings.HasPrefix(p, old+string(filepath.Separator)) {
			return nu + strings.TrimPrefix(p, old)
		}
		return p
	}
	for _, l := range m.links {
		was := m.abs(l)
		now := move(was)
		t, err := os.Readlink(now)
		if err != nil {
			continue
		}
		target := move(filepath.Join(filepath.Dir(was), t))
		nt, err := filepath.Rel(filepath.Dir(now), target)
		if err != nil || nt == t {
			continue
		}
		os.Remove(now)
		if os.Symlink(nt, now) != nil {
			continue
		}
		m.undo = append(m.undo, func() error {
			os.Remove(now)
			return os.Symlink(t, now)
		})
	}
	m.did = append(m.did, fmt.Sprintf("rename %s to %s", rel, filepath.Base(nu)))
	return true
}

func (m *mutator) restore(tb testing.TB) {
	for i := len(m.undo) - 1; i >= 0; i-- {
		if err := m.undo[i](); err != nil {
			tb.Fatalf("undo after %v: %v", m.did, err)
		}
	}
	m.undo, m.did = nil, nil
}

// survivingGPUs lists the GPUs of the undamaged node whose own directory
// still resolves from sys/bus/pci/devices.
func survivingGPUs(root string, busIDs []string) []string {
	var out []string
	for _, b := range busIDs {
		if isDir(filepath.Join(root, "sys/bus/pci/devices", b)) {
			out = append(out, b)
		}
	}
	return out
}

// mutationTrial damages machine name with seed, discovers it, checks the
// outcome and undoes the damage.
func mutationTrial(t *testing.T, name string, seed uint64, want []string) {
	m := treeMutator(t, name)
	r := rand.New(rand.NewPCG(seed, 0x14))
	if len(m.gpus) > 0 {
		m.gpu = r.IntN(len(m.gpus))
	}
	for k, done := 1+r.IntN(2), 0; done < k; {
		if m.mutate(r) {
			done++
		}
	}
	defer m.restore(t)
	if os.Getenv("TOPO_MUTATION_LOG") != "" {
		t.Logf("%s seed %d: %v", name, seed, m.did)
	}
	var n *Node
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("%s seed %d %v: panic: %v", name, seed, m.did, p)
			}
		}()
		n, err = Discover(Options{Root: m.root})
	}()
	if err != nil {
		t.Fatalf("%s seed %d %v: %v", name, seed, m.did, err)
	}
	for _, b := range survivingGPUs(m.root, want) {
		// Kept from sysfs, not only as NVML's bus id: its directory is there.
		if g := n.GPUByBusID(b); g == nil || g.HostBridge == "" {
			t.Errorf("%s seed %d %v: GPU %s lost or without its sysfs facts (degraded: %+v)", name, seed, m.did, b, n.DegradedFor(b))
		}
	}
	if _, err := json.Marshal(n); err != nil {
		t.Errorf("%s seed %d %v: node does not marshal: %v", name, seed, m.did, err)
	}
}

func gpuBusIDs(n *Node) []string {
	var out []string
	for _, g := range n.GPUs {
		out = append(out, g.BusID)
	}
	return out
}

func rootJSON(t testing.TB, root string) string {
	n, err := Discover(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(n)
	return string(b)
}

func TestDiscoverSurvivesMutations(t *testing.T) {
	mutatorsMu.Lock()
	defer mutatorsMu.Unlock()
	total := 0
	for mi, name := range snapshot.Names() {
		m := treeMutator(t, name)
		before := rootJSON(t, m.root)
		want := gpuBusIDs(discoverMachine(t, name))
		for i := 0; i < *mutationsPerMachine; i++ {
			mutationTrial(t, name, uint64(mi)<<32|uint64(i), want)
			total++
		}
		// The shared tree is exactly as before: other tests read it.
		if after := rootJSON(t, m.root); after != before {
			t.Fatalf("%s: the tree differs after undoing the mutations", name)
		}
	}
	t.Logf("%d mutation trials over %d machines", total, len(snapshot.Names()))
}

// FuzzDiscoverMutations runs the mutation trial on fuzzer-chosen seeds
// (make fuzz).
func FuzzDiscoverMutations(f *testing.F) {
	for i := 0; i < 4; i++ {
		f.Add(uint64(i), uint8(i))
	}
	f.Fuzz(func(t *testing.T, seed uint64, machine uint8) {
		names := snapshot.Names()
		name := names[int(machine)%len(names)]
		mutatorsMu.Lock()
		defer mutatorsMu.Unlock()
		mutationTrial(t, name, seed, gpuBusIDs(discoverMachine(t, name)))
	})
}
