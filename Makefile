# Run "make" or "make help" for the list of targets.

SHELL := bash
.SHELLFLAGS := -o pipefail -ec
.DEFAULT_GOAL := help

# golangci-lint runs at a pinned version through the module proxy, so it
# never enters go.mod. v2.15.0 is built with (and supports) Go 1.26.
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT ?= go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# Where "make plugins" puts the prebuilt plugins for OCICNI_TEST_PLUGIN_DIR.
PLUGIN_DIR ?= $(CURDIR)/bin/plugins

.PHONY: help quickstart test test-short fuzz bench bench-critest bench-gc lint layout apicheck vulncheck plugins e2e-crio e2e-crio-compile e2e-containerd e2e-containerd-compile e2e-containerd-control e2e-buildkit e2e-buildkit-compile e2e-buildkit-control e2e-nerdctl e2e-nerdctl-compile e2e-nerdctl-control e2e-nomad e2e-nomad-compile e2e-nomad-control e2e-kubernetes-build

help: ## List the targets
	@echo "Targets:"
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z0-9-]*:.*## / { printf "  %-11s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

quickstart: ## Attach a netns to a bridge network, ping its gateway, detach (as root)
	go run ./examples/quickstart

test: ## go vet, then every test of the main module with -race (as root, the netns tests run too)
	go vet ./...
	go test -race -count=1 -timeout 30m ./...

test-short: ## The quick loop: every test but churn and crash, without -race (about a minute on 2 cores once built)
	go test -short -count=1 ./...

fuzz: ## Every fuzz target for FUZZTIME each (default 20s), as CI runs them, on Go 1.27.3 (fetched via GOTOOLCHAIN; FUZZ_GOTOOLCHAIN=local for the installed Go)
	bash .ci/fuzz

bench: ## The suite BENCHMARKS.md reports (as root, ~20 min; BENCH_SCALE=0.2 for a quick look), into bench.out
	bash .ci/bench

bench-critest: ## critest's pod benchmark through CRI-O and containerd, library against stock, into critest-bench/ (as root, ~25 min)
	bash .ci/critest-bench

bench-gc: ## GC over 10,000 cache entries with real plugins, while pods are set up (root, several minutes), also written to bench-gc.out
	go test -run '^$$' -bench BenchmarkGC10000 -benchtime 1x -timeout 60m ./pkg/ocicni/ | tee bench-gc.out

lint: ## golangci-lint (pinned by GOLANGCI_LINT_VERSION, with .golangci.yml), then apicheck and vulncheck
	$(GOLANGCI_LINT) config verify
	$(GOLANGCI_LINT) run ./...
	bash .ci/apicheck
	bash .ci/vulncheck

layout: ## pkg/ocicni's layout measures: files, Manager's methods, files calling each other both ways, the teardown walk (-v lists them)
	go run ./internal/tools/layout

apicheck: ## pkg/ocicni and pkg/gocni stay API-compatible with cri-o/ocicni v0.5.1 and go-cni v1.1.14 (apidiff, pinned)
	bash .ci/apicheck

vulncheck: ## govulncheck (pinned) with an offline database from a pinned golang.org/x/vulndb; fails on called module findings
	bash .ci/vulncheck

plugins: ## Build the reference plugins and the recorder into ./bin/plugins
	mkdir -p $(PLUGIN_DIR)
	cd tools && go build -o $(PLUGIN_DIR)/ tool
	go build -o $(PLUGIN_DIR)/recorder ./internal/testplugins/recorder
	@echo "Now: export OCICNI_TEST_PLUGIN_DIR=$(PLUGIN_DIR)"

e2e-crio: ## CRI-O v1.34.0 built against this checkout, driven by crictl (as root; see test/e2e/crio)
	test/e2e/crio/run.sh all

e2e-crio-compile: ## Only compile and vet CRI-O's ocicni users against this checkout
	test/e2e/crio/run.sh compile

e2e-containerd: ## containerd v2.4.2 built against pkg/gocni, driven by crictl, then the stock control (as root; see test/e2e/containerd)
	test/e2e/containerd/run.sh all

e2e-containerd-control: ## Only the control: stock containerd v2.4.2 (go-cni v1.1.14) through the same phases (as root)
	test/e2e/containerd/run.sh control

e2e-containerd-compile: ## containerd v2.4.2 with go-cni rewritten to pkg/gocni: build, vet, CRI unit tests (see test/e2e/containerd)
	test/e2e/containerd/run.sh compile

e2e-buildkit: ## BuildKit v0.34.2 built against pkg/gocni, driven by buildctl in both network modes, then the stock control (as root; see test/e2e/buildkit)
	test/e2e/buildkit/run.sh all

e2e-buildkit-control: ## Only the control: stock BuildKit v0.34.2 (go-cni v1.1.14) through the same phases (as root)
	test/e2e/buildkit/run.sh control

e2e-buildkit-compile: ## BuildKit v0.34.2 with go-cni rewritten to pkg/gocni: go build + go vet of buildkitd and cniprovider (see test/e2e/buildkit)
	test/e2e/buildkit/run.sh compile

e2e-nerdctl: ## nerdctl v2.3.5 built against pkg/gocni on containerd with the face, its OCI hooks through every phase, then the stock control (as root; see test/e2e/nerdctl)
	test/e2e/nerdctl/run.sh all

e2e-nerdctl-control: ## Only the control: stock nerdctl v2.3.5 (go-cni v1.1.13) on stock containerd through the same phases (as root)
	test/e2e/nerdctl/run.sh control

e2e-nerdctl-compile: ## nerdctl v2.3.5 with go-cni rewritten to pkg/gocni: go build + go vet of the packages that use it (see test/e2e/nerdctl)
	test/e2e/nerdctl/run.sh compile

e2e-nomad: ## Nomad v1.11.3 built against pkg/gocni, a single-node agent through every phase, then the stock control (as root; see test/e2e/nomad)
	test/e2e/nomad/run.sh all

e2e-nomad-control: ## Only the control: stock Nomad v1.11.3 (go-cni v1.1.13) through the same phases (as root)
	test/e2e/nomad/run.sh control

e2e-kubernetes-build: ## Build Kubernetes v1.34.4 from the module proxy (kubelet, kube-apiserver, etcd, e2e_node.test) for the node harness to come (~15 min cold)
	bash test/e2e/kubernetes/build.sh

e2e-nomad-compile: ## Nomad v1.11.3 with go-cni rewritten to pkg/gocni: go build + go vet of its allocrunner, its CNI unit tests (see test/e2e/nomad)
	test/e2e/nomad/run.sh compile
