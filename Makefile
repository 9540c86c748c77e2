# Carve: a CSI driver that carves volumes out of LVM volume groups.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
# One set of Go flags and one cgo setting for every build and test, the
# image's build stage and the Kubernetes build (scripts/goenv.sh says why):
# they then share the build cache. A unit run with cgo (the default where gcc
# is installed) compiled client-go, grpc and the rest a second time.
ifeq ($(origin GOFLAGS),undefined)
GOFLAGS := $(shell . scripts/goenv.sh && echo "$$CARVE_GOFLAGS")
endif
export GOFLAGS
export CGO_ENABLED = 0

# Carve's image reference, as deploy/'s manifests and the Helm chart name it
# (deploy_test.go checks that they agree): a localhost/ name, which no
# registry serves (deploy/kubernetes/base says why).
IMAGE     ?= localhost/carve/carve:v0.1.0
# make release: Carve's version (IMAGE's tag) and the prefix of the images'
# names (the default, again served by no registry: load the archives).
RELEASE_VERSION ?= $(lastword $(subst :, ,$(IMAGE)))
REGISTRY        ?= localhost/carve

# With TAG_OUTPUT set (make test's parallel run), a recipe line ending in
# $(TAG) prefixes its output lines with the target's name; pipefail keeps
# the command's exit status. $(BG) runs a command at low priority there.
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
TAG          = $(if $(TAG_OUTPUT),2>&1 | sed -u 's/^/[$@] /')
BG           = $(if $(TAG_OUTPUT),nice -n 10)

CONTROLLER_GEN ?= $(shell go env GOPATH)/bin/controller-gen
CONTROLLER_GEN_VERSION := v0.23.0

.PHONY: all build image image-again release test test-full test-vm-build image-then-unit vet check-generated test-unit test-vm test-vm-production test-vm-selinux vm-lane test-crash soak soak-cluster test-vm-full e2e e2e-upstream bench-cluster demo lint fuzz fuzz-ci bench generate clean

all: build

build: ## the carve binary, static
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/carve ./cmd/carve

image: ## Carve's image as an OCI archive (_output/image/carve.tar): the Dockerfile built by buildah, no daemon, no registry; then its checks
	IMAGE=$(IMAGE) VERSION=$(VERSION) $(BG) scripts/image/build.sh _output/image/carve.tar $(TAG)
	CARVE_IMAGE_ARCHIVE=$(CURDIR)/_output/image/carve.tar $(BG) $(GO) test -tags image -count=1 -v ./test/image $(TAG)
	@echo "== $@ passed at $$(date -u +%T)"

# make test is the gate: CI runs it on a fresh machine, cold caches, two
# cores, and it must end within the hour (a cold run of the whole set was measured
# at two hours: about 170 core-minutes). It runs every suite's core: the
# real-LVM VM suites lvm, lifecycle, csi-sanity (mount and block), node
# safety's misuses and faults; the e2e's scenarios that take each flow
# through Kubernetes once; the image; the unit tests with every fuzz
# target's corpus. Both test binaries get -test.short, which skips the
# long tables and scenarios. make test-full (FULL=1) runs everything:
# those, csi-sanity thin, the bounded crash matrix and soak, the fuzz
# targets' 5 s runs, every e2e scenario and the upstream storage suite's
# subset. Each target below takes FULL=1 the same way.
FULL       ?=
SHORT       = $(if $(FULL),,-test.short)
GATE_VM     = lvm lifecycle sanity:^TestSanityMount$$ sanity:^TestSanityBlock$$ nodesafety faults
VM_SUITES   = $(if $(FULL),,CARVE_SUITES='$(or $(CARVE_SUITES),$(GATE_VM))')

# make test runs in three lanes, side by side: the real-LVM VM suites; the
# e2e (which starts its cluster once the Kubernetes build it waits for is
# done); the image, then (FULL=1) the fuzz targets, then the unit tests,
# niced. The VM suites are a chain of their own (a single-core TCG VM), so
# nothing waits for them. The unit tests need the Kubernetes build's etcd
# and kube-apiserver, so they wait for it there. The VM's test binaries are
# built first, so that the shared packages compile once rather than
# several times at once. Each output line carries its lane's target; the
# whole goes to _output/test.log too, and a failed run ends by naming
# what failed (scripts/test-failures.sh).
#
# TEST_DEADLINE (82m; FULL=1: none) ends the lanes, and names what was
# still running, before CI's 90 minutes end the whole job with nothing
# said: a run that hangs fails in time to say where.
TEST_DEADLINE ?= $(if $(FULL),0,82m)
test: ## the gate (CI): unit tests, the real-LVM suites' core in a VM, cluster mode's core end to end and the image, in three lanes; FULL=1: everything
	$(MAKE) --no-print-directory test-vm-build
	@mkdir -p _output
	timeout -k 60 $(TEST_DEADLINE) $(MAKE) --no-print-directory -j3 TAG_OUTPUT=1 vm-lane e2e image-then-unit 2>&1 | tee _output/test.log || \
		{ rc=$$?; scripts/test-failures.sh _output/test.log $$rc $(TEST_DEADLINE); exit 1; }

# make test's VM lane: the suites in one boot, then the boot with SELinux
# (half a minute).
vm-lane: test-vm
	$(MAKE) --no-print-directory test-vm-selinux

# carve and the test binaries of the VM suites make test-vm runs (.ci/run
# builds them first, on both cores).
test-vm-build:
	$(VM_SUITES) scripts/test-vm.sh --build-only

test-full: ## every test make test leaves out too: the long VM tables, crash matrix and soak (bounded), the fuzz runs, every e2e scenario and the upstream storage suite's subset (hours)
	$(MAKE) --no-print-directory test FULL=1

# make test's third lane; the image is also the e2e's prerequisite, made
# once.
image-then-unit: image
	$(BG) $(MAKE) --no-print-directory image-again VERSION=$(VERSION)
	$(if $(FULL),$(MAKE) --no-print-directory fuzz-ci)
	$(BG) $(MAKE) --no-print-directory test-unit

vet: ## gofmt and go vet clean, with every build tag
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./... $(TAG)
	$(GO) vet -tags vmtest ./... $(TAG)
	$(GO) vet -tags e2e ./... $(TAG)
	$(GO) vet -tags crashpoints ./... $(TAG)
	$(GO) vet -tags bench ./test/bench/... $(TAG)
	$(GO) vet -tags image ./test/image $(TAG)

# The agent's and the backend's tests run against a real etcd and
# kube-apiserver (test/apiserver), the ones scripts/k8s/build.sh builds for
# the e2e: it waits for a build under way (CI starts one beside make test)
# and prints their directory last. deploy/'s alert tests run promtool,
# which scripts/promtool.sh builds once, after the Kubernetes build rather
# than against it (that build is on the e2e's path), and names last. A
# failed build of either fails here, not as tests that skip.
# make image once more, under another name (the name is no part of the
# digest): one digest, or the build is not reproducible and make release
# would refuse it (build_again, scripts/image/oci.sh, checks both). make
# test runs it beside the e2e, with the first build's VERSION.
image-again:
	bash -c 'source scripts/image/oci.sh && build_again _output/image/carve.tar localhost/carve-again/carve:$(RELEASE_VERSION) $(VERSION)' $(TAG)
	@echo "== $@ passed at $$(date -u +%T)"

release: ## what a user installs from, in _output/release: Carve's image built twice (one digest, or no release) and the CSI sidecars' as OCI archives, deploy/kubernetes and the Helm chart with every image pinned by digest, an SPDX SBOM and SHA256SUMS (REGISTRY: the images' name prefix; deploy/README.md, Install from a release)
	VERSION=$(RELEASE_VERSION) REGISTRY=$(REGISTRY) scripts/release.sh _output/release
	@echo "== $@ passed at $$(date -u +%T)"

test-unit: vet check-generated ## vet and the generated files' check, then unit tests, real loop-device mounts (as root), a real API server for the agent and backend, the alerts' promtool tests, fuzz seeds
	assets="$$(scripts/k8s/build.sh | tail -n 1)" && promtool="$$(scripts/promtool.sh | tail -n 1)" && \
		KUBEBUILDER_ASSETS="$$assets" CARVE_PROMTOOL="$$promtool" $(GO) test -count=1 ./... $(TAG)
	$(GO) test -count=1 -tags crashpoints ./driver/crashpoint/ $(TAG)
	@echo "== $@ passed at $$(date -u +%T)"

test-vm: ## lvm package, CSI lifecycle, csi-sanity, node safety and faults on real LVM inside a QEMU VM; FULL=1 (or CARVE_SUITES) adds thin sanity, crash and soak and the long tables
	$(VM_SUITES) scripts/test-vm.sh $(SHORT) $(TAG)
	@echo "== $@ passed at $$(date -u +%T)"

# make test-vm-production: the production profile (users' nodes); test/README.md
# says which host setting each piece mirrors.
test-vm-production: ## the lifecycle suite in a VM set up as users' nodes are: systemd-udevd with lvm2's and device-mapper's rules, event autoactivation, dmeventd with a thin pool autoextend policy, lvm2's devices file, Carve on the machine's lvm.conf
	CARVE_VM_PROFILE=production CARVE_SUITES=lifecycle scripts/test-vm.sh $(SHORT) $(TAG)
	@echo "== $@ passed at $$(date -u +%T)"

# make test-vm-selinux: Debian's kernel booted with SELinux (permissive,
# the host's selinux-policy-default loaded), for the mounts with kubelet's
# context= option.
test-vm-selinux: ## kubelet's SELinux mount option (seLinuxMount: true) through NodeStage and NodePublish on a kernel booted with SELinux, its policy loaded
	CARVE_VM_SELINUX=1 CARVE_SUITES='lifecycle:^TestSELinuxMount$$' scripts/test-vm.sh $(TAG)
	@echo "== $@ passed at $$(date -u +%T)"

test-crash: ## the whole crash matrix on real LVM in the VM: carve killed after every command of every multi-step operation, 145 points, about an hour (test-vm runs a bounded part)
	CARVE_SUITES=crash CARVE_CRASH_EVERY=1 CARVE_CRASH_OPS=. scripts/test-vm.sh -test.timeout 230m
	@echo "== $@ passed at $$(date -u +%T)"

# make soak's run is SOAK_DURATION of chaos plus the calls still under way,
# the final reads and deletes (6 minutes took 10.5 in all); test-vm (and so
# CI) runs 90 s of it.
soak: ## chaos under load on real LVM in the VM: random CSI calls across thick, thin, striped and raid1 with checksummed writes while carve is SIGKILLed at random, invariants checked throughout (SOAK_DURATION, default 10m; SOAK_SEED repeats a run's choices)
	CARVE_SUITES=soak CARVE_SOAK_DURATION=$(or $(SOAK_DURATION),10m) $(if $(SOAK_SEED),CARVE_SOAK_SEED=$(SOAK_SEED)) \
		scripts/test-vm.sh -test.timeout 110m
	@echo "== $@ passed at $$(date -u +%T)"

test-vm-full: ## test-vm with every csi-sanity configuration's whole suite
	CARVE_SANITY_FULL=1 scripts/test-vm.sh

# make e2e FULL=1 (make test-full) runs every scenario, then the upstream
# storage suite's subset; make e2e (and so CI) the scenarios that take
# each flow once (test/e2e's fullRunOnly). UPSTREAM=off|subset|full says
# how much of the upstream suite runs.
e2e: image ## cluster mode on real Kubernetes components, Carve's image as pods under containerd on a host node and a VM node (FULL=1: every scenario, then the upstream storage suite's subset)
	CARVE_E2E_UPSTREAM=$(or $(UPSTREAM),$(if $(FULL),subset,off)) scripts/e2e.sh $(SHORT) $(TAG)
	@echo "== $@ passed at $$(date -u +%T)"

e2e-upstream: image ## the Kubernetes project's external storage suite against Carve, thick and thin: every spec for Carve's capabilities (UPSTREAM=subset: one of each suite and pattern)
	CARVE_E2E_UPSTREAM=$(or $(UPSTREAM),full) scripts/e2e.sh -test.run TestUpstreamStorageSuite -test.timeout 0 $(TAG)
	@echo "== $@ passed at $$(date -u +%T)"

# make soak-cluster's run is SOAK_DURATION of chaos, then every volume
# brought up, read and deleted (a few more minutes); make test-full runs
# TestClusterSoak for 90 s among the other scenarios, and make test (so
# CI) leaves it out (-test.short).
soak-cluster: image ## chaos under load in cluster mode: random claims (thick, thin, striped, raid1) on both VM nodes, writer pods, snapshots, restores on either node, expansions and VolumeMoves through Kubernetes while carve controller and each VM node's carve node are SIGKILLed at random, invariants checked throughout (SOAK_DURATION, default 20m; SOAK_SEED repeats a run's choices)
	CARVE_E2E_SOAK_DURATION=$(or $(SOAK_DURATION),20m) $(if $(SOAK_SEED),CARVE_E2E_SOAK_SEED=$(SOAK_SEED)) \
		scripts/e2e.sh -test.run TestClusterSoak -test.timeout 0 $(TAG)
	@echo "== $@ passed at $$(date -u +%T)"

bench-cluster: image ## cluster mode's figures: a pod with a new claim, and a StatefulSet of 50, to Running against the raw lvm2, mkfs and mount steps on the same VM node; a snapshot restored on the other node against dd over plain TCP; a 1 GiB move's downtime against its first copy (printed; _output/bench/cluster.json, transfer.json, move-*.json)
	CARVE_E2E_BENCH=1 scripts/e2e.sh -test.run '^(TestClusterBench|TestTransferBench|TestMoveBench)$$' -test.v -test.timeout 0 $(TAG)
	@echo "== $@ done at $$(date -u +%T)"

demo: ## carve standalone on a real VG: one volume through the whole CSI lifecycle
	scripts/demo.sh

# The benchmark report is a module of its own (test/bench/report/go.mod, for
# gonum/plot): ./... does not reach it, so lint vets and lints it apart; so
# the Kubernetes build's kube module (scripts/k8s/modules), whose two mains
# (etcd, fake-cri) are ours; its graph is the Kubernetes build's.
lint: vet ## vet, then golangci-lint (the driver's module, the benchmark report's, the Kubernetes build's kube module)
	golangci-lint run ./...
	$(GO) -C test/bench/report vet ./...
	cd test/bench/report && golangci-lint run ./...
	$(GO) -C scripts/k8s/modules/kube vet ./...
	cd scripts/k8s/modules/kube && golangci-lint run ./...

# Every fuzz target, as package:Function; test/layout holds the list to the
# sources (a target missing here, or listed and gone, fails the unit
# tests). Left out, seeds only (they run with the unit tests):
# driver/agent:FuzzCreateFromResource, whose package's TestMain starts a real
# etcd and kube-apiserver in every fuzz worker; driver/lvmvol's
# FuzzCreateVolume and FuzzCreateSnapshot fuzz the same specs without them.
FUZZ_TARGETS := \
	lvm:FuzzParseReports lvm:FuzzValidateName lvm:FuzzSplitDMName lvm:FuzzParseDMInfo lvm:FuzzParseThinPoolStatus lvm:FuzzMetadataHeaders lvm:FuzzDMStatus lvm:FuzzThinDump lvm:FuzzThinDelta \
	driver/volume:FuzzParseID driver/volume:FuzzIDRoundTrip driver/volume:FuzzValidateNodeID driver/volume:FuzzLVName driver/volume:FuzzRequesterFrom \
	driver/csi:FuzzParseParams driver/csi:FuzzParseMutable driver/csi:FuzzParseType driver/csi:FuzzSizeRange driver/csi:FuzzCapabilities \
	driver/csi:FuzzTopology driver/csi:FuzzCreateSnapshot driver/csi:FuzzPageToken driver/csi:FuzzResolveDevice \
	driver/csi:FuzzUnpublishPath driver/csi:FuzzPublishPaths driver/csi:FuzzPublishRequest driver/csi:FuzzMetadataPager \
	driver/lvmvol:FuzzCreateVolume driver/lvmvol:FuzzCreateSnapshot driver/lvmvol:FuzzTags \
	driver/disks:FuzzParse driver/disks:FuzzParseBlkid \
	driver/nodepath:FuzzCheck driver/iolimit:FuzzPodOfTarget driver/nodefs:FuzzCheckMountFlags driver/nodefs:FuzzMountInfo driver/nodefs:FuzzParseMkfsOptions driver/crypt:FuzzMappingName \
	driver/transfer:FuzzReadFrame driver/transfer:FuzzReadRequest driver/nodecert:FuzzCheck \
	cmd/carve:FuzzParseVGs test/e2e:FuzzSoakWrites scripts/release:FuzzDpkgStatus
FUZZ_SEEDS_ONLY := driver/agent:FuzzCreateFromResource
FUZZTIME ?= 30s
# Fuzz workers per target (go test -parallel; default: one per core). CI
# runs one, at low priority, beside the e2e.
FUZZPARALLEL ?= 0

fuzz: ## each fuzz target (FUZZ_TARGETS) for FUZZTIME (30s), from its committed corpus (testdata/fuzz); CI: make fuzz-ci
	@set -e; for t in $(FUZZ_TARGETS); do \
		GO=$(GO) scripts/fuzz.sh $$t $(FUZZTIME) $(FUZZPARALLEL) $(TAG); \
	done
	@echo "== $@ passed at $$(date -u +%T)"

fuzz-ci: ## make fuzz as make test-full runs it (after the image): every target for 5 s, one worker, niced
	$(BG) $(MAKE) --no-print-directory fuzz FUZZTIME=$(or $(CI_FUZZTIME),5s) FUZZPARALLEL=1

# The VM benchmark's knobs (CARVE_BENCH_QUICK=1 and others) are in
# docs/performance.md; its results land in _output/bench.
bench: ## benchmarks, figures printed, no pass/fail: report parsing, the CSI call path over gRPC and a transfer between nodes over loopback TLS; then Carve against raw lvm2 on real LVM in the VM (table, results.json and plots in _output/bench)
	$(GO) test -run '^$$' -bench . -benchmem ./lvm/ ./driver/csi/ ./driver/transfer/
	scripts/bench.sh

generate: ## deepcopy code and CRD manifests of driver/api (controller-gen)
	test -x $(CONTROLLER_GEN) || $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	$(CONTROLLER_GEN) object paths=./driver/api/...
	$(CONTROLLER_GEN) crd paths=./driver/api/... output:crd:artifacts:config=deploy/crds
	deploy/sync-crds.sh

check-generated: ## fail when deepcopy code or CRDs differ from what make generate writes (it rewrites them)
	scripts/check-generated.sh

clean:
	rm -rf bin _output
