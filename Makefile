# Herald — `make help` lists every target.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN       := $(CURDIR)/bin
GO        ?= go
GOTEST    ?= $(GO) test
HERALD    := $(BIN)/herald
IMAGE     ?= ghcr.io/heraldhq/herald:dev

# Pinned tool versions, installed into ./bin.
HELM_VERSION           := v3.22.0
CONTROLLER_GEN_VERSION := v0.23.0
HELM           := $(BIN)/helm
CONTROLLER_GEN := $(BIN)/controller-gen

##@ Everyday

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*##"} /^##@/ {printf "\n%s\n", substr($$0, 5)} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: build postgres ## Run Herald on embedded defaults: herald dev (PostgreSQL, Kafka, messenger simulator)
	$(HERALD) dev

.PHONY: test
test: postgres envtest tools build lint check-generated ## Run every test (race detector on)
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh 2>/dev/null | tail -n 1)" HELM="$(HELM)" HERALD_BINARY="$(HERALD)" $(GOTEST) -race -count=1 -timeout 30m ./...

.PHONY: build
build: ## Build bin/herald
	CGO_ENABLED=0 $(GO) build -trimpath -o $(HERALD) ./cmd/herald

##@ Checks

.PHONY: lint
lint: ## gofmt and go vet
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/tools/'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

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
	docker build -t $(IMAGE) .

.PHONY: manifests
manifests: ## Regenerate CRDs (config/crd), the operator's ClusterRole (config/rbac) and deepcopy (api/)
	hack/manifests.sh generate

FUZZTIME ?= 5m

.PHONY: fuzz
fuzz: ## Fuzz the messenger update parser, then the operator's reading of ApiKey and Tenant specs, FUZZTIME (5m) each (make test runs the seed corpora)
	$(GO) test -run '^$$' -fuzz FuzzParseUpdate -fuzztime $(FUZZTIME) ./internal/updates/
	$(GO) test -run '^$$' -fuzz '^FuzzApiKeySpec$$' -fuzztime $(FUZZTIME) ./api/v1alpha1/
	$(GO) test -run '^$$' -fuzz '^FuzzTenantSpec$$' -fuzztime $(FUZZTIME) ./api/v1alpha1/

##@ Benchmarks (figures go to docs/benchmarks.md)

.PHONY: bench-webhook
bench-webhook: postgres ## Load POST /messenger/webhook with /start redemptions, contact shares and ignored updates
	$(GO) run ./hack/bench/webhook -rate 2000 -duration 15s -concurrency 32

.PHONY: bench-delivery
bench-delivery: postgres ## One worker against the simulator: 1,000/s limit, 50 ms answers; then 202→delivered at 100/s
	$(GO) run ./hack/bench/delivery -runs 3

.PHONY: bench-ingress
bench-ingress: build postgres ## Load POST /v1/send: accepted/s, p99, RSS, and the direct-insert floor
	$(GO) run ./hack/bench/ingress -herald $(HERALD)

.PHONY: bench-callbacks
bench-callbacks: postgres ## Status callbacks: events/s signed and sent to a receiver answering in 20 ms; what recording them costs delivery
	$(GO) run ./hack/bench/callbacks -runs 3

##@ Dependencies

.PHONY: postgres
postgres: ## Make sure the PostgreSQL server binaries are installed (apt as root)
	@hack/ensure-postgres.sh

.PHONY: envtest
envtest: ## Provide kube-apiserver and etcd for envtest (built once, cached under ./bin/k8s); prints the directory
	@hack/envtest.sh

.PHONY: tools
tools: $(HELM) $(CONTROLLER_GEN) ## Install pinned tools into ./bin

$(HELM):
	GOBIN=$(BIN) $(GO) install -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(CONTROLLER_GEN):
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
