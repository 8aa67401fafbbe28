# Herald — `make help` lists every target.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN       := $(CURDIR)/bin
GO        ?= go
GOTEST    ?= $(GO) test
HERALD    := $(BIN)/herald
IMAGE     ?= ghcr.io/heraldhq/herald:dev
# Extra flags of bench-ingress, e.g. INGRESS_FLAGS=-html-mix (half the sends HTML) or "-duration 3s".
INGRESS_FLAGS ?=
# Extra flags of bench-delivery, e.g. DELIVERY_FLAGS=-replace (half the latency phase's sends edit a message).
DELIVERY_FLAGS ?=

# Pinned tool versions, installed into ./bin.
HELM_VERSION           := v3.22.0
CONTROLLER_GEN_VERSION := v0.23.0
CRANE_VERSION          := v0.22.1
GOLANGCI_LINT_VERSION  := v2.15.0
# The Kubernetes version helm assumes without --kube-version: one above the client-go its go.mod pins (helm's own
# Makefile derives it the same way); `go install` alone leaves helm's default, 1.20, which charts refuse.
HELM_KUBE_MAJOR        := 1
HELM_KUBE_MINOR        := 37
HELM           := $(BIN)/helm
CONTROLLER_GEN := $(BIN)/controller-gen
CRANE          := $(BIN)/crane
GOLANGCI_LINT  := $(BIN)/golangci-lint

##@ Everyday

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*##"} /^##@/ {printf "\n%s\n", substr($$0, 5)} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: build postgres ## Run Herald on embedded defaults: herald dev (PostgreSQL, Kafka, messenger simulator)
	$(HERALD) dev

.PHONY: test
test: postgres browser promtool envtest tools build lint check-generated ## Run every test (race detector on)
	@# The delivery package's tests judge rates, orders and deadlines in real time against the simulator: it
	@# runs alone first, so that no other package's tests (a browser, a herald dev, the chaos suite) share
	@# the machine's cores with it; then every other package, two at a time as go test does.
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh 2>/dev/null | tail -n 1)" HELM="$(HELM)" HERALD_BINARY="$(HERALD)" $(GOTEST) -race -count=1 -timeout 30m ./internal/delivery/
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh 2>/dev/null | tail -n 1)" HELM="$(HELM)" HERALD_BINARY="$(HERALD)" $(GOTEST) -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v '/internal/delivery$$')

.PHONY: test-e2e
test-e2e: tools build $(CRANE) ## End-to-end: a real one-node Kubernetes cluster, the Helm chart, upgrade under load (root; see README)
	hack/e2e/run.sh

# VERSION is what `herald version` prints: the checkout's `git describe` (a worktree's .git is a file Go's
# own VCS stamping does not read, so the Makefile stamps it).
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
LDFLAGS   := -X main.buildVersion=$(VERSION)

.PHONY: build
build: ## Build bin/herald (the first build compiles every dependency: minutes; later ones seconds)
	@echo "building bin/herald $(VERSION) (the first build compiles every dependency and takes minutes)"
	@# -v names each package as it is compiled (none when cached): counted into a progress line every 25, so a
	@# first build says it is moving; any other line (an error) passes through as it is.
	CGO_ENABLED=0 $(GO) build -v -trimpath -ldflags "$(LDFLAGS)" -o $(HERALD) ./cmd/herald 2>&1 | \
	  awk '/^[^ :]+$$/ { if (++n % 25 == 0) { printf "  %d packages compiled...\n", n; fflush() } next } { print; fflush() }'

.PHONY: chaos
chaos: build postgres ## Fault-injection suite, long version (HERALD_CHAOS=long): the results table, also written into docs/reliability.md
	@report="$${HERALD_CHAOS_REPORT:-$(BIN)/chaos-report.md}"; rm -f "$$report"; status=0; \
	  HERALD_CHAOS=long HERALD_BINARY="$(HERALD)" HERALD_CHAOS_REPORT="$$report" \
	    $(GOTEST) -count=1 -timeout 90m -v ./test/chaos/ || status=$$?; \
	  if [ -f "$$report" ]; then cat "$$report"; hack/chaos-table.sh "$$report" docs/reliability.md; fi; exit $$status

##@ Checks

.PHONY: lint
lint: vet $(GOLANGCI_LINT) ## gofmt, go vet and golangci-lint (.golangci.yml says which linters and why)
	$(GOLANGCI_LINT) run ./...

.PHONY: vet
vet: ## gofmt and go vet
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/tools/'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

.PHONY: screenshot
screenshot: postgres browser ## Retake docs/dev-console.png: the dev console's browser test (headless Chromium) saves it
	HERALD_CONSOLE_SCREENSHOT=$(CURDIR)/docs/dev-console.png $(GOTEST) -count=1 -run '^TestTheConsoleWalksATenantThroughInABrowser$$' ./internal/dev/console/

.PHONY: docs
docs: ## Regenerate the settings table of docs/configuration.md from internal/config
	$(GO) run ./cmd/herald config-docs docs/configuration.md

.PHONY: check-generated
check-generated: ## Fail when generated files (CRDs, RBAC, deepcopy, the chart's copies) are out of date
	hack/manifests.sh check
	hack/sync-chart-crds.sh check

.PHONY: chart-crds
chart-crds: ## Copy config/crd/bases and config/rbac into charts/herald/templates
	hack/sync-chart-crds.sh

.PHONY: docker-build
docker-build: ## Build the container image $(IMAGE)
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

.PHONY: manifests
manifests: ## Regenerate CRDs (config/crd), the operator's ClusterRole (config/rbac) and deepcopy (api/)
	hack/manifests.sh generate

FUZZTIME ?= 1m

.PHONY: fuzz
fuzz: ## Run every fuzz target (every parser of outside input) for FUZZTIME each, one after the other (make test runs their seeds)
	@for dir in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | xargs -n1 dirname | sort -u); do \
	  for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | sed 's/^func //'); do \
	    echo "== ./$$dir $$target ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) ./$$dir || exit 1; \
	  done; \
	done

##@ End-to-end (root; see README.md)

.PHONY: e2e-up
e2e-up: tools build $(CRANE) ## Bring the end-to-end cluster up and leave it (KUBECONFIG=bin/e2e/kubeconfig)
	hack/e2e/up.sh

.PHONY: e2e-down
e2e-down: ## Tear the end-to-end cluster down and clean the machine
	hack/e2e/down.sh

##@ Benchmarks (figures go to docs/benchmarks.md)

.PHONY: bench-webhook
bench-webhook: postgres ## Load POST /messenger/webhook with /start redemptions, contact shares and ignored updates
	$(GO) run ./hack/bench/webhook -rate 2000 -duration 15s -concurrency 32

.PHONY: bench-delivery
bench-delivery: postgres ## One worker against the simulator: 1,000/s limit, 50 ms answers; then 202→delivered at 100/s (DELIVERY_FLAGS=-replace: half of them edits)
	$(GO) run ./hack/bench/delivery -runs 3 $(DELIVERY_FLAGS)

.PHONY: bench-ingress
bench-ingress: build postgres ## Load POST /v1/send: accepted/s, p99, RSS, and the direct-insert floor (INGRESS_FLAGS=-html-mix: half the sends HTML)
	$(GO) run ./hack/bench/ingress -herald $(HERALD) $(INGRESS_FLAGS)

.PHONY: bench-batch
bench-batch: build postgres ## bench-ingress plus POST /v1/send/batch of 100: notifications/s beside the same run's single sends
	$(GO) run ./hack/bench/ingress -herald $(HERALD) -batch 100

.PHONY: bench-fairness
bench-fairness: postgres ## Fairness and limits: a quiet tenant behind a noisy backlog at 30/s, one busy chat among fifty, three replicas holding one limit
	$(GO) run ./hack/bench/fairness

.PHONY: bench-bots
bench-bots: build postgres ## Tenants' own bots: 50 bots × 30/s with backlogs, a fresh message on an idle bot behind them, 4 paid bots × 1,000/s through worker processes, workers 1 → 3 (BENCH_FLAGS=-short, -parts …)
	$(GO) run ./hack/bench/bots -herald $(HERALD) $(BENCH_FLAGS)

.PHONY: bench-optout
bench-optout: postgres ## Issue 35: /stop of a user with 300,000 waiting notifications beside ten others; another tenant's batches during a flood of opt-outs, and during the pass after the erasure of a user with 300,000 (3 runs)
	$(GO) run ./hack/bench/optout -runs 3 -backlog 300000

.PHONY: bench-digest
bench-digest: postgres ## Issue 38: 10,000 users × 10 sends with one digest key (10 s window): 10,000 messages of 10 items, the time to drain and the CPU per item against plain sends (3 runs)
	$(GO) run ./hack/bench/digest -runs 3 -users 10000 -items 10

.PHONY: bench-insert
bench-insert: postgres ## The send's insert alone, before and after the v1 extensions, and with 1,000,000 scheduled notifications stored
	$(GO) run ./hack/bench/insert

.PHONY: bench-list
bench-list: postgres ## GET /v1/notifications: a page's latency for 100,000 notifications, alone and among 1,000,000 of others
	$(GO) run ./hack/bench/list -runs 3

.PHONY: bench-callbacks
bench-callbacks: postgres ## Status callbacks: events/s signed and sent to a receiver answering in 20 ms; what recording them costs delivery
	$(GO) run ./hack/bench/callbacks -runs 3

.PHONY: bench-usage
bench-usage: postgres ## GET /v1/usage: 400 days at hour granularity for one of 100 tenants with counts in every hour and shard
	$(GO) run ./hack/bench/usage -runs 3

BENCH_TENANTS ?= 500

.PHONY: bench-operator
bench-operator: build postgres ## The operator registering BENCH_TENANTS tenants' own bots (envtest, the simulator as the Bot API): time until all are BotReady, its memory
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh | tail -n 1)" $(GO) run ./hack/bench/operator -herald $(HERALD) -tenants $(BENCH_TENANTS)

##@ Dependencies

.PHONY: postgres
postgres: ## Make sure the PostgreSQL server binaries are installed (apt as root)
	@hack/ensure-postgres.sh

.PHONY: promtool
promtool: ## Make sure promtool is installed (apt as root): the dashboard and alert tests use it
	@hack/ensure-promtool.sh

.PHONY: k8s-binaries
k8s-binaries: ## Build the Kubernetes binaries (one go build, cached under ./bin/k8s); prints the directory
	@hack/k8s-binaries.sh

.PHONY: browser
browser: ## Make sure headless Chromium, curl and jq are installed (apt as root): the dev console and walkthrough tests
	@hack/ensure-browser.sh

.PHONY: envtest
envtest: ## Provide kube-apiserver and etcd for envtest (hack/k8s-binaries.sh, shared with test-e2e); prints the directory
	@hack/envtest.sh

.PHONY: tools
tools: $(HELM) $(CONTROLLER_GEN) ## Install pinned tools into ./bin (crane: by make test-e2e; golangci-lint: by make lint)

$(HELM):
	GOBIN=$(BIN) $(GO) install -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$(HELM_KUBE_MAJOR) -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_KUBE_MINOR) \
	  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$(HELM_KUBE_MAJOR) -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_KUBE_MINOR)" \
	  helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(CONTROLLER_GEN):
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

$(CRANE):
	GOBIN=$(BIN) $(GO) install github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION)

$(GOLANGCI_LINT):
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
