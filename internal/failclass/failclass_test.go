package failclass

import (
	"strings"
	"testing"
)

func lines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

// Messages as PyTorch 2.x, NCCL, gloo, the driver and CPython print them.
func TestClassify(t *testing.T) {
	cases := []struct {
		name     string
		e        Evidence
		want     Class
		evidence string // a substring of Result.Evidence
	}{
		{"cuda oom", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "/opt/train.py", line 88, in <module>
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.2 GiB is free.`)}, OOM, "torch.OutOfMemoryError"},
		{"cuda oom old name", Evidence{Code: 1, Tail: lines(`RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity)`)}, OOM, "CUDA out of memory"},
		{"host oom kill", Evidence{Code: 137, OOMKill: true}, OOM, "oom_kill"},
		{"host oom kill beats a gloo echo", Evidence{Code: 137, OOMKill: true, Tail: lines(`RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer`)}, OOM, "oom_kill"},
		{"sigkill without evidence", Evidence{Code: 137}, Signal, "signal 9"},
		{"watchdog", Evidence{Code: 134, Tail: lines(`
[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1843, OpType=ALLREDUCE, NumelIn=1048576, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.
[rank3]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 3] Process group watchdog thread terminated with exception
terminate called after throwing an instance of 'c10::DistBackendError'`)}, NCCL, "Watchdog caught collective operation timeout"},
		{"nccl system error", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "train.py", line 12, in <module>
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5`)}, NCCL, "unhandled system error"},
		{"nccl error beats an echo", Evidence{Code: 1, Tail: lines(`
RuntimeError: Connection reset by peer
torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error`)}, NCCL, "unhandled system error"},
		{"gloo peer gone", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "train_example.py", line 260, in main
RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:43581`)}, NCCL, "Connection closed by peer"},
		{"rendezvous port taken", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 754, in init_process_group
    store, rank, world_size = next(rendezvous_iterator)
RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:23532 (errno: 98 - Address already in use).`)}, NCCL, "failed to listen"},
		{"a user error raised inside torch.distributed restarts", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 1200, in all_reduce
ValueError: Invalid function argument`)}, NCCL, "torch/distributed/"},
		{"a failing file system is no user error", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "/opt/train.py", line 51, in load_shard
OSError: [Errno 5] Input/output error: '/lustre/data/shard-0042.bin'`)}, Unknown, "Input/output error"},
		{"an interrupt is a signal", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "/opt/train.py", line 12, in <module>
KeyboardInterrupt`)}, Signal, "KeyboardInterrupt"},
		{"an illegal memory access restarts", Evidence{Code: 1, Tail: lines(`
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call`)}, Unknown, "illegal memory access"},
		{"xid", Evidence{Code: 1, Tail: lines(`
NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.
RuntimeError: CUDA error: unspecified launch failure`)}, Hardware, "Xid"},
		{"ecc", Evidence{Code: 1, Tail: lines(`RuntimeError: CUDA error: uncorrectable ECC error encountered`)}, Hardware, "ECC"},
		{"xid beats the oom it causes", Evidence{Code: 1, Tail: lines(`
torch.OutOfMemoryError: CUDA out of memory.
NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error`)}, Hardware, "Xid"},
		{"value error", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "/opt/train.py", line 40, in <module>
    main()
  File "/opt/train.py", line 31, in main
    raise ValueError("bad learning rate schedule: warmup 0")
ValueError: bad learning rate schedule: warmup 0`)}, User, "ValueError: bad learning rate schedule"},
		{"value error mentioning memory in code", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "/opt/memory_planner.py", line 3, in <module>
KeyError: 'layers'`)}, User, "KeyError: 'layers'"},
		{"import error", Evidence{Code: 1, Tail: lines(`
Traceback (most recent call last):
  File "train.py", line 1, in <module>
    import megatron
ModuleNotFoundError: No module named 'megatron'`)}, User, "ModuleNotFoundError"},
		{"command not found", Evidence{Code: 127, Tail: lines(`bash: line 1: pythn: command not found`)}, User, "command not found"},
		{"exit 127 silent", Evidence{Code: 127}, User, "not found"},
		{"argparse", Evidence{Code: 2, Tail: lines(`
usage: train.py [-h] [--steps STEPS]
train.py: error: unrecognized arguments: --stepz 10`)}, User, "unrecognized arguments"},
		{"sigterm", Evidence{Code: 143}, Signal, "signal 15"},
		{"exit 1 silent", Evidence{Code: 1, Tail: lines(`step 10 loss 0.3`)}, Unknown, "exit 1"},
		{"success", Evidence{Code: 0, Tail: lines(`torch.OutOfMemoryError: CUDA out of memory.`)}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.e)
			if got.Class != tc.want || !strings.Contains(got.Evidence, tc.evidence) || got.Echo != (tc.name == "gloo peer gone" || tc.name == "rendezvous port taken" || strings.Contains(tc.name, "inside torch.distributed")) {
				t.Errorf("Classify = %+v, want class %q with evidence containing %q", got, tc.want, tc.evidence)
			}
		})
	}
}

// Each pattern classifies a line holding it: a pattern made unreachable
// (shadowed, misspelt class) fails here.
func TestEveryPatternClassifies(t *testing.T) {
	for _, p := range patterns {
		text, _ := strings.CutPrefix(p.text, echoPrefix)
		l := "x " + text + " y"
		if p.fold {
			l = "x " + strings.ToUpper(text) + " y"
		}
		if got, _ := lineClass(l); got != p.class {
			t.Errorf("line %q: class %q, want %q", l, got, p.class)
		}
	}
}

func TestStep(t *testing.T) {
	echo := Rank{0, Result{NCCL, "Connection closed by peer", true}}
	nccl := Rank{5, Result{Class: NCCL, Evidence: "Watchdog caught collective operation timeout"}}
	oom := Rank{3, Result{Class: OOM, Evidence: "CUDA out of memory"}}
	user := Rank{1, Result{Class: User, Evidence: "ValueError: x"}}
	sig := Rank{2, Result{Class: Signal, Evidence: "exit 137"}}
	cases := []struct {
		name   string
		first  *Rank
		others []Rank
		lost   string
		want   Class
		who    int
	}{
		{"first's class", &user, []Rank{echo, sig}, "", User, 1},
		{"oom behind a peer's nccl error", &nccl, []Rank{echo, oom}, "", OOM, 3},
		{"a killed rank behind its peer's echo", &echo, []Rank{echo, sig, user}, "", Signal, 2},
		{"a user error behind its peer's echo", &echo, []Rank{user}, "", User, 1},
		{"echoes only", &echo, []Rank{echo}, "", NCCL, 0},
		{"a real nccl error first", &nccl, []Rank{sig}, "", NCCL, 5},
		{"oom behind a signal", &sig, []Rank{oom}, "", OOM, 3},
		{"a user error is not overridden by an oom echo", &user, []Rank{oom}, "", User, 1},
		{"lost node", &sig, []Rank{oom}, "n2", Hardware, -1},
		{"nothing", nil, nil, "", "", -1},
		{"no class reported", &Rank{Rank: 4}, nil, "", Unknown, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, who := Step(tc.first, tc.others, tc.lost)
			if got.Class != tc.want || who != tc.who {
				t.Errorf("Step = %+v from rank %d, want %q from rank %d", got, who, tc.want, tc.who)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy("")
	if err != nil || p.String() != DefaultPolicy {
		t.Fatalf("default: %v %v, want %s", p, err, DefaultPolicy)
	}
	p, err = ParsePolicy(" OOM=restart , nccl=restart")
	if err != nil || p.Of(OOM) != Restart || p.Of(NCCL) != Restart || p.Of(User) != Stop || p.Of(Hardware) != Exclude {
		t.Fatalf("override: %v %v", p, err)
	}
	for _, bad := range []string{"disk=stop", "oom", "oom=retry", "=stop"} {
		if _, err := ParsePolicy(bad); err == nil || !strings.Contains(err.Error(), "RestartOn") {
			t.Errorf("ParsePolicy(%q) = %v, want an error naming RestartOn", bad, err)
		}
	}
}

func TestTail(t *testing.T) {
	tl := &Tail{Lines: 3, Bytes: 20}
	for _, w := range []string{"one\ntwo\n", "thr", "ee\nfour\nfive", "\r\n", "a-line-longer-than-twenty-bytes\n", "part"} {
		tl.Write([]byte(w))
	}
	got := strings.Join(tl.Text(), "|")
	if want := "er-than-twenty-bytes|part"; got != want {
		t.Errorf("tail %q, want %q", got, want)
	}
	tl = NewTail()
	for i := 0; i < 1000; i++ {
		tl.Write([]byte("line\n"))
	}
	if n := len(tl.Text()); n != TailLines {
		t.Errorf("%d lines kept, want %d", n, TailLines)
	}
}

// Classify never panics, names a valid class for every failure, and keeps
// its evidence one bounded line.
func FuzzClassify(f *testing.F) {
	f.Add(1, "torch.OutOfMemoryError: CUDA out of memory.\nx", false)
	f.Add(137, "", true)
	f.Add(134, "Watchdog caught collective operation timeout", false)
	f.Add(1, "Traceback (most recent call last):\nValueError: é", false)
	f.Fuzz(func(t *testing.T, code int, text string, oom bool) {
		r := Classify(Evidence{Code: code, Tail: strings.Split(text, "\n"), OOMKill: oom})
		if code == 0 {
			if r.Class != "" {
				t.Fatalf("exit 0 classified %+v", r)
			}
			return
		}
		if !Valid(r.Class) || len(r.Evidence) > MaxEvidence || strings.ContainsAny(r.Evidence, "\n\r") {
			t.Fatalf("Classify(%d, %q) = %+v", code, text, r)
		}
		tl := &Tail{Lines: 4, Bytes: 64}
		tl.Write([]byte(text))
		size := 0
		for _, l := range tl.Text() {
			size += len(l)
		}
		if len(tl.Text()) > 5 || size > 2*64 {
			t.Fatalf("tail of %q kept %d lines, %d bytes", text, len(tl.Text()), size)
		}
	})
}

func TestFromWire(t *testing.T) {
	if r := FromWire("nccl", "RuntimeError: Connection closed by peer"); !r.Echo {
		t.Errorf("echo lost: %+v", r)
	}
	if r := FromWire("nccl", "Watchdog caught collective operation timeout"); r.Echo {
		t.Errorf("not an echo: %+v", r)
	}
	if r := FromWire("disk", "x"); r.Class != Unknown {
		t.Errorf("bad class kept: %+v", r)
	}
}
