package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/snapshot"
)

// A node whose facts are partly unreadable (issue 14): the NCCL decisions
// that need a missing fact fall back to NCCL's own detection with the
// reason, and the bootstrap interface is found without fib_trie through the
// route table.
func TestRankEnvDegradedNode(t *testing.T) {
	dir := t.TempDir()
	if err := snapshot.Unpack("hgx-h200-roce", dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"proc/net/fib_trie", "sys/class/infiniband/mlx5_3/ports/1/link_layer"} {
		if err := os.Remove(filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := topo.Discover(topo.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	e := envFor(t, n, EnvInput{NodeAddrs: []string{"10.10.0.31"}})
	hca := e.Var("NCCL_IB_HCA")
	if hca == nil || hca.Inject || !strings.Contains(hca.Why, "mlx5_3 port 1") || !strings.Contains(hca.Why, "left to NCCL") {
		t.Errorf("NCCL_IB_HCA %+v", hca)
	}
	sock := e.Var("NCCL_SOCKET_IFNAME")
	if sock == nil || sock.Value != "=eno1" || !strings.Contains(sock.Why, "directly attached subnet 10.10.0.0/16") {
		t.Errorf("NCCL_SOCKET_IFNAME %+v", sock)
	}
}
