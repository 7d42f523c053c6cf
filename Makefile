# gpuattest: reproducible, attested GPU kernel releases.
#
#   make demo   install what is missing, build, run pipelines/quickstart.yaml,
#               sign its attestations with a fresh demo key, verify them and
#               write the run's report.html
#   make test   install what is missing, then go vet and go test -race (all of it)
#
# `make deps` installs nvcc (Debian non-free), bubblewrap, docker-registry,
# debootstrap, chromium and qemu-user-static (registering qemu-aarch64 with
# binfmt_misc) when they are missing (needs root); `make test` also installs
# cosign and oras (built from source into GOPATH/bin) for the interop tests,
# and .ci/k8s builds the Kubernetes control plane internal/k8stest starts
# (cached by version under /var/cache/gpuattest-test; 14-18 minutes cold).
#
#   make gpu-check   build the GPU check's bundle (bin/gpu-check: gpuattest,
#               the harness, fatbins for sm_80/sm_90, the pipeline and run.sh)
#               and run it: on the GPU when this machine has one, else
#               SIMULATED (GPUATTEST_FAKE_GPU=h100:8, the fake driver). On a GPU
#               machine with only the bundle: bin/gpu-check/run.sh
#
#   make bench  run the benchmarks of bench/; each writes its figures to
#               bench/results/<name>.txt beside the host's facts (bench/README.md)
#   make gpu-selfcheck   the device self-check from the bundle (run.sh
#               --selfcheck): the whole gpu-check with nvidia-smi at 2 Hz,
#               silent corruption named by repeat and device, a real
#               illegal-address fault; SIMULATED without /dev/nvidia0.
#               Writes bin/gpu-check/selfcheck/SELFCHECK.md, to commit as
#               docs/gpu-runs/<date>-<gpu>.md (docs/gpu-check.md)
#
#   make release   gpuattest's own release: dist/gpuattest-{linux-amd64,
#               linux-arm64,darwin-arm64,darwin-amd64,windows-amd64.exe} and
#               SHA256SUMS (the linux ones with cgo in the Debian 11 root,
#               arm64 with aarch64-linux-gnu-gcc, each glibc <= 2.28; the
#               others CGO_ENABLED=0), built by pipelines/gpuattest-release.yaml
#               (twice: reproducible: check), signed with RELEASE_KEY and
#               verified (docs/release.md). make release-qemu then checks that
#               the arm64 binary, under qemu-aarch64, verifies it as the amd64
#               one does. make gpu-check-bundle-arm64 / gpu-selfcheck-arm64:
#               the gpu-check bundle for Grace (aarch64) nodes and its
#               simulated self-check under qemu (docs/gpu-check.md)
#
#   make demo-publish   after make demo: push the demo run to a docker-registry
#               it starts on 127.0.0.1, verify it from there (gpuattest and
#               cosign; oras discover lists the bundles), copy it to an OCI
#               layout, verify that offline, stop the registry

GO       ?= go
BIN      := bin/gpuattest
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# go-nvml's header marks many calls deprecated; keep cgo quiet, also when
# the environment sets its own CGO_CFLAGS (they are kept, the flag added).
export CGO_CFLAGS := $(or $(CGO_CFLAGS),-O2 -g) -Wno-deprecated-declarations
export PATH := $(PATH):$(shell $(GO) env GOPATH)/bin

.PHONY: all deps test-deps build test demo demo-publish gpu-check gpu-check-bundle gpu-selfcheck gpu-check-bundle-arm64 gpu-selfcheck-arm64 generate bench clean release release-binaries release-qemu

DEMO := .gpuattest/demo
# The quickstart validates on the CPU backend where there is no GPU, which
# the default gpu-validation policy refuses: the demo verifies with the CPU
# tier, by name. On a GPU box, `make demo DEMO_POLICY=builtin:default`
# asks for GPU coverage of sm_80 and sm_90 instead.
DEMO_POLICY ?= builtin:cpu-tier
# The demo key lives outside the repository: run refuses a key inside the
# pipeline's root, where every step could read it.
DEMO_KEY := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gpuattest/demo-key/demo

all: build

deps:
	bash .ci/install

test-deps: deps
	bash .ci/cosign
	bash .ci/oras
	bash .ci/k8s

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gpuattest

generate:
	$(GO) generate ./...

test: test-deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 60m ./...
	@# The adversarial campaign (its goals are CPU seconds and peak RSS per
	@# call) and the same-run benchmark gate's timing acceptance, each alone
	@# so that no other package's tests load the machine beside it.
	GPUATTEST_CAMPAIGN=1 $(GO) test -count=1 -timeout 10m -run '^TestCampaign$$' -v ./bench/adversarial/
	GPUATTEST_REALWORK=1 $(GO) test -count=1 -timeout 10m -run '^TestReferenceGateOnRealWork$$' -v ./pipeline/suite/

demo: deps build
	rm -rf $(DEMO) $(dir $(DEMO_KEY)) && mkdir -p $(DEMO) $(dir $(DEMO_KEY))
	$(BIN) lint pipelines/*.yaml
	$(BIN) device
	GPUATTEST_PASSWORD= $(BIN) key generate --output-key-prefix $(DEMO_KEY) --no-password
	$(BIN) run pipelines/quickstart.yaml --out $(DEMO)/run --key $(DEMO_KEY).key
	$(BIN) inspect kernels/build/*.fatbin
	@echo "verifying with --policy $(DEMO_POLICY) (builtin:cpu-tier: the CPU backend may have validated the kernels; it says nothing about a GPU)"
	$(BIN) verify --bundle $(DEMO)/run/attestations.intoto.jsonl --key $(DEMO_KEY).pub --policy $(DEMO_POLICY) kernels/build/*.fatbin
	$(BIN) report $(DEMO)/run --markdown $(DEMO)/run/summary.md

# demo-publish: the demo run goes to a registry started here and comes back
# verified. The registry listens on a free port of 127.0.0.1 (plain HTTP is
# allowed only to loopback) with its storage under $(DEMO); it is stopped
# whatever happens.
demo-publish: build test-deps
	@test -f $(DEMO)/run/attestations.intoto.jsonl || $(MAKE) demo
	bash .ci/demo-publish $(BIN) $(DEMO) $(DEMO_KEY).pub $(DEMO_POLICY)

GPU_CHECK := bin/gpu-check

gpu-check-bundle:
	LDFLAGS='$(LDFLAGS)' bash .ci/gpu-check/bundle $(CURDIR)/$(GPU_CHECK)

# On a machine without /dev/nvidia0 the check runs simulated, and says so.
gpu-check: gpu-check-bundle
	if [ -e /dev/nvidia0 ]; then $(GPU_CHECK)/run.sh; else $(GPU_CHECK)/run.sh --simulated; fi

# Without a GPU the simulated self-check runs inside the bundle's Debian 11
# build root (glibc 2.31, .ci/gpu-check/bullseye-root): the bundle must run
# on an older system than this one.
gpu-selfcheck: gpu-check-bundle
	if [ -e /dev/nvidia0 ]; then $(GPU_CHECK)/run.sh --selfcheck; else \
		root=$${GPU_CHECK_ROOT:-$$(.ci/gpu-check/bullseye-root)} && \
		.ci/gpu-check/in-bullseye "$$root" $(CURDIR)/$(GPU_CHECK) -- $(CURDIR)/$(GPU_CHECK)/run.sh --selfcheck --simulated; fi

# The gpu-check bundle for linux/arm64 (Grace: GH200, GB200), cross-built in
# the same root with Debian's aarch64-linux-gnu-gcc and -g++; its run.sh
# refuses an x86_64 machine, as the x86_64 bundle's refuses an aarch64 one.
GPU_CHECK_ARM64 := bin/gpu-check-arm64

gpu-check-bundle-arm64:
	LDFLAGS='$(LDFLAGS)' bash .ci/gpu-check/bundle $(CURDIR)/$(GPU_CHECK_ARM64) arm64

# The arm64 bundle's simulated self-check on this x86_64 machine, in the
# bullseye root under qemu-aarch64 (binfmt_misc, .ci/qemu-binfmt; the
# root's libc6-arm64-cross is the arm64 glibc), on a simulated node of 2
# GPUs (docs/gpu-check.md: 8 are too many for the emulated CPU).
# SELFCHECK_ARGS="--part 3" runs that part only.
gpu-selfcheck-arm64: gpu-check-bundle-arm64
	root=$${GPU_CHECK_ROOT:-$$(.ci/gpu-check/bullseye-root)} && \
		GPU_CHECK_QEMU=1 QEMU_LD_PREFIX=/usr/aarch64-linux-gnu .ci/gpu-check/in-bullseye "$$root" $(CURDIR)/$(GPU_CHECK_ARM64) -- \
		$(CURDIR)/$(GPU_CHECK_ARM64)/run.sh --selfcheck --simulated $(SELFCHECK_ARGS)

# bench: every benchmark of bench/, each one's output written to
# bench/results/<name>.txt beside the host's facts (host.txt); see
# bench/README.md for what each measures. BENCH="verify stats" runs only
# those.
bench: build
	GO=$(GO) bash .ci/bench $(BIN) $(BENCH)

# release: gpuattest's own release, built and signed by gpuattest
# (pipelines/gpuattest-release.yaml runs release-binaries as an exec step,
# twice, and signs its outputs), then verified (.ci/release/sign). The key
# is RELEASE_KEY.key (.pub beside it), made fresh without a password when
# missing; a real release names its own: make release RELEASE_KEY=PREFIX.
RELEASE_KEY ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gpuattest/release-key/release
DIST := dist

# VERSION and COMMIT are passed on, so that both builds of the step stamp
# the same (git describe --dirty answered -dirty in the second build's copy).
release: build
	VERSION='$(VERSION)' COMMIT='$(COMMIT)' bash .ci/release/sign $(BIN) $(RELEASE_KEY) $(DIST)

# release-binaries: the five binaries and SHA256SUMS into dist/, unsigned
# (.ci/release/build: the linux ones with cgo in the bullseye root).
# RELEASE_CI: where .ci is; the reproducibility check's second build runs
# in a copy of the tree without hidden directories, so make release names
# this tree's.
RELEASE_CI ?= .ci

release-binaries:
	LDFLAGS='$(LDFLAGS)' bash $(RELEASE_CI)/release/build $(DIST)

# release-qemu: after make release, the linux/arm64 binary under qemu
# verifies it with the same output and exit code as the linux/amd64 one
# (.ci/release/qemu-verify: four cases).
release-qemu:
	bash .ci/release/qemu-verify $(DIST)

clean:
	rm -rf bin .gpuattest
