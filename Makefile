# Samla. `make run` starts the whole service on the embedded default; `make test` runs every
# test (ClickHouse tests run when SAMLA_CLICKHOUSE_DSN is set, as .ci/run does).
GO       ?= go
BIN      := bin/samla
PKGS     := ./...
BENCHTIME ?= 2s
# make fuzz runs every native fuzz target for FUZZTIME; FUZZMINIMIZETIME bounds the minimisation
# of each new input (Go's default of 60s would take a short run's whole time).
FUZZTIME ?= 20s
FUZZMINIMIZETIME ?= 1s
FUZZ      = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME)

.PHONY: all build run test test-race bench bench-http fuzz lint fmt clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/samla

run: build
	./$(BIN) run

test:
	$(GO) test -count=1 -timeout 30m $(PKGS)

test-race:
	$(GO) test -race -count=1 -timeout 45m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 30m $(PKGS)

# make bench-http starts bin/samla on the embedded default (and with ClickHouse read models when
# SAMLA_CLICKHOUSE_DSN is set) beside the bare Gin handler of $(SHARED)/bench/ginbase, drives both
# with the same load and prints every row of issue 11's table: the status poll, polls right after
# the 201, POST /collections, 201 → visible, the projection rebuild, completed collections per
# CPU-second, memory after a POST load and one client's waiting collections against another's new
# ones. About 6 minutes on 2 cores (with ClickHouse); BENCHHTTPFLAGS passes flags, e.g.
# -quick (about 2 minutes), -skip memory,fairness,rebuild, -pprof, -profile-dir DIR, -v.
SHARED ?= ../shared
BENCHHTTPFLAGS ?=

bench-http: build
	@if [ -d "$(SHARED)/bench/ginbase" ]; then \
		(cd "$(SHARED)/bench/ginbase" && $(GO) build -o "$(CURDIR)/bin/ginbase" .) || exit 1; \
		ginbase=bin/ginbase; \
	else \
		echo "bench-http: $(SHARED)/bench/ginbase missing: no bare baseline (set SHARED=...)"; \
		ginbase=; \
	fi; \
	$(GO) run ./internal/benchhttp -samla $(BIN) -ginbase "$$ginbase" $(BENCHHTTPFLAGS)

# go test -fuzz takes one target of one package a run, so every target is listed. A failure
# stops the run and leaves the input under the package's testdata/fuzz/<target>/.
fuzz:
	$(FUZZ) -fuzz '^FuzzCreateCollectionV1$$' ./command/httpcmd
	$(FUZZ) -fuzz '^FuzzCreateCollectionV2$$' ./command/httpcmd
	$(FUZZ) -fuzz '^FuzzSupplementInfoCollectionInput$$' ./command/httpcmd
	$(FUZZ) -fuzz '^FuzzSupplementInfoResponseObject$$' ./command/httpcmd
	$(FUZZ) -fuzz '^FuzzCreateUser$$' ./command/httpcmd
	$(FUZZ) -fuzz '^FuzzCreateConsent$$' ./command/httpcmd
	$(FUZZ) -fuzz '^FuzzRequestCancellations$$' ./command/httpcmd
	$(FUZZ) -fuzz '^FuzzStrictUnmarshal$$' ./platform/httpapi
	$(FUZZ) -fuzz '^FuzzParse$$' ./domain/personnummer
	$(FUZZ) -fuzz '^FuzzSame$$' ./domain/namematch
	$(FUZZ) -fuzz '^FuzzParse$$' ./domain/poa
	$(FUZZ) -fuzz '^FuzzRender$$' ./domain/poa
	$(FUZZ) -fuzz '^FuzzParse$$' ./connectors/pdfletter
	$(FUZZ) -fuzz '^FuzzDecode$$' ./eventschema
	$(FUZZ) -fuzz '^FuzzFromMessage$$' ./eventschema
	$(FUZZ) -fuzz '^FuzzToMessage$$' ./eventschema
	$(FUZZ) -fuzz '^FuzzDecodeFast$$' ./eventschema
	$(FUZZ) -fuzz '^FuzzUnmarshalSealed$$' ./eventschema

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin data
