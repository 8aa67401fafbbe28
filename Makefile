# Herald — `make help` lists every target.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN       := $(CURDIR)/bin
GO        ?= go
GOTEST    ?= $(GO) test
HERALD    := $(BIN)/herald

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
test: postgres envtest tools lint check-generated ## Run every test (race detector on)
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh | tail -n 1)" HELM="$(HELM)" $(GOTEST) -race -count=1 -timeout 30m ./...

.PHONY: build
build: ## Build bin/herald
	CGO_ENABLED=0 $(GO) build -trimpath -o $(HERALD) ./cmd/herald

##@ Checks

.PHONY: lint
lint: ## gofmt and go vet
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/tools/'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

.PHONY: check-generated
check-generated: ## Fail when generated files (CRDs, RBAC, deepcopy, chart CRDs) are out of date
	@true

##@ Benchmarks (figures go to docs/benchmarks.md)

.PHONY: bench-ingress
bench-ingress: build postgres ## Load POST /v1/send: accepted/s, p99, RSS, and the direct-insert floor
	$(GO) run ./hack/bench/ingress -herald $(HERALD)

##@ Dependencies

.PHONY: postgres
postgres: ## Make sure the PostgreSQL server binaries are installed (apt as root)
	@hack/ensure-postgres.sh

.PHONY: envtest
envtest: ## Provide kube-apiserver and etcd for envtest (built and cached under ./bin)
	@hack/envtest.sh >/dev/null

.PHONY: tools
tools: $(HELM) $(CONTROLLER_GEN) ## Install pinned tools into ./bin

$(HELM):
	GOBIN=$(BIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(CONTROLLER_GEN):
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
