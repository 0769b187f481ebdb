# tekvirt. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
TEKVIRT_HOME ?= $(HOME)/.tekvirt
export TEKVIRT_HOME
TOOLS := $(CURDIR)/_output/bin
TEKVIRT := $(GO) run ./cmd/tekvirt
E2E_TIMEOUT ?= 40m
# Nodes of the local cluster: `up` and `demo` make one; the e2e scenarios
# (so `make test`) run on two.
NODES ?= 1
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -E '/e2e$$|/e2e/bench$$')

.PHONY: help build test test-unit e2e e2e-hosted e2e-forge up down demo generate verify-gen lint bench fmt release catalog virtctl

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

build: ## compile everything
	$(GO) build ./...

# Under `make test` the reconciler tests on a real API server (controllers/testenv)
# must run, not skip: `up` has built the kube-apiserver they use by then.
test: export TEKVIRT_REQUIRE_TESTENV=1
test: NODES = 2
test: verify-gen lint up test-unit e2e ## everything CI runs: generated files, lint, cluster up, unit and e2e tests

test-unit: ## unit tests (no cluster needed; API-server tests skip until `up` has built kube-apiserver)
	$(GO) vet ./...
	$(GO) test -count=1 $(UNIT_PKGS)

up: ## bring the local cluster up with $(NODES) nodes (idempotent; UP_FLAGS=--forge adds the git forge and Pipelines-as-Code)
	$(TEKVIRT) up --nodes $(NODES) $(UP_FLAGS)

REGISTRY ?= 127.0.0.1:5000
CATALOG_VERSION ?= 0.1
# Artifact Hub's maintainer of the rendered catalog: by default the author of the checked-out commit.
CATALOG_MAINTAINER ?= $(shell git log -1 --format='%an <%ae>')

catalog: ## render the Tekton catalog into _out/catalog (task/<name>/$(CATALOG_VERSION)/, pipeline/...), the step image pushed to $(REGISTRY) and named by digest; push each task and pipeline as a bundle to $(REGISTRY)/tekvirt/bundles/<name>:$(CATALOG_VERSION)
	$(TEKVIRT) catalog --registry $(REGISTRY) --out _out/catalog --version $(CATALOG_VERSION) --maintainer "$(CATALOG_MAINTAINER)"

release: ## render _out/release/tekvirt-operator.yaml and tekvirt-cr.yaml, images pushed to $(REGISTRY) and named by digest (the default is the local cluster's registry: `make up` first)
	$(TEKVIRT) release --registry $(REGISTRY) --out _out/release

down: ## stop the local cluster
	$(TEKVIRT) down

demo: up ## the main job: cluster up; golden-image imports the guest, boots it, checks it, publishes it; template-creation makes a template of it and boots a VM from that
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig $(TEKVIRT_HOME)/bin/tkn pipeline start golden-image \
	  -n tekvirt -s golden-image-pipeline -p url=$$($(TEKVIRT) guest-url) --use-param-defaults --showlog --exit-with-pipelinerun-error
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig $(TEKVIRT_HOME)/bin/tkn pipeline start template-creation \
	  -n tekvirt -s template-creation-pipeline --use-param-defaults --showlog --exit-with-pipelinerun-error

e2e: NODES = 2
e2e: up $(TOOLS)/virtctl ## bring the cluster up (2 nodes) and run the e2e scenarios against it
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_E2E_NODES=$(NODES) TEKVIRT_VIRTCTL=$(TOOLS)/virtctl $(GO) test -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/

e2e-hosted: NODES = 2
e2e-hosted: up ## the heavy scenarios: hosted clusters (control plane, NodePools, isolation, samples) and the pipeline samples (about 20 minutes; not in `make test`, CI's budget)
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_E2E_NODES=$(NODES) TEKVIRT_E2E_HOSTED=1 $(GO) test -count=1 -timeout 40m -v -run 'TestNodePool$$|TestPipelineSamplesRun$$|TestHostedClusterControlPlane$$|TestHostedClustersIsolated$$|TestHostedSamplesRun$$' ./e2e/

e2e-forge: NODES = 2
e2e-forge: UP_FLAGS = --forge
e2e-forge: up ## the forge scenarios: Pipelines-as-Code on the local Gitea, the git resolver, tkn pac resolve (builds Gitea and Pipelines-as-Code the first time, ~16 min; not in `make test`, CI's budget)
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_E2E_NODES=$(NODES) TEKVIRT_E2E_FORGE=1 $(GO) test -count=1 -timeout 40m -v -run 'TestPaC|TestCatalogThroughGit$$|TestTknPacResolve$$' ./e2e/

bench: up $(TOOLS)/virtctl ## measurements (printed as ratios); slow, not part of `make test`
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_BENCH=1 TEKVIRT_VIRTCTL=$(TOOLS)/virtctl $(GO) test -count=1 -timeout 60m -v ./e2e/bench/

$(TOOLS)/controller-gen: e2e/tools/controller-gen/go.mod
	cd e2e/tools/controller-gen && $(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

# KubeVirt's own virtctl, from KubeVirt's source at the version its go.mod
# names: the e2e scenarios drive tekvirt with it as KubeVirt users do.
VIRTCTL_VERSION = $(shell sed -n 's/^\tkubevirt.io\/kubevirt //p' e2e/tools/virtctl/go.mod)
virtctl: $(TOOLS)/virtctl ## build KubeVirt's virtctl into _output/bin (the e2e scenarios run it)
$(TOOLS)/virtctl: e2e/tools/virtctl/go.mod
	cd e2e/tools/virtctl && $(GO) build -o $@ -ldflags "-X kubevirt.io/client-go/version.gitVersion=$(VIRTCTL_VERSION) -X kubevirt.io/client-go/version.gitTreeState=clean" .

$(TOOLS)/golangci-lint: e2e/tools/golangci-lint/go.mod
	cd e2e/tools/golangci-lint && $(GO) build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

generate: $(TOOLS)/controller-gen ## regenerate deepcopy, CRDs and RBAC
	$(TOOLS)/controller-gen object paths=./controllers/apis/...
	$(TOOLS)/controller-gen crd paths=./controllers/apis/... output:crd:dir=./controllers/config/crd
	cd e2e/tools/crdgen && $(GO) run . -out $(CURDIR)/controllers/config/crd
	$(TOOLS)/controller-gen rbac:roleName=tekvirt-controller paths=./controllers/vm/... paths=./controllers/vmi/... paths=./controllers/datavolume/... paths=./controllers/datasource/... paths=./controllers/dataimportcron/... paths=./controllers/uploadtoken/... paths=./controllers/uploadproxy/... paths=./controllers/metrics/... paths=./controllers/subresources/... paths=./controllers/frontproxy/... paths=./controllers/eviction/... paths=./controllers/hostedcluster/... paths=./controllers/nodepool/... paths=./controllers/vmwebhook/... paths=./controllers/vmdefaults/... paths=./controllers/claimimport/... output:rbac:dir=./controllers/config/rbac
	$(TOOLS)/controller-gen rbac:roleName=tekvirt-operator paths=./controllers/hyperconverged/... output:rbac:dir=./controllers/config/operator
	$(TOOLS)/controller-gen rbac:roleName=tekvirt-handler paths=./runtime/handler/... output:rbac:dir=./controllers/config/handler
	$(TOOLS)/controller-gen rbac:roleName=tekvirt-hostpath paths=./controllers/hostpath/... output:rbac:dir=./controllers/config/hostpath

verify-gen: generate ## fail when generated files differ from the committed ones
	@git diff --exit-code -- controllers/ || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- controllers/)" || { git status --porcelain -- controllers/; echo "untracked generated files: run make generate and commit"; exit 1; }

lint: $(TOOLS)/golangci-lint ## golangci-lint (govet, staticcheck, errcheck, funlen, gocyclo, ...)
	$(TOOLS)/golangci-lint run ./...

fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')
