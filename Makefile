# lastmile: see README.md. The two set-up commands are `make demo` and
# `make test`; both install what they need (Go modules, and Debian's
# python3-numpy and python3-torch for the trainer client).

GO      ?= go
PYTHON  ?= /usr/bin/python3
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# SOURCE is the git tree hash of the working tree, untracked files
# included (through a scratch index, the real one untouched): the source
# part of the compute identity (peer/identity.go), the same for
# bin/lastmile and bin/lastmiled of one build, which are different
# executables. Empty outside a git checkout.
SOURCE  ?= $(shell idx=$$(mktemp -u); cp "$$(git rev-parse --git-path index 2>/dev/null)" $$idx 2>/dev/null; \
	GIT_INDEX_FILE=$$idx git add -A . >/dev/null 2>&1 && GIT_INDEX_FILE=$$idx git write-tree 2>/dev/null; rm -f $$idx)
LDFLAGS := -X main.version=$(VERSION) -X github.com/lastmile/lastmile/peer.buildSource=$(SOURCE)
PKGS    := ./...
# Go test timeout per package; the whole suite runs in a few minutes.
TESTFLAGS ?= -race -timeout 15m

export LASTMILE_PYTHON := $(PYTHON)

.PHONY: all build demo test test-go test-python pydeps testdeps vet fmt-check lint bench fuzz tidy-check clean install uninstall check-unit chaos sweep soak gpu-test

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# pydeps makes sure Debian's python3 has numpy and torch. It installs them
# with apt-get when they are missing and apt is usable, and otherwise says
# what to install.
pydeps:
	@if $(PYTHON) -c 'import numpy, torch' 2>/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing python3-numpy python3-torch with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-numpy python3-torch >/dev/null || exit 1; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null && command -v apt-get >/dev/null; then \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-numpy python3-torch >/dev/null || exit 1; \
	else \
		echo "$(PYTHON) lacks numpy or torch and apt-get is not usable here."; \
		echo "Install Debian's python3-numpy and python3-torch (apt-get install python3-numpy python3-torch),"; \
		echo "or set PYTHON=/path/to/python3 with numpy (torch optional) and run again."; \
		exit 1; \
	fi; \
	$(PYTHON) -c 'import numpy, torch' || { echo "numpy/torch still missing after install"; exit 1; }

# testdeps installs the tools some tests use where they can: setfacl (the
# acl package) for the test that an ACL denying a user is obeyed. Tests
# that need a missing tool skip with a message.
testdeps:
	@if ! command -v setfacl >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing acl (setfacl) with apt-get"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq acl >/dev/null 2>&1 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq acl >/dev/null; } || \
		echo "could not install acl: the ACL test will skip"; \
	fi

demo: build pydeps
	$(BIN)/lastmile demo

# The Go tests and the Python ones run at once: the Python tests mostly
# wait on the processes they start, and the Go tests leave about a fifth
# of two cores idle. Each side's output is printed whole when it ends.
test: fmt-check vet
	$(MAKE) --no-print-directory -j2 --output-sync=target test-go test-python

# LASTMILE_REQUIRE_PYTHON turns the Go tests that drive the Python client
# from skipped-when-missing into failed-when-missing.
test-go: build pydeps testdeps
	LASTMILE_REQUIRE_PYTHON=1 $(GO) test $(TESTFLAGS) $(PKGS)
	$(GO) test -count=1 -run 'DecompressionBomb' ./iceberg # heap measurements: skipped under -race

# The client's tests and the DataLoader baseline's run as three shards at
# once (python/tests/shard.py deals modules by their measured seconds):
# they mostly wait on processes they start, and together take about
# 205 s in a row on the 2-vCPU VM. Each shard's output is printed whole.
test-python: build pydeps
	$(MAKE) --no-print-directory -j3 --output-sync=target test-python-0 test-python-1 test-python-2

test-python-%:
	LASTMILE_BIN=$(CURDIR)/$(BIN)/lastmile $(PYTHON) python/tests/shard.py $*

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

lint: fmt-check vet

bench: build
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	$(BIN)/lastmile bench

# fuzz runs each of the 49 fuzzers for FUZZTIME (go test fuzzes one target
# per run), about 38 minutes in all: specs, ring headers and slots, Parquet
# footers, pages and their codecs, the control API (handlers, and raw bytes on a running daemon's
# socket), what peers send and are sent (Flight messages, unit outputs,
# units, the requester's columns a job compiles against), Iceberg metadata, manifests, references and deletion vectors, expressions
# and pipelines, and the cgroup files cpus reads. FUZZMIN bounds the
# minimization of each new interesting input: Go's default (60s) spent a
# 30s run of a ring slot fuzzer (8 KiB inputs) minimizing, at about a dozen
# executions in all; with 1s it runs thousands. FUZZMEM caps each
# fuzzer's address space (KiB, ulimit -v): Go's fuzzer has no memory limit,
# so an input that makes a parser allocate gigabytes (a footer declaring
# 2^32 row groups did, docs/daemon-security.md "Hostile files") passed
# unnoticed on a large machine; under the cap it fails the run.
FUZZMIN ?= 1s
FUZZMEM ?= 8000000
FUZZTIME ?= 30s
# .ci/fuzz-one runs a target again once when Go's fuzz coordinator fails
# it with a bare "context deadline exceeded" (golang/go#75804).
FUZZONE = GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMIN=$(FUZZMIN) FUZZMEM=$(FUZZMEM) bash .ci/fuzz-one
fuzz:
	$(FUZZONE) spec FuzzParse
	$(FUZZONE) daemon FuzzControlAPI
	$(FUZZONE) daemon FuzzControlWire
	$(FUZZONE) shm FuzzParseHeader
	$(FUZZONE) shm FuzzParseSlot
	$(FUZZONE) shm FuzzParseWeightedSlot
	$(FUZZONE) shm FuzzParseSlotArena
	$(FUZZONE) decode FuzzDecodePage
	$(FUZZONE) decode FuzzPageHeader
	$(FUZZONE) decode FuzzPlanFooter
	$(FUZZONE) decode FuzzDeclaredCounts
	$(FUZZONE) decode FuzzZstdBound
	$(FUZZONE) decode FuzzDecodeHashedPage
	$(FUZZONE) gpu FuzzParseAnnouncement
	$(FUZZONE) shm FuzzReadAnnouncement
	$(FUZZONE) objstore FuzzParseURL
	$(FUZZONE) peer FuzzStreamCodec
	$(FUZZONE) peer FuzzAssemble
	$(FUZZONE) peer FuzzMessageHeader
	$(FUZZONE) decode FuzzVerifiedUnit
	$(FUZZONE) decode FuzzPartitionValues
	$(FUZZONE) iceberg FuzzDeletionVector
	$(FUZZONE) iceberg FuzzParseRef
	$(FUZZONE) iceberg FuzzScanManifests
	$(FUZZONE) iceberg FuzzScanDeletes
	$(FUZZONE) iceberg FuzzAvroBound
	$(FUZZONE) engine FuzzCheck
	$(FUZZONE) peer FuzzCompactRoundTrip
	$(FUZZONE) peer FuzzDeletedSet
	$(FUZZONE) peer FuzzParseTicket
	$(FUZZONE) ops FuzzCompile
	$(FUZZONE) ops FuzzPipeline
	$(FUZZONE) ops FuzzPathBucket
	$(FUZZONE) expr FuzzCountOf
	$(FUZZONE) expr FuzzEval
	$(FUZZONE) decode FuzzDecodeDecimalPage
	$(FUZZONE) decode FuzzDecodeInt96Page
	$(FUZZONE) decode FuzzInt96
	$(FUZZONE) decode FuzzHybrid
	$(FUZZONE) decode FuzzLz4Page
	$(FUZZONE) decode FuzzSnappyPrefix
	$(FUZZONE) decode FuzzUnitUnmarshal
	$(FUZZONE) cpus FuzzParseCPUMax
	$(FUZZONE) cpus FuzzParseMountinfo
	$(FUZZONE) iceberg FuzzParseMetadata
	$(FUZZONE) roots FuzzSplit
	$(FUZZONE) decode FuzzPlanOf
	$(FUZZONE) expr FuzzParse
	$(FUZZONE) peer FuzzCompileTicket

# chaos runs the full chaos suite (docs/reliability.md): seeded random
# faults (kill -9 and SIGSTOP of the daemon and of trainers, a full shm
# tmpfs, corrupt inputs) against real lastmiled and Python trainer
# processes; 0 rows lost and 0 repeated. CHAOS_SEED=N reproduces a run;
# CHAOS_RUNS sets the number of fault runs. A short version runs in `make test`.
CHAOS_RUNS ?= 16
CHAOS_SEED ?= 0
chaos: pydeps
	LASTMILE_REQUIRE_PYTHON=1 $(GO) test ./chaos/ -run '^TestChaos' -v -count=1 -timeout 60m -chaos.full -chaos.runs=$(CHAOS_RUNS) -chaos.seed=$(CHAOS_SEED)

# sweep runs the engine's property tests over every combination and
# every resume position (make test runs a fixed sample of them): batches
# byte-identical across workers, cache, peers and hosts; exact resume.
sweep:
	$(GO) test ./engine/ -run 'Prop|Toggles|Edge|Endless' -count=1 -timeout 60m -sweep
	$(GO) test ./peer/ -run 'SpillVariants' -count=1

# soak runs a job without end and a consumer for SOAK, sampling the
# daemon's RSS and open fds; RSS must stay flat (docs/reliability.md).
SOAK ?= 10m
soak: pydeps
	LASTMILE_REQUIRE_PYTHON=1 $(GO) test ./chaos/ -run '^TestSoak$$' -v -count=1 -timeout 0 -soak=$(SOAK)

# gpu-test runs the checks that need a real NVIDIA GPU and driver
# (docs/gpu.md): a registered ring's round trip through the device, the
# self-test with its thresholds, device staging's daemon side
# (TestRealGPUStager), host staging through torch, and every staging
# mode end to end through lastmiled (test_gpu_e2e.py). On a host without
# a GPU each says so and skips; make test runs the same code against a
# fake libcuda.
gpu-test: build pydeps
	$(GO) test -count=1 -v -run 'RealGPU' ./cuda/ ./gpu/ -args -gpu
	LASTMILE_GPU_TEST=1 $(PYTHON) -m unittest discover -s python/tests -t python -p 'test_cuda.py' -v
	LASTMILE_GPU_TEST=1 $(PYTHON) -m unittest discover -s python/tests -t python -p 'test_gpu_e2e.py' -v
	$(BIN)/lastmile gpu check

tidy-check:
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

# install puts lastmile and lastmiled in /usr/local/bin, the unit and an
# example config in place, the Python client in Debian's site-packages, and
# creates the lastmiled system user (trainer users join its group to reach
# the control socket). The unit runs /usr/local/bin/lastmiled: keep PREFIX
# at /usr/local unless you edit the unit. Then: systemctl enable --now lastmiled.
PREFIX  ?= /usr/local
PYSITE  ?= $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("purelib"))' 2>/dev/null)
install: build
	install -D -m 0755 $(BIN)/lastmile $(DESTDIR)$(PREFIX)/bin/lastmile
	install -D -m 0755 $(BIN)/lastmiled $(DESTDIR)$(PREFIX)/bin/lastmiled
	install -D -m 0644 deploy/lastmiled.service $(DESTDIR)/etc/systemd/system/lastmiled.service
	@if [ ! -e $(DESTDIR)/etc/lastmile/lastmiled.yaml ]; then \
		install -D -m 0644 deploy/lastmiled.yaml $(DESTDIR)/etc/lastmile/lastmiled.yaml; \
	else echo "keeping the existing /etc/lastmile/lastmiled.yaml"; fi
	mkdir -p $(DESTDIR)$(PYSITE) && cp -r python/lastmile $(DESTDIR)$(PYSITE)/
	@if [ -z "$(DESTDIR)" ] && ! id lastmile >/dev/null 2>&1; then \
		useradd --system --user-group --no-create-home --home-dir /var/lib/lastmile --shell /usr/sbin/nologin lastmile; fi
	@if [ -z "$(DESTDIR)" ] && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
	@echo "installed; start it with: systemctl enable --now lastmiled"

uninstall:
	-systemctl disable --now lastmiled 2>/dev/null
	rm -f $(DESTDIR)$(PREFIX)/bin/lastmile $(DESTDIR)$(PREFIX)/bin/lastmiled $(DESTDIR)/etc/systemd/system/lastmiled.service
	rm -rf $(DESTDIR)$(PYSITE)/lastmile
	@echo "left /etc/lastmile, /var/lib/lastmile and the lastmile user in place"

check-unit:
	sh deploy/check-unit.sh

clean:
	rm -rf $(BIN) out
