# gpuattest: reproducible, attested GPU kernel releases.
#
#   make demo   install what is missing, build, run pipelines/quickstart.yaml,
#               sign its attestations with a fresh demo key and verify them
#   make test   install what is missing, then go vet and go test -race (all of it)
#
# Both start with `make deps`, which installs nvcc (Debian non-free), bubblewrap,
# docker-registry, debootstrap and cosign when they are missing (needs root).

GO       ?= go
BIN      := bin/gpuattest
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# go-nvml's header marks many calls deprecated; keep cgo quiet.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export PATH := $(PATH):$(shell $(GO) env GOPATH)/bin

.PHONY: all deps build test demo generate bench clean

all: build

deps:
	bash .ci/install
	bash .ci/cosign

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gpuattest

generate:
	$(GO) generate ./...

test: deps
	$(GO) vet ./...
	$(GO) test -race -timeout 60m ./...

demo: deps build
	bash scripts/demo.sh $(BIN)

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 20x ./pipeline/engine/
	$(GO) run ./bench/stats

clean:
	rm -rf bin .gpuattest
