package obs

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every group has its job counts; only one with trainrun jobs a slowdown.
func TestQueueRegistryExposition(t *testing.T) {
	reg := QueueRegistry([]QueueGroup{
		{User: "ada", Account: "vision", Running: 1, Pending: 2, Marked: 3, MeanSlow: 1.5, MaxSlow: 2.25},
		{User: "bob", Account: "(null)", Pending: 1},
	})
	want := `# HELP trainrun_queue_jobs Jobs in the queue of the user and account, running or pending, as 'trainrun partitions --queue' found them.
# TYPE trainrun_queue_jobs gauge
trainrun_queue_jobs{account="(null)",state="pending",user="bob"} 1
trainrun_queue_jobs{account="(null)",state="running",user="bob"} 0
trainrun_queue_jobs{account="vision",state="pending",user="ada"} 2
trainrun_queue_jobs{account="vision",state="running",user="ada"} 1
# HELP trainrun_queue_slowdown_max_ratio Largest slowdown so far of the user and account's queued trainrun jobs.
# TYPE trainrun_queue_slowdown_max_ratio gauge
trainrun_queue_slowdown_max_ratio{account="vision",user="ada"} 2.25
# HELP trainrun_queue_slowdown_mean_ratio Mean slowdown so far (completion time over training time alone; at least 1) of the user and account's queued trainrun jobs.
# TYPE trainrun_queue_slowdown_mean_ratio gauge
trainrun_queue_slowdown_mean_ratio{account="vision",user="ada"} 1.5
# HELP trainrun_queue_trainrun_jobs Of the user and account's queued jobs, those trainrun submitted (whose slowdown is known).
# TYPE trainrun_queue_trainrun_jobs gauge
trainrun_queue_trainrun_jobs{account="(null)",user="bob"} 0
trainrun_queue_trainrun_jobs{account="vision",user="ada"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
