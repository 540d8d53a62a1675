# fluffy build. `make build` puts fluffy and every builtin plugin under ./bin;
# `make test` runs the whole suite (what CI runs); `make bench` the benchmarks.
SHELL := /bin/bash
export GOTOOLCHAIN := local

GO        ?= go
BIN       := $(CURDIR)/bin
VERSION   ?= 0.1.0-dev
LDFLAGS   := -X main.Version=$(VERSION) -X main.SourceDir=$(CURDIR)
PLUGINS   := $(filter-out internal,$(notdir $(wildcard builtin-plugins/*)))
# Kernel packages run under the race detector as well.
RACE_PKGS := ./host/... ./policy/... ./manifests/... ./plugins/... ./pluginsdk/... ./sandbox/...

.PHONY: all build plugins demo test test-race vet fmt-check bench proto fuzz clean

all: build

build: $(BIN)/fluffy plugins

# The main job: fluffy changes examples/parseconfig test-first, offline
# (provider-replay), in real sandboxes, and commits the change.
demo: build
	bash examples/demo.sh

$(BIN)/fluffy: FORCE
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/fluffy

# Each builtin plugin lands in bin/plugins/<name>/ with its plugin.yaml and
# the sha256 of the binary just built stamped into it.
plugins: $(BIN)/stamp-manifest
	@set -e; for p in $(PLUGINS); do \
	  mkdir -p $(BIN)/plugins/$$p; \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/plugins/$$p/$$p ./builtin-plugins/$$p; \
	  $(BIN)/stamp-manifest -in builtin-plugins/$$p/plugin.yaml -bin $(BIN)/plugins/$$p/$$p -out $(BIN)/plugins/$$p/plugin.yaml >/dev/null; \
	  echo "built plugin $$p"; \
	done

$(BIN)/stamp-manifest: FORCE
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $@ ./manifests/cmd/stamp-manifest

# Tests that need the runtime adapter but do not build it themselves (the
# conformance suite's L2 items) use the one `build` just made.
test: export FLUFFY_RUNTIME_ADAPTER ?= $(BIN)/plugins/runtime-docker/runtime-docker
test: vet fmt-check build
	$(GO) test -count=1 -timeout 25m ./...
	$(GO) test -count=1 -race -timeout 20m $(RACE_PKGS)

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench: export FLUFFY_RUNTIME_ADAPTER ?= $(BIN)/plugins/runtime-docker/runtime-docker
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./...
	$(GO) run ./internal/benchharness -out $(BIN)/bench

# Regenerates every .pb.go from plugins/**/*.proto with the generator
# versions pinned in go.mod (tool directives) and Debian's protoc.
proto:
	@set -e; for f in $$(find plugins -name '*.proto' | sort); do \
	  protoc -I . \
	    --plugin=protoc-gen-go=$$($(GO) tool -n protoc-gen-go) \
	    --plugin=protoc-gen-go-grpc=$$($(GO) tool -n protoc-gen-go-grpc) \
	    --go_out=. --go_opt=paths=source_relative \
	    --go-grpc_out=. --go-grpc_opt=paths=source_relative \
	    $$f; \
	done

# Short fuzz runs of every fuzz target; the corpus in testdata/fuzz is kept.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 20s $$pkg; \
	  done; \
	done

clean:
	rm -rf $(BIN)

FORCE:
