# tekvirt. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
TEKVIRT_HOME ?= $(HOME)/.tekvirt
export TEKVIRT_HOME
TOOLS := $(CURDIR)/_output/bin
# Built as `tekvirt up` builds its own binaries (static, -trimpath), so that
# the two share every compiled package.
TEKVIRT := CGO_ENABLED=0 $(GO) run -trimpath ./cmd/tekvirt
E2E_TIMEOUT ?= 40m
# Scenarios that mostly wait (t.Parallel, see e2e/doc.go) run this many at a time.
E2E_PARALLEL ?= 3
# Nodes of the local cluster: `up` and `demo` make one; the e2e scenarios
# (so `make test`) run on two.
NODES ?= 1
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -E '/e2e$$|/e2e/bench$$')

.PHONY: help build test test-unit e2e e2e-hosted e2e-forge e2e-migration conformance conformance-hosted up down demo generate verify-gen lint bench fmt release catalog virtctl prefetch

help: ## list the targets (docs/development.md says more, with times)
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-11s %s\n", $$1, $$2}'

build: ## compile everything
	$(GO) build ./...

# Under `make test` the reconciler tests on a real API server (controllers/testenv)
# must run, not skip: `up` has built the kube-apiserver they use by then.
test: export TEKVIRT_REQUIRE_TESTENV=1
test: NODES = 2
test: prefetch verify-gen lint up test-unit e2e ## what CI runs: prefetch, verify-gen, lint, up (2 nodes), test-unit, e2e (about 30 min warm)

# The modules make test builds from: tekvirt's and the tools modules' but
# the forge's (gitea, pac), which only e2e-forge builds.
PREFETCH_MODULES = . $(filter-out e2e/tools/gitea e2e/tools/pac,$(wildcard e2e/tools/*))

# On a fresh machine each build fetches its modules before it compiles,
# one build after the other: minutes of waiting on the network with the
# CPU idle. prefetch starts every download at once in the background and
# returns, so that they run under verify-gen and lint; the go command's
# module cache locks make a build that needs a module wait for it (a
# download that fails is fetched again by the build). Its log:
# _output/prefetch.log.
prefetch: ## start downloading the Go modules of tekvirt and its tools in the background (returns at once)
	@mkdir -p _output; for d in $(PREFETCH_MODULES); do (cd $$d && $(GO) mod download >/dev/null 2>>$(CURDIR)/_output/prefetch.log || echo "prefetch: $$d: go mod download failed" >>$(CURDIR)/_output/prefetch.log) & done

# No separate go vet: lint runs govet's analyzers, and go test its own subset.
test-unit: ## the unit tests; no cluster needed (API-server tests skip until up built it)
	$(GO) test -count=1 $(UNIT_PKGS)

up: ## the local testbed with NODES nodes, tekvirt installed (idempotent; UP_FLAGS=--forge adds the forge)
	$(TEKVIRT) up --nodes $(NODES) $(UP_FLAGS)

REGISTRY ?= 10.96.0.11:5000
CATALOG_VERSION ?= 0.1
# Artifact Hub's maintainer of the rendered catalog: by default the author of the checked-out commit.
CATALOG_MAINTAINER ?= $(shell git log -1 --format='%an <%ae>')

catalog: ## render the catalog into _out/catalog and push its image and bundles to REGISTRY
	$(TEKVIRT) catalog --registry $(REGISTRY) --out _out/catalog --version $(CATALOG_VERSION) --maintainer "$(CATALOG_MAINTAINER)"

release: ## push every image to REGISTRY and write _out/release/tekvirt-{operator,cr}.yaml
	$(TEKVIRT) release --registry $(REGISTRY) --out _out/release

down: ## stop the local testbed (its state stays)
	$(TEKVIRT) down

demo: up ## the main job: up, then the golden-image and template-creation pipelines
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig $(TEKVIRT_HOME)/bin/tkn pipeline start golden-image \
	  -n tekvirt -s golden-image-pipeline -p url=$$($(TEKVIRT) guest-url) --use-param-defaults --showlog --exit-with-pipelinerun-error
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig $(TEKVIRT_HOME)/bin/tkn pipeline start template-creation \
	  -n tekvirt -s template-creation-pipeline --use-param-defaults --showlog --exit-with-pipelinerun-error

e2e: NODES = 2
e2e: up $(TOOLS)/virtctl ## up (2 nodes), then the e2e scenarios of make test
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_E2E_NODES=$(NODES) TEKVIRT_VIRTCTL=$(TOOLS)/virtctl $(GO) test -count=1 -timeout $(E2E_TIMEOUT) -parallel $(E2E_PARALLEL) -v ./e2e/

e2e-hosted: NODES = 2
e2e-hosted: up $(TOOLS)/virtctl ## hosted clusters and the pipeline samples, outside make test (about 35 min)
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_E2E_NODES=$(NODES) TEKVIRT_E2E_HOSTED=1 TEKVIRT_VIRTCTL=$(TOOLS)/virtctl $(GO) test -count=1 -timeout 60m -v -run 'TestNodePool$$|TestPipelineSamplesRun$$|TestHostedClusterControlPlane$$|TestHostedClustersIsolated$$|TestHostedSamplesRun$$|TestHostedDataPlane$$|TestHostedClustersApart$$' ./e2e/

e2e-migration: NODES = 2
e2e-migration: up $(TOOLS)/virtctl ## live migration's faults, workload updates, timeouts and long runs, outside make test (about 11 min)
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_E2E_NODES=$(NODES) TEKVIRT_E2E_MIGRATION=1 TEKVIRT_VIRTCTL=$(TOOLS)/virtctl $(GO) test -count=1 -timeout 40m -v -run 'TestMigrationFaults$$|TestWorkloadUpdate$$|TestMigrationMemoryIntegrity$$|TestMigrationUnschedulableTimesOut$$' ./e2e/

conformance: NODES = 2
conformance: up ## Kubernetes' conformance tests (sig-network, sig-node, sig-apps) against the testbed itself (time: docs/conformance.md)
	.ci/setup-host conformance
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_E2E_NODES=$(NODES) TEKVIRT_E2E_CONFORMANCE=1 CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' $(GO) test -count=1 -timeout 10h -v -run 'TestConformance$$' ./e2e/

conformance-hosted: NODES = 2
conformance-hosted: up ## the same tests against a hosted cluster of 2 workers (time: docs/conformance.md)
	.ci/setup-host conformance
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_E2E_NODES=$(NODES) TEKVIRT_E2E_CONFORMANCE=1 CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' $(GO) test -count=1 -timeout 10h -v -run 'TestConformanceHosted$$' ./e2e/

e2e-forge: NODES = 2
e2e-forge: UP_FLAGS = --forge
e2e-forge: up ## Pipelines-as-Code and the git resolver on the local forge (about 4 min warm)
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_E2E_NODES=$(NODES) TEKVIRT_E2E_FORGE=1 $(GO) test -count=1 -timeout 40m -v -run 'TestPaC|TestCatalogThroughGit$$|TestTknPacResolve$$' ./e2e/

# BENCH picks benchmarks by name (go test -run), e.g. BENCH=TestStreams.
BENCH ?= .
bench: NODES = 2
bench: up $(TOOLS)/virtctl ## the measurements in e2e/bench as ratios (BENCH=TestName for one; about 30 min)
	KUBECONFIG=$(TEKVIRT_HOME)/kubeconfig TEKVIRT_BENCH=1 TEKVIRT_VIRTCTL=$(TOOLS)/virtctl $(GO) test -count=1 -timeout 60m -v -run '$(BENCH)' ./e2e/bench/

$(TOOLS)/controller-gen: e2e/tools/controller-gen/go.mod
	cd e2e/tools/controller-gen && $(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

# KubeVirt's own virtctl, from KubeVirt's source at the version its go.mod
# names: the e2e scenarios drive tekvirt with it as KubeVirt users do.
VIRTCTL_VERSION = $(shell sed -n 's/^\tkubevirt.io\/kubevirt //p' e2e/tools/virtctl/go.mod)
virtctl: $(TOOLS)/virtctl ## KubeVirt's virtctl from its source into _output/bin (e2e runs it)
$(TOOLS)/virtctl: e2e/tools/virtctl/go.mod
	cd e2e/tools/virtctl && $(GO) build -o $@ -ldflags "-X kubevirt.io/client-go/version.gitVersion=$(VIRTCTL_VERSION) -X kubevirt.io/client-go/version.gitTreeState=clean" .

$(TOOLS)/golangci-lint: e2e/tools/golangci-lint/go.mod
	cd e2e/tools/golangci-lint && $(GO) build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

generate: $(TOOLS)/controller-gen ## regenerate deepcopy, CRDs and RBAC from the Go types
	$(TOOLS)/controller-gen object paths=./controllers/apis/...
	$(TOOLS)/controller-gen crd paths=./controllers/apis/... output:crd:dir=./controllers/config/crd
	cd e2e/tools/crdgen && $(GO) run . -out $(CURDIR)/controllers/config/crd
	$(TOOLS)/controller-gen rbac:roleName=tekvirt-controller paths=./controllers/vm/... paths=./controllers/vmi/... paths=./controllers/hotplug/... paths=./controllers/migration/... paths=./controllers/datavolume/... paths=./controllers/datasource/... paths=./controllers/dataimportcron/... paths=./controllers/uploadtoken/... paths=./controllers/uploadproxy/... paths=./controllers/metrics/... paths=./controllers/subresources/... paths=./controllers/frontproxy/... paths=./controllers/eviction/... paths=./controllers/hostedcluster/... paths=./controllers/nodepool/... paths=./controllers/hostedservices/... paths=./controllers/vmwebhook/... paths=./controllers/vmdefaults/... paths=./controllers/macpool/... paths=./controllers/claimimport/... paths=./controllers/workloadupdate/... paths=./controllers/vmsnapshot/... output:rbac:dir=./controllers/config/rbac
	$(TOOLS)/controller-gen rbac:roleName=tekvirt-operator paths=./controllers/hyperconverged/... output:rbac:dir=./controllers/config/operator
	$(TOOLS)/controller-gen rbac:roleName=tekvirt-handler paths=./runtime/handler/... output:rbac:dir=./controllers/config/handler
	$(TOOLS)/controller-gen rbac:roleName=tekvirt-hostpath paths=./controllers/hostpath/... output:rbac:dir=./controllers/config/hostpath

verify-gen: generate ## fail when the generated files differ from the committed ones
	@git diff --exit-code -- controllers/ || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- controllers/)" || { git status --porcelain -- controllers/; echo "untracked generated files: run make generate and commit"; exit 1; }

lint: $(TOOLS)/golangci-lint ## golangci-lint (govet, staticcheck, errcheck, funlen, ...)
	$(TOOLS)/golangci-lint run ./...

fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')
