# Loom: `make run` starts the collector, `make test` runs everything CI runs.
# Every tool is built here at the version pinned in internal/tools/go.mod.

SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO          ?= go
TOOLS       := $(CURDIR)/.tools
BUILDER     := $(TOOLS)/builder
MDATAGEN    := $(TOOLS)/mdatagen
BPF2GO      := $(TOOLS)/bpf2go
GOLANGCI_VERSION := v2.15.0
GOLANGCI    := $(TOOLS)/golangci-lint-$(GOLANGCI_VERSION)
DIST_DIR    := distribution/otelcol-loom
BIN         := bin/otelcol-loom
CONFIG      ?= distribution/config.yaml
# The collector is built with NVML support (cgo); a build without the tag
# still works and its gpu receiver says that NVML support is absent.
BUILD_TAGS  ?= nvml
# Packages with files behind build tags (or that import one), tested and
# linted with the tags too.
TAGGED_PKGS := ./receiver/gpureceiver/ ./receiver/gpureceiver/internal/nvmlsource/
# The BPF program of the gpu receiver, and the bindings bpf2go writes for it.
BPF_PKG     := receiver/gpureceiver/internal/ioctltrace
# Fuzz budgets are counts, not durations: Go 1.26's coordinator can fail a
# duration-bounded run with "context deadline exceeded" at the deadline when
# the machine is loaded (golang/go#75804, fixed in Go 1.27).
FUZZEXECS   ?= 30000x
BENCHTIME   ?= 1s
# The Helm chart, and the Go module that tests it (Helm's SDK has its own dependencies).
HELM_DIR    := distribution/helm
# The FastAPI example and the venv its e2e test runs it in (pinned PyPI packages).
EXAMPLE_DIR  := examples/inference-service
EXAMPLE_VENV := $(EXAMPLE_DIR)/.venv
PYTHON      ?= python3
# Packages holding a component generated from metadata.yaml.
METADATA    := $(shell find . -name metadata.yaml -not -path './.git/*' -not -path '*/testdata/*' | sort)

export CGO_ENABLED := 1
# go-nvml's nvml.h marks many functions deprecated; the warnings would bury
# the build's output.
export CGO_CFLAGS := -O2 -g -Wno-deprecated-declarations

.PHONY: all tools bpf-deps tracefs generate generate-check helm-golden build run example example-venv gpu-check test test-deps unit fuzz e2e bench perf perf-soak perf-profile lint fmt clean

all: build

# --- tools -----------------------------------------------------------------
tools: $(BUILDER) $(MDATAGEN) $(BPF2GO)

# golangci-lint pins its own dependencies: installed apart from the collector tools.
$(GOLANGCI):
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	mv $(TOOLS)/golangci-lint $@

$(BUILDER) $(MDATAGEN) $(BPF2GO) &: internal/tools/go.mod internal/tools/go.sum
	cd internal/tools && $(GO) build -o $(TOOLS)/ go.opentelemetry.io/collector/cmd/builder go.opentelemetry.io/collector/cmd/mdatagen github.com/cilium/ebpf/cmd/bpf2go

# Debian's clang 14 and libbpf headers compile the BPF program (the same
# compiler everywhere, so the committed object is reproducible).
bpf-deps:
	command -v clang-14 >/dev/null && command -v llvm-strip-14 >/dev/null && test -f /usr/include/bpf/bpf_helpers.h || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14 llvm-14 libbpf-dev; }

# The ioctl tracer's tests attach to syscall tracepoints, which need tracefs
# (root; mounted already on most distributions).
tracefs:
	test -d /sys/kernel/tracing/events || mount -t tracefs nodev /sys/kernel/tracing

# --- generated sources -----------------------------------------------------
# ocb writes distribution/otelcol-loom (main, components, go.mod, go.sum) from
# builder-config.yaml; mdatagen writes each component's metadata code and docs;
# the Grafana dashboards' JSON comes from their Go code in distribution/grafana.
generate: tools bpf-deps
	$(BUILDER) --config builder-config.yaml --skip-compilation
	gofmt -w $(DIST_DIR)/*.go
	for meta in $(METADATA); do (cd "$$(dirname $$meta)" && $(MDATAGEN) metadata.yaml); done
	cd $(BPF_PKG) && $(GO) generate ./...
	$(MAKE) --no-print-directory helm-golden
	$(GO) test -count=1 -run '^TestDashboardsAreGenerated$$' ./distribution/grafana/ -update

# The chart's built-in collector configs are distribution/agent.yaml and
# gateway.yaml (a chart reads only its own files); its golden renders follow.
helm-golden:
	cp distribution/agent.yaml distribution/gateway.yaml $(HELM_DIR)/loom/files/
	cd $(HELM_DIR) && $(GO) test -count=1 -run '^TestGoldenRenders$$' ./charttest/ -update

# Fails when the committed generated sources differ from what `make generate` writes.
GENERATED   = $(DIST_DIR) $(dir $(METADATA)) $(BPF_PKG) $(HELM_DIR)/loom/files $(HELM_DIR)/charttest/testdata/golden distribution/grafana/dashboards
generate-check: generate
	git diff --exit-code -- $(GENERATED) || { echo "generated sources are stale: run 'make generate' and commit the result" >&2; exit 1; }
	test -z "$$(git status --porcelain -- $(GENERATED))" || { git status --porcelain -- $(GENERATED); echo "make generate wrote files that are not committed" >&2; exit 1; }

# --- build and run ---------------------------------------------------------
build: tools
	cd $(DIST_DIR) && $(GO) build -tags '$(BUILD_TAGS)' -trimpath -ldflags='-s -w' -o $(CURDIR)/$(BIN) .

# GOMEMLIMIT near the config's memory_limiter::limit_mib (distribution/config.yaml).
run: build
	GOMEMLIMIT=$${GOMEMLIMIT:-1024MiB} $(BIN) --config $(CONFIG)

# The example inference service and its model server, sending to the
# collector of `make run` (run that first, in another terminal).
example: example-venv
	EXAMPLE_PYTHON=$(CURDIR)/$(EXAMPLE_VENV)/bin/python bash $(EXAMPLE_DIR)/run.sh

example-venv: $(EXAMPLE_VENV)/.installed

$(EXAMPLE_VENV)/.installed: $(EXAMPLE_DIR)/requirements.txt
	$(PYTHON) -m venv $(EXAMPLE_VENV)
	$(EXAMPLE_VENV)/bin/pip install -q --disable-pip-version-check -r $<
	touch $@

# On a machine with an NVIDIA GPU (root, PyTorch): runs the collector's gpu
# receiver while a CUDA workload allocates memory until it fails, and prints
# what the receiver saw.
gpu-check: build
	bash test/gpu/gpu-check.sh

# --- tests -----------------------------------------------------------------
test: lint unit fuzz e2e

# The event graph's tests run a real Neo4j (Java 17 + Maven): fetch and build its
# launcher once, so that test binaries start it offline. The dashboards' test
# evaluates their queries in Debian's Prometheus; the rca page's e2e drives
# Debian's Chromium.
test-deps:
	test/neo4j/prepare.sh
	command -v prometheus >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; }
	command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }

unit: test-deps tracefs
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -tags '$(BUILD_TAGS)' $(TAGGED_PKGS)
	cd $(HELM_DIR) && $(GO) test -count=1 ./...

# Every fuzz target runs FUZZEXECS inputs on top of its seed corpus.
fuzz:
	grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u | while read -r pkg; do \
	  for target in $$(grep -h '^func Fuzz' $$pkg/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/'); do \
	    echo "fuzz $$pkg $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZEXECS) -timeout 5m $$pkg; \
	  done; \
	done

# The e2e tests, and the system benchmark's short run (cmd/loomperf's smoke test).
e2e: build test-deps example-venv
	LOOM_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -tags e2e -timeout 20m ./test/e2e/... ./cmd/loomperf/
	cd $(HELM_DIR) && LOOM_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -tags e2e -run '^TestRenderedConfigsValidate$$' ./charttest/

# Benchmarks print ratios against baselines measured side by side in the same run.
# Its last section is the system benchmark, short: one repetition at 10k/s
# and unthrottled (about 3 minutes; `make perf` runs it whole).
bench: test-deps tracefs build
	command -v strace >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace; }
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./... | tee /dev/stderr | $(GO) run ./cmd/benchratio
	$(GO) run ./cmd/loomperf -bin $(BIN) -loads 10000,0 -reps 1 -window 10s

# The system benchmark (README "Performance"): the built collector at fixed
# offered loads, Loom's default pipeline beside the stock components doing
# the closest job and the floor, interleaved, 3 repetitions (~35 minutes).
# PERFFLAGS adds loomperf flags, e.g. PERFFLAGS='-reps 5 -window 60s'.
PERFFLAGS ?=
perf: build
	$(GO) run ./cmd/loomperf -bin $(BIN) $(PERFFLAGS)

# 30 minutes of the default pipeline at 5k records/s: RSS every 30 s and its slope.
perf-soak: build
	$(GO) run ./cmd/loomperf -bin $(BIN) -soak 30m $(PERFFLAGS)

# CPU and allocation profiles of the default pipeline at saturation, by component,
# kept in bin/profile for go tool pprof.
perf-profile: build
	$(GO) run ./cmd/loomperf -bin $(BIN) -profile $(CURDIR)/bin/profile $(PERFFLAGS)

# --- hygiene ---------------------------------------------------------------
lint: $(GOLANGCI)
	test -z "$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go'))" || { gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go'); echo "gofmt: run 'make fmt'" >&2; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/... ./cmd/loomperf/
	$(GO) vet -tags '$(BUILD_TAGS)' $(TAGGED_PKGS)
	$(GOLANGCI) run ./...
	$(GOLANGCI) run --build-tags '$(BUILD_TAGS)' $(TAGGED_PKGS)
	cd $(HELM_DIR) && $(GO) vet -tags e2e ./... && $(GOLANGCI) run ./...

fmt:
	gofmt -w $$(git ls-files --cached --others --exclude-standard '*.go')

clean:
	rm -rf bin $(TOOLS)
