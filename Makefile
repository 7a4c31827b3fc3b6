# Samla. `make run` starts the whole service on the embedded default; `make test` runs every
# test (ClickHouse tests run when SAMLA_CLICKHOUSE_DSN is set, as .ci/run does).
GO       ?= go
BIN      := bin/samla
PKGS     := ./...
BENCHTIME ?= 2s

.PHONY: all build run test test-race bench lint fmt clean

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

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin data
