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

.PHONY: all help build deps test test-unit test-e2e bench lint install clean demo

all: build

help:
	@echo "build      build bin/trainrun (and the SPANK plugin)"
	@echo "deps       install what the tests need (Debian packages; root)"
	@echo "test       deps + unit tests + end-to-end tests on a local Slurm"
	@echo "test-unit  go test ./..."
	@echo "test-e2e   end-to-end suite against a real local Slurm (root); E2E_FLAGS='-run X' narrows it"
	@echo "bench      benchmarks, printed as figures and side-by-side ratios"
	@echo "lint       gofmt + go vet"
	@echo "install    install into \$$DESTDIR\$$PREFIX (PREFIX=$(PREFIX))"
	@echo "demo       set up and run the main job on a built-in default"
	@echo "clean      remove build outputs"

build: $(BIN)

$(BIN): FORCE
	$(GO) build -o $(BIN) ./wrapper

FORCE:

deps:
	@bash test/deps.sh

test: deps test-unit test-e2e

test-unit:
	$(GO) test -count=1 ./...

# Flags for go test in the e2e suite, e.g. make test-e2e E2E_FLAGS='-run Hostlist'.
E2E_FLAGS ?=

test-e2e: build
	@bash test/e2e.sh $(E2E_FLAGS)

bench: build
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./plan/... ./topo/... ./checkpoint/...
	@bash test/e2e.sh -run '^$$' -bench . -benchtime 10x

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/...

install: build
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/trainrun

demo: deps build
	@bash contrib/demo.sh

clean:
	rm -rf bin
