# webhook-guard. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VERSION := $(shell cat VERSION)
# The commands whose output has golden files (testdata/*.golden).
GOLDEN_PKGS := ./cmd/webhook-guard/check/ ./cmd/webhook-guard/render/ ./cmd/webhook-guard/review/
LDFLAGS := -s -w -X github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app.Version=$(VERSION)
BIN := $(CURDIR)/bin
# Fuzzing budget per target (`make fuzz`); raise it for a longer local run.
# A count, not a duration: with a duration Go 1.26's fuzz coordinator can
# report "context deadline exceeded" as a failure when a starved worker is
# still running at the deadline (golang/go#75804, fixed in Go 1.27). A count
# has no deadline to race; 30000 calls take 2-18 s per target on 2 cores.
FUZZTIME ?= 30000x
# `make bench`: rounds of the whole suite (the table shows medians over
# rounds) and the time each benchmark runs per round.
BENCH_ROUNDS ?= 7
BENCH_TIME ?= 300ms
# Soak duration (`make soak`); `go test` runs a 20 s version.
SOAK_DURATION ?= 10m
# `make image`: where the per-arch binaries, the OCI layout and its archive go.
IMAGE_DIR := $(BIN)/image
# SPDX expression for the image's org.opencontainers.image.licenses label:
# the LICENSE file's.
IMAGE_LICENSES ?= Apache-2.0
# Every module is built and tested against its own go.mod's pins, as a
# user of that module gets it, not against go.work's one version of each
# dependency across all modules: go.work is the editor's view and the
# workspace vet's in `make lint`.
export GOWORK := off
# The Go modules below the root (each with its own go.mod), which `go vet
# ./...` and golangci-lint at the root do not reach.
NESTED_MODULES := charts charts/ruletest e2e e2e/perf e2e/writers/istio e2e/writers/knative e2e/writers/kyverno hack/image config/recipes/recipetest policy/gitops/tooltypes
# package:target pairs `make fuzz` runs (go test -fuzz takes one target at a time).
FUZZ_TARGETS := ./webhook:FuzzAdmissionReview ./webhook:FuzzTypedReview ./policy/cabundle:FuzzParseBundle ./policy:FuzzLoad

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/webhook-guard (with go.mod's toolchain, fetched once from the module proxy).
	GOTOOLCHAIN=auto CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/webhook-guard ./cmd/webhook-guard

# The image is assembled by hack/image (its own module) from static binaries:
# no Docker, no daemon. Its timestamps are the last commit's time and it is
# labelled with the commit, so the same commit gives the same digest.
IMAGE_TOOL = go -C hack/image run . \
	--binary linux/amd64=$(IMAGE_DIR)/linux_amd64/webhook-guard \
	--binary linux/arm64=$(IMAGE_DIR)/linux_arm64/webhook-guard \
	--version $(VERSION) \
	--revision "$$(git rev-parse HEAD)$$(git diff --quiet HEAD -- || echo -dirty)" \
	--source-date-epoch "$$(git log -1 --format=%ct)" \
	$(if $(IMAGE_LICENSES),--licenses '$(IMAGE_LICENSES)') \
	--oci-dir $(IMAGE_DIR)/oci \
	--archive $(IMAGE_DIR)/webhook-guard-v$(VERSION).oci.tar

.PHONY: image
image: image-binaries ## Build the linux/amd64+arm64 image without Docker: OCI layout bin/image/oci and archive bin/image/webhook-guard-v<VERSION>.oci.tar.
	$(IMAGE_TOOL)

# Checked when make reads the Makefile, so a missing IMAGE fails before anything is built.
ifneq ($(filter image-push,$(MAKECMDGOALS)),)
ifeq ($(IMAGE),)
$(error make image-push needs IMAGE=registry/repository:tag, e.g. IMAGE=ghcr.io/you/webhook-guard:v$(VERSION); log in first (docker login, crane auth login) so ~/.docker/config.json holds the credentials)
endif
endif

.PHONY: image-push
image-push: image-binaries ## Build the image (as `make image`) and push it to IMAGE=registry/repository:tag (credentials from ~/.docker/config.json).
	$(IMAGE_TOOL) --push '$(IMAGE)'

# The static binaries the image holds, built like `make build` (same
# toolchain and flags) for each platform. -buildvcs=false: the binary must not
# depend on whether the machine stamps VCS information (GOFLAGS, a git
# checkout or not), so that a rebuild of a tag elsewhere gives the same digest;
# the image's labels carry the commit.
.PHONY: image-binaries
image-binaries:
	@if ls LICENSE* >/dev/null 2>&1 && [[ -z "$(IMAGE_LICENSES)" ]]; then \
	  echo "the repository has a LICENSE: set IMAGE_LICENSES in the Makefile to its SPDX expression"; exit 1; fi
	for arch in amd64 arm64; do \
	  GOTOOLCHAIN=auto CGO_ENABLED=0 GOOS=linux GOARCH=$$arch go build -buildvcs=false -trimpath -ldflags '$(LDFLAGS)' \
	    -o $(IMAGE_DIR)/linux_$$arch/webhook-guard ./cmd/webhook-guard; \
	done

# `make release`: everything a release publishes, built locally into
# bin/release (nothing is pushed; .github/workflows/release.yaml publishes
# it on a tag). Binaries are built like the image's (-trimpath,
# -buildvcs=false); archives get the last commit's time, root ownership and
# sorted names, so the same commit gives the same bytes.
RELEASE_DIR := $(BIN)/release
RELEASE_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: release
release: image ## Build bin/release: binaries (linux/darwin amd64/arm64), kubectl-webhook_guard archives, the image, the chart, a krew manifest, an SPDX SBOM and SHA256SUMS.
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	epoch="$$(git log -1 --format=%ct)"; \
	for p in $(RELEASE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
	  GOTOOLCHAIN=auto CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -buildvcs=false -trimpath -ldflags '$(LDFLAGS)' \
	    -o $(RELEASE_DIR)/webhook-guard_$${os}_$${arch} ./cmd/webhook-guard; \
	  stage="$$(mktemp -d)"; install -m 0755 $(RELEASE_DIR)/webhook-guard_$${os}_$${arch} "$$stage/kubectl-webhook_guard"; \
	  tar --sort=name --mtime="@$$epoch" --owner=0 --group=0 --numeric-owner -C "$$stage" -cf - kubectl-webhook_guard \
	    | gzip -9n > $(RELEASE_DIR)/kubectl-webhook_guard_$${os}_$${arch}.tar.gz; \
	  rm -rf "$$stage"; \
	done
	cp $(IMAGE_DIR)/webhook-guard-v$(VERSION).oci.tar $(RELEASE_DIR)/
	$(BIN)/helm package charts/webhook-guard --destination $(RELEASE_DIR)
	go run ./hack/release --dir $(RELEASE_DIR) --version $(VERSION) --source-date-epoch "$$(git log -1 --format=%ct)"
	@ls -l $(RELEASE_DIR)

.PHONY: tools
tools: ## Build kube-apiserver, kube-controller-manager, etcd and helm, and the real CA writers of e2e/writers, from the Go module proxy into bin/ (once per machine).
	hack/build-control-plane.sh
	hack/build-helm.sh
	hack/build-writers.sh

.PHONY: lint-tools
lint-tools: ## Build golangci-lint and govulncheck into bin/ (once per machine).
	hack/build-lint.sh

# Every suite is a Go module of its own, run by `go -C <dir> test ./...`.
# The root module's tests need nothing in bin/, so `go test ./...` passes on a
# fresh clone; the suites that need bin/ are nested modules that ./... at the
# root does not reach: charts/ (bin/helm) and e2e/ (the control plane, helm,
# the image). e2e/perf is run by `make bench` and `make loadtest`.
.PHONY: test
test: tools build image ## Run every suite: unit and goldens (root module), chart (charts/; its alerts evaluated by Prometheus's rule engine in charts/ruletest), e2e against a real kube-apiserver (e2e/), the image tool's, the install recipes' (structural) and render gitops's output decoded by Argo CD's and Flux's API types (policy/gitops/tooltypes: Argo CD pins k8s.io).
	go test -race -count=1 ./...
	go -C charts test -race -count=1 ./...
	go -C charts/ruletest test -count=1 ./...
	go -C e2e test -race -count=1 -timeout 40m ./...
	go -C hack/image test -count=1 ./...
	go -C config/recipes/recipetest test -count=1 ./...
	go -C policy/gitops/tooltypes test -count=1 ./...

.PHONY: test-unit
test-unit: ## Run the root module's tests: unit, goldens, docs links (nothing from bin/ needed).
	go test -race -count=1 ./...

.PHONY: test-charts
test-charts: tools ## Run the chart's tests (charts/, its own module) with bin/helm, and its alerts through Prometheus's rule engine (charts/ruletest).
	go -C charts test -race -count=1 ./...
	go -C charts/ruletest test -count=1 ./...

.PHONY: test-e2e
test-e2e: tools build image ## Run the e2e suite (e2e/, its own module) against a real kube-apiserver and etcd.
	go -C e2e test -race -count=1 -timeout 40m -v ./...

.PHONY: bench
bench: ## Benchmark the guard against the JSON-decode floor, controller-runtime, CEL and Rego, and the policy shape inside a real kube-apiserver (e2e/perf); print the tables.
	cd e2e/perf && go test -c -o $${TMPDIR:-/tmp}/webhook-guard-perf.test . && \
		for i in $$(seq $(BENCH_ROUNDS)); do \
			$${TMPDIR:-/tmp}/webhook-guard-perf.test -test.run '^$$' -test.bench . -test.benchmem -test.count 1 -test.benchtime $(BENCH_TIME); \
		done | tee /dev/stderr | go run ./cmd/benchtable

.PHONY: loadtest
loadtest: tools ## Load the built guard over TLS on loopback under a real kube-apiserver (e2e/perf TestLoad); print the tables.
	cd e2e/perf && go test -run '^TestLoad$$' -count 1 -v -timeout 20m .
.PHONY: fuzz
fuzz: ## Fuzz each target for FUZZTIME (default 30000 calls); seed corpora in testdata/fuzz run in every `go test`.
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "fuzz $$pkg $$fn for $(FUZZTIME)"; \
	  go test $$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -parallel 2 || exit 1; done

.PHONY: soak
soak: ## Serve a steady request rate from the built binary for SOAK_DURATION (default 10m); report heap and goroutines.
	SOAK_DURATION=$(SOAK_DURATION) go test ./e2e/ -run TestSoak -count=1 -v -timeout 0

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: lint-tools ## gofmt, go vet, golangci-lint (gosec included) and govulncheck (offline database).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@# Every module of go.work (go list -m) in one vet, as an editor at the root sees them.
	GOWORK=$(CURDIR)/go.work go vet $$(GOWORK=$(CURDIR)/go.work go list -m -f '{{.Dir}}/...')
	$(BIN)/golangci-lint run --allow-parallel-runners ./...
	@# The nested modules (not covered by ./... above) with the same config.
	for m in $(NESTED_MODULES); do (cd $$m && go vet ./... && $(BIN)/golangci-lint run --allow-parallel-runners --config $(CURDIR)/.golangci.yml ./...) || exit 1; done
	hack/vulncheck.sh

.PHONY: vulncheck
vulncheck: ## govulncheck against the Go vulnerability database from the golang.org/x/vulndb module (offline).
	hack/vulncheck.sh

.PHONY: verify
verify: lint ## lint, and check that generated files are current.
	go test $(GOLDEN_PKGS) -count=1
	go -C charts test . -count=1

# The commits `make check-commits` checks: those not yet on main.
COMMITS ?= main..HEAD

.PHONY: check-commits
check-commits: ## Check the messages of the commits in COMMITS (main..HEAD) against CONTRIBUTING.md's convention.
	go run ./hack/commitmsg --range '$(COMMITS)'

.PHONY: demo
demo: tools build ## Start etcd, kube-apiserver and the guard on loopback and walk through what it does.
	hack/demo.sh

.PHONY: update-golden
update-golden: ## Rewrite golden files and the chart README's values reference after an intended change.
	go test $(GOLDEN_PKGS) -update
	go -C charts test . -update
	go run ./hack/valuesdoc

.PHONY: clean
clean: ## Remove bin/ (the control plane is rebuilt on the next `make tools`).
	rm -rf $(BIN)
