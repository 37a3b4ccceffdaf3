# Targets for humans and for .ci/run, which runs `make test`.

GO ?= go

.PHONY: build test test-short lint bench demo chaos fmt vet clean

# build compiles the braid binary into bin/.
build:
	$(GO) build -o bin/braid ./cmd/braid

# test builds and vets everything (a package's non-test files must build
# alone), fuzzes the canal frame decoder and the Go client's decoder of
# braid's binary stream for a few seconds each (a count of
# inputs, not a duration: go1.26's fuzzer can fail a clean run with
# "context deadline exceeded" when a duration ends, golang/go#75804),
# then runs every test once, uncached, with the race detector. Tests that
# read binlogs start their own mariadbd servers (internal/testutil/mysqltest).
test:
	$(GO) build ./... && $(GO) vet ./... && \
	$(GO) test -run '^$$' -fuzz FuzzReadFrame -fuzztime 40000x ./api/canal/ && \
	$(GO) test -run '^$$' -fuzz FuzzBinaryFrames -fuzztime 40000x ./client/ && \
	$(GO) test -race -count=1 -timeout 14m ./...

# test-short is the quick tier, for the edit-test loop: every test once,
# uncached, under -short, in under a minute on a warm build cache. Under
# -short the tests that start a process or need a server skip (mysqltest,
# braidproc, the Chromium tests, and those using MariaDB on 3306,
# PostgreSQL, Redis or RabbitMQ, each saying so); the pure ones run: the
# parsers, the merge core, the encoders, fuzz seeds, Kafka on kfake. No
# -race: the race detector costs the tier over four times the CPU (about
# 40 s of CPU without it, over 3 min with it), past the minute on two
# cores. It does not replace `make test`, which CI runs.
test-short:
	$(GO) test -short -count=1 -timeout 5m ./...

# lint fails when gofmt would change a file (and names it), then runs go
# vet, staticcheck and the layering test (internal/layering: the imports
# DESIGN.md allows). It installs staticcheck at STATICCHECK_VERSION into bin/
# when bin/staticcheck is missing, is another version, or was built by
# another Go than $(GO) (staticcheck loads code only as new as its own Go).
STATICCHECK_VERSION = v0.8.2

lint:
	@files="$$("$$($(GO) env GOROOT)/bin/gofmt" -l .)" || exit 1; \
	if [ -n "$$files" ]; then echo "gofmt -l: these files are not gofmt-ed:"; echo "$$files"; exit 1; fi
	$(GO) vet ./...
	@want="$$($(GO) env GOVERSION) honnef.co/go/tools $(STATICCHECK_VERSION)"; \
	have="$$($(GO) version -m bin/staticcheck 2>/dev/null | awk 'NR == 1 { g = $$2 } $$1 == "mod" { m = $$2 " " $$3 } END { print g, m }')"; \
	if [ "$$have" != "$$want" ]; then \
		echo "GOBIN=$(CURDIR)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)"; \
		GOBIN=$(CURDIR)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || exit 1; \
	fi
	bin/staticcheck ./...
	$(GO) test -count=1 ./internal/layering/

# bench runs each benchmark in bench/ five times (those that measure a
# one-off, once); they report ratios against a peer measured in the same
# run, and the run ends with a table of every result, also written to
# bench/results.json.
bench:
	BRAID_BENCH_RESULTS=$(CURDIR)/bench/results.json $(GO) test -run '^$$' -bench . -benchtime 5x -timeout 20m ./bench/...

# demo starts three MariaDB shards and a three-node braid cluster on this
# machine, streams a live order workload, and shows a takeover (see
# `braid demo --help`; Ctrl-C ends it).
demo:
	$(GO) run ./cmd/braid demo

# chaos runs a whole deployment (three MariaDB sources, three braid
# nodes, sinks into the machine's MariaDB, PostgreSQL and Redis and a
# kfake Kafka, a writer and two consumers) under a fault schedule drawn
# from SEED (default: a random one, printed first) for DURATION (default
# 3m), and checks the invariants from outside (docs/chaos.md). `make chaos SEED=N DURATION=D`
# replays a schedule; a failed run keeps every log and says where.
DURATION ?= 3m
chaos: build
	$(GO) run ./chaos/cmd/braid-chaos -braid bin/braid -duration $(DURATION) $(if $(SEED),-seed $(SEED))

fmt:
	$(GO) fmt ./...

vet:
	$(GO) vet ./...

clean:
	rm -rf bin/
