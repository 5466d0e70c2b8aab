# trainrun — build, test, install. `make help` lists the targets.
GO      ?= go
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
DATADIR ?= $(PREFIX)/share
DESTDIR ?=
export GOFLAGS ?= -mod=mod
export CGO_ENABLED ?= 1
# go-nvml's header marks calls NVML 13 deprecated; we call none of them, and the
# warnings buried real output in every fresh build.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

BIN := bin/trainrun
# Debian's python3 has python3-torch (make deps); the first python3 on PATH
# may be another one without it, where the client's torch tests would skip.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)

# The SPANK plugin, in two halves (spank/golib/abi.h says why): the C
# plugin Slurm loads (spank/plugin) and the Go library it dlopen()s from its
# own directory where Go is needed (spank/golib, -buildmode=c-shared). Built
# when Slurm's spank.h is installed (Debian: libslurm-dev); rebuild it for
# every Slurm release deployed (Slurm checks plugin_version).
CC          ?= cc
SPANK       ?= bin/spank_trainrun.so
SPANK_GO    ?= $(dir $(SPANK))libtrainrun-spank.so
SPANK_H     ?= /usr/include/slurm/spank.h
SPANKDIR    ?= $(LIBDIR)/slurm
SYSCONFDIR  ?= /etc
SPANK_CFLAGS ?= -O2 -g -Wall -Wextra -Wno-unused-parameter -Werror -fPIC
SPANK_GO_LDFLAGS := -extldflags=-Wl,--version-script=$(CURDIR)/spank/golib/golib.map

.PHONY: all help build spank deps test test-unit test-hermetic test-e2e chaos bench bench-scale bench-sched lint install clean demo fuzz check-frameworks check-peft

all: build

help:
	@echo "build      build bin/trainrun, bin/trainrun-shim, bin/spank_trainrun.so and bin/libtrainrun-spank.so (the SPANK plugin)"
	@echo "deps       install what the tests need (Debian packages; root)"
	@echo "test       deps + lint + unit tests + end-to-end tests on a local Slurm"
	@echo "test-unit  go test ./... (hermetic: no Slurm command may run)"
	@echo "test-hermetic  unit tests with Slurm's commands replaced by failing recorders: none may be run"
	@echo "check-frameworks  MEGATRON=DIR [MEGATRON_CHECK=DIR]: Megatron-LM's own argument checks on every preset and 45 layouts (skipped without); TORCHTITAN=DIR [TORCHTITAN_PYTHONPATH=DIR]: torchtitan's config parsing of --format torchtitan"
	@echo "check-peft PEFT=DIR: Hugging Face PEFT's own config classes load --format peft for every fine-tuning kind (a huggingface/peft tree; not in CI); ACCELERATE=DIR TRL=DIR TRANSFORMERS=DIR: its accelerate/FSDP, SFTConfig, TrainingArguments and BitsAndBytesConfig settings against those trees' classes"
	@echo "test-e2e   end-to-end suite against a real local Slurm (root); E2E_FLAGS='-run X' narrows it"
	@echo "chaos      one run with six random faults (seeded; TRAINRUN_CHAOS_SEED=N repeats), bit-identical weights, its goodput; CHAOS_SEEDS=N: N seeds, pass rate and goodput spread"
	@echo "bench      benchmarks, printed as figures and side-by-side ratios"
	@echo "bench-sched  two traces of training jobs (24 on 2 partitions, 30 on 3) replayed on typed-GPU test clusters under each policy (trainrun submit, Slurm's -p list, a perfect router): mean JCT, p90 slowdown, with sizing, learning and migration on and off (about 105 minutes; TRAINRUN_BENCH_TRACES=1,2 and TRAINRUN_BENCH_POLICIES=a,b narrow it)"
	@echo "bench-scale  1k, 4k and 16k simulated ranks against the controller's channel, launch files and commit, with history, report and plan at size (minutes; TRAINRUN_SCALE_N=1024,4096 narrows it)"
	@echo "fuzz       every Fuzz target of the module, FUZZTIME (60s) each; FUZZPKGS=./topo/... narrows it"
	@echo "lint       gofmt, go vet, staticcheck and a dead-code check (both pinned below, fetched by go run)"
	@echo "install    install into \$$DESTDIR\$$PREFIX (PREFIX=$(PREFIX))"
	@echo "demo       set up and run the main job on a built-in default"
	@echo "clean      remove build outputs"

build: $(BIN) spank

spank:
ifneq ($(wildcard $(SPANK_H)),)
	@mkdir -p $(dir $(SPANK)) $(dir $(SPANK_GO))
	$(GO) build -buildmode=c-shared -ldflags '$(SPANK_GO_LDFLAGS)' -o $(SPANK_GO) ./spank/golib
	@rm -f $(basename $(SPANK_GO)).h
	$(CC) $(SPANK_CFLAGS) -shared -o $(SPANK) spank/plugin/spank_trainrun.c -ldl \
		-Wl,--version-script=spank/plugin/spank_trainrun.map -Wl,-z,nodelete
else
	@echo "spank: $(SPANK_H) not found (install libslurm-dev): $(SPANK) not built"
endif

# The shim runs once per GPU of every job and is built without cgo: a static
# binary starts without the dynamic loader and libc's threads. Where a node
# has NVIDIA GPUs, its probe runs trainrun (with cgo: NVML) instead.
$(BIN): FORCE
	$(GO) build -o $(BIN) ./wrapper
	CGO_ENABLED=0 $(GO) build -o $(dir $(BIN))trainrun-shim ./wrapper/internal/shim/trainrun-shim

FORCE:

deps:
	@bash test/deps.sh

test: deps lint test-unit test-e2e

# The unit tests run hermetic (test/hermetic.sh: Slurm's client commands on
# PATH replaced by recorders that fail; a call recorded fails the target),
# then the harness's own unit tests.
test-unit:
	@bash test/hermetic.sh
	$(PYTHON) -m unittest discover -s contrib/trainer -p 'test_*.py'
	$(GO) test -count=1 ./test/...

test-hermetic:
	@bash test/hermetic.sh

# trainrun's framework output run through the frameworks' own validation
# (test/frameworks/README.md): MEGATRON=DIR is a Megatron-LM tree (holding
# megatron/), MEGATRON_CHECK=DIR the megatron-check tool (its check.py and
# import-time stubs). Skipped when MEGATRON is not given.
MEGATRON ?=
MEGATRON_CHECK ?= $(wildcard ../shared/tools/megatron-check)
check-frameworks:
	@if [ -n "$(TORCHTITAN)" ]; then \
		TRAINRUN_TORCHTITAN=$(abspath $(TORCHTITAN)) TRAINRUN_TORCHTITAN_PYTHONPATH=$(if $(TORCHTITAN_PYTHONPATH),$(abspath $(TORCHTITAN_PYTHONPATH))) \
			$(GO) test -count=1 -timeout 10m -v -run 'TestTorchTitan' ./test/frameworks || exit 1; fi
	@if [ -z "$(MEGATRON)" ] || [ -z "$(MEGATRON_CHECK)" ]; then \
		echo "SKIP check-frameworks (Megatron-LM): give MEGATRON=DIR (a Megatron-LM tree) and MEGATRON_CHECK=DIR (the megatron-check tool)"; exit 0; fi; \
	TRAINRUN_MEGATRON=$(abspath $(MEGATRON)) TRAINRUN_MEGATRON_CHECK=$(abspath $(MEGATRON_CHECK)) \
		$(GO) test -count=1 -timeout 90m -v -run 'TestMegatron' ./test/frameworks

# Hugging Face PEFT's own config classes (LoraConfig, PrefixTuningConfig,
# PromptTuningConfig, IA3Config) load what --format peft prints, from a
# huggingface/peft tree (git archive of plan.PEFTVersion); not in CI.
check-peft:
	@if [ -z "$(PEFT)$(ACCELERATE)$(TRL)$(TRANSFORMERS)" ]; then echo "SKIP check-peft: give PEFT=DIR (a huggingface/peft tree) and/or ACCELERATE=DIR TRL=DIR TRANSFORMERS=DIR"; exit 0; fi; \
	TRAINRUN_PEFT=$(if $(PEFT),$(abspath $(PEFT))) TRAINRUN_ACCELERATE=$(if $(ACCELERATE),$(abspath $(ACCELERATE))) \
	TRAINRUN_TRL=$(if $(TRL),$(abspath $(TRL))) TRAINRUN_TRANSFORMERS=$(if $(TRANSFORMERS),$(abspath $(TRANSFORMERS))) \
	$(GO) test -count=1 -timeout 10m -v -run 'TestPEFT|TestHFSettings' ./test/frameworks

# Every Fuzz target in the module, found with go test -list (so targets added
# anywhere join), FUZZTIME each; a failure does not stop the rest, the
# summary says "N targets, M failed" and the status is non-zero when M > 0
# (test/fuzz.sh). Their seed corpora already run in test-unit as plain tests.
FUZZTIME ?= 60s
FUZZPKGS ?= ./...
fuzz:
	@FUZZTIME=$(FUZZTIME) GO=$(GO) bash test/fuzz.sh $(FUZZPKGS)

# Flags for go test in the e2e suite, e.g. make test-e2e E2E_FLAGS='-run Hostlist'.
E2E_FLAGS ?=

test-e2e: build
	@bash test/e2e.sh $(E2E_FLAGS)

# Six random faults (seeded, logged) in one run (test/e2e/chaos_test.go):
# minutes of requeues, so outside test-e2e. TRAINRUN_CHAOS_SEED=N repeats one;
# CHAOS_SEEDS=N runs N seeds (the regression seed first) and prints the pass
# rate and the goodput per seed with its spread (test/chaos.sh).
CHAOS_SEEDS ?= 1
chaos: build
	@CHAOS_SEEDS=$(CHAOS_SEEDS) bash test/chaos.sh

bench: build
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./plan/... ./topo/... ./checkpoint/...
	@# peak RSS and CPU of a root process given the worst user inputs (bound: 256 MiB, 10 s)
	$(GO) test -run '^$$' -bench RootWorstInputs -benchtime 3x -count=1 ./spank/
	@bash test/e2e.sh -run '^$$' -bench . -benchtime 10x

# N simulated ranks (wrapper/internal/scale: fake shims over loopback, the
# real server, launch files and commit), then the history, report and
# planner at size: a table, figures in test/README.md. Minutes, and two
# processes of 16k sockets each, so neither in bench nor in CI.
bench-scale:
	$(GO) test -run '^$$' -bench Scale -benchtime 1x -count=1 -timeout 15m ./wrapper/internal/scale/

# One job trace (test/e2e/sched_bench_test.go: its mix and truth table)
# replayed on a fresh heterogeneous cluster per policy: trainrun submit with
# and without sizing and late binding, Slurm's own -p list, a fixed-size
# perfect-knowledge router; trace 1 on the harness's two-partition cluster,
# trace 2 on three partitions (h100, a100, v100). About 105 minutes, so not
# in CI.
bench-sched: build
	TRAINRUN_BENCH_SCHED=1 bash test/e2e.sh -run '^TestBenchSched(RunJob)?$$' -timeout 150m

# The linters are Go modules from the proxy, pinned here and run with go
# run pkg@version, so they need no install and add nothing to go.mod.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE    ?= golang.org/x/tools/cmd/deadcode@v0.52.0

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/...
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags e2e ./test/...
	@GO=$(GO) DEADCODE=$(DEADCODE) bash test/deadcode.sh

install: build
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/trainrun
	install -m 0755 $(dir $(BIN))trainrun-shim $(DESTDIR)$(BINDIR)/trainrun-shim
	@if [ -f $(SPANK) ]; then \
		install -d $(DESTDIR)$(SPANKDIR) $(DESTDIR)$(DATADIR)/trainrun && \
		install -m 0755 $(SPANK) $(DESTDIR)$(SPANKDIR)/spank_trainrun.so && \
		install -m 0755 $(SPANK_GO) $(DESTDIR)$(SPANKDIR)/libtrainrun-spank.so && \
		sed -e 's|@SPANKDIR@|$(SPANKDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@BINDIR@|$(BINDIR)|g' contrib/plugstack.conf.example \
			> $(DESTDIR)$(DATADIR)/trainrun/plugstack.conf.trainrun && \
		echo "install: plugstack.conf line in $(DESTDIR)$(DATADIR)/trainrun/plugstack.conf.trainrun (include it from plugstack.conf on login and compute nodes; restart slurmd)"; \
	fi

demo: deps build
	@bash contrib/demo.sh

clean:
	rm -rf bin
