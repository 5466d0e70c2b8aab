//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
)

// ckptBenchTrainer is a trainer that speaks the handshake and nothing else:
// it waits for the checkpoint signal, saves one file of $SRC per rank (into
// TRAINRUN_CKPT_LOCAL_DIR when tiered, else TRAINRUN_CKPT_DIR) with fsync,
// marks done, records when its save started and ended, and exits 0.
const ckptBenchTrainer = `#!/bin/bash
trap 'req=1' USR2 TERM
req=0
: > "$ROUND/ready.$RANK"
while [ $req = 0 ]; do sleep 0.02 & wait $!; done
t0=$(date +%s%N)
d=${TRAINRUN_CKPT_LOCAL_DIR:-$TRAINRUN_CKPT_DIR}/step-1
mkdir -p "$d/.trainrun"
dd if="$SRC" of="$d/rank-$RANK.pt" bs=4M conv=fsync status=none
: > "$d/.trainrun/done.$RANK"
sync "$d/.trainrun/done.$RANK" "$d/.trainrun" "$d"
echo "$t0 $(date +%s%N)" > "$ROUND/save.$RANK"
exit 0
`

// BenchmarkCkptSignalToCommit measures, on 2 nodes × 1 rank saving 64 MiB
// each, the time from the checkpoint signal (SIGUSR1 to trainrun, as
// #SBATCH --signal=B:USR1 delivers it) to the committed checkpoint (its
// manifest's mtime), minus the trainer's own save time (first rank's start
// to last rank's done marker): what trainrun adds to a checkpoint (signal
// relay, the trainers' exit, the step's end, verification and the durable
// commit; with --ckpt-local-dir also the drain). Direct and tiered saves
// alternate in one allocation, b.N rounds each; medians are reported.
//
//	go test -tags e2e -run '^$' -bench CkptSignalToCommit -benchtime 5x ./test/e2e/
func BenchmarkCkptSignalToCommit(b *testing.B) {
	bin := trainrun(b)
	// One allocation whatever b.N: b.N rounds of each (at least 3), so
	// that make bench's -benchtime 10x is one job of 10 rounds.
	rounds := max(b.N, 3)
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	buf := make([]byte, 64<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(buf); i += 8 {
		v := r.Uint64()
		for k := 0; k < 8; k++ {
			buf[i+k] = byte(v >> (8 * k))
		}
	}
	if err := os.WriteFile(src, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	trainer := filepath.Join(dir, "trainer.sh")
	if err := os.WriteFile(trainer, []byte(ckptBenchTrainer), 0o755); err != nil {
		b.Fatal(err)
	}
	{
		base := filepath.Join(dir, "rounds")
		var sb strings.Builder
		fmt.Fprintf(&sb, "#!/bin/bash\n#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=10 --no-requeue\nexport SRC=%s\n", src)
		for k := 0; k < rounds; k++ {
			for _, m := range []string{"direct", "tiered"} {
				round := fmt.Sprintf("%s/%s%d", base, m, k)
				flags := ""
				if m == "tiered" {
					flags = "--ckpt-local-dir " + round + "/local-%n"
				}
				fmt.Fprintf(&sb, `mkdir -p %[1]s; export ROUND=%[1]s TRAINRUN_JOB_DIR=%[1]s/job
%[2]s run --probe none --fix tp=1 %[3]s -- %[4]s >%[1]s/log 2>&1 &
pid=$!
while [ "$(ls %[1]s/ready.* 2>/dev/null | wc -l)" -lt 2 ]; do sleep 0.02; done
sleep 0.3
date +%%s%%N > %[1]s/sig; kill -USR1 $pid
wait $pid
`, round, bin, flags, trainer)
			}
		}
		// Each run stops after its checkpoint (exit 5, not requeueable).
		sb.WriteString("exit 0\n")
		state, _, out, id := runJob(b, sb.String(), 5*time.Minute)
		if state != "COMPLETED" {
			b.Fatalf("job %d: %s\n%s", id, state, out)
		}
		over := map[string][]float64{}
		total := map[string][]float64{}
		save := map[string][]float64{}
		for k := 0; k < rounds; k++ {
			for _, m := range []string{"direct", "tiered"} {
				round := fmt.Sprintf("%s/%s%d", base, m, k)
				log, _ := os.ReadFile(round + "/log")
				sig := readNanos(b, round+"/sig", log)
				first, last := int64(1<<62), int64(0)
				for rank := 0; rank < 2; rank++ {
					f, err := os.ReadFile(fmt.Sprintf("%s/save.%d", round, rank))
					if err != nil {
						b.Fatalf("%s rank %d recorded no save: %v\n%s", round, rank, err, log)
					}
					var t0, t1 int64
					fmt.Sscan(string(f), &t0, &t1)
					first, last = min(first, t0), max(last, t1)
				}
				fi, err := os.Stat(checkpoint.ManifestPath(filepath.Join(round, "job", "checkpoints", "step-1")))
				if err != nil {
					b.Fatalf("%s: no committed checkpoint: %v\n%s", round, err, log)
				}
				commit := fi.ModTime().UnixNano()
				saveS := float64(last-first) / 1e9
				totalS := float64(commit-sig) / 1e9
				save[m] = append(save[m], saveS)
				total[m] = append(total[m], totalS)
				over[m] = append(over[m], totalS-saveS)
			}
		}
		med := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
		for _, m := range []string{"direct", "tiered"} {
			b.ReportMetric(med(over[m])*1000, m+"-overhead-ms")
			b.ReportMetric(med(save[m])*1000, m+"-save-ms")
			b.ReportMetric(med(total[m])*1000, m+"-signal-to-commit-ms")
		}
	}
}

func readNanos(b *testing.B, p string, log []byte) int64 {
	f, err := os.ReadFile(p)
	if err != nil {
		b.Fatalf("%s: %v\n%s", p, err, log)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(f)), 10, 64)
	if err != nil {
		b.Fatalf("%s: %v", p, err)
	}
	return n
}
