# Every Go command here runs on Go 1.27.3: the machine's own Go ignores the
# toolchain line of go.mod, and 1.26.8 ships known net/http and crypto/tls
# vulnerabilities in a deployed binary.
export GOTOOLCHAIN := go1.27.3
SHELL := /bin/bash

BIN    := $(CURDIR)/.cache/bin
CONFIG ?= config.json
# The Lambda build: arm64, no cgo, no RPC shim, and no SQLite (the deployed
# function only talks to DynamoDB; see docs/benchmarks.md for what SQLite
# would add).
LAMBDA_TAGS  := lambda.norpc,nosqlite
LAMBDA_BUILD := GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags $(LAMBDA_TAGS) -trimpath -ldflags='-s -w'
FUZZTIME ?= 10s

.PHONY: run test tools fmt vet cfnlint unit load path fuzz fuzz-long lint vuln build build-CallbackFunction \
	build-DeliveryFunction bench dynamodb-local seed-local clean

## run: the product locally on the embedded SQLite store, on loopback.
run:
	@test -f $(CONFIG) || cp config.example.json $(CONFIG)
	go run ./cmd/server -config $(CONFIG)

## test: everything CI runs. Installs the tools first (idempotent).
test: tools fmt vet cfnlint unit load path fuzz lint vuln

## tools: the Go tools of tools/go.mod (golangci-lint, govulncheck,
## aws-lambda-rie), DynamoDB Local and the offline vulnerability database,
## into .cache/.
tools:
	bash scripts/tools.sh

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## vet, unit and lint also cover the benchreport module (the generator of
## docs/benchmarks.md), a module of its own so that the service's go.mod
## does not list its dependency.
vet:
	go vet ./...
	go vet -tags $(LAMBDA_TAGS) ./...
	cd benchreport && go vet ./...

## cfnlint: cfn-lint (the linter `sam validate --lint` runs) on template.yaml,
## when it is installed; optional, so a machine without it skips the step.
cfnlint:
	@if cfn-lint --version >/dev/null 2>&1; then cfn-lint template.yaml && echo "cfn-lint $$(cfn-lint --version | cut -d' ' -f2): template.yaml passes"; \
	else echo "cfn-lint not installed: template lint skipped (optional)"; fi

## unit: the suite under the race detector, load tests aside.
unit:
	go test -race -count=1 -skip '^TestLoad' ./...
	cd benchreport && go test -race -count=1 ./...

## load: the multi-process load guarantees, one package at a time so that
## they do not compete with the rest of the suite for two cores.
load:
	go test -race -count=1 -p 1 -run '^TestLoad' -v ./internal/store/... 2>&1 | grep -E '^(---|ok|FAIL|PASS)|outcomes:|^ +[a-z_]+\.go:[0-9]+: '; exit $${PIPESTATUS[0]}

## path: the in-module files and packages one create_ticket runs on the
## callback function, and its repeat, counted from coverage profiles
## (TestCreateTicketPath; a plain go test skips it) against their budget.
path:
	go test -count=1 -covermode=count -coverpkg=$$(go list -m)/... -run '^TestCreateTicketPath$$' -v ./functions/callback 2>&1 | grep -v '^coverage: '; exit $${PIPESTATUS[0]}

## fuzz: each fuzz target for FUZZTIME (10s in CI; fuzz-long for hours).
fuzz:
	go test -run '^$$' -fuzz '^FuzzCanonicalKey$$' -fuzztime $(FUZZTIME) ./idem
	go test -run '^$$' -fuzz '^FuzzParseCall$$' -fuzztime $(FUZZTIME) ./internal/httpapi
	go test -run '^$$' -fuzz '^FuzzHandler$$' -fuzztime $(FUZZTIME) ./internal/httpapi
	go test -run '^$$' -fuzz '^FuzzJSONRPCBody$$' -fuzztime $(FUZZTIME) ./internal/mcpdoor

fuzz-long:
	$(MAKE) fuzz FUZZTIME=10m

lint:
	$(BIN)/golangci-lint run ./...
	$(BIN)/golangci-lint run --build-tags $(LAMBDA_TAGS) ./...
	cd benchreport && $(BIN)/golangci-lint run ./...

vuln:
	$(BIN)/govulncheck -db file://$(CURDIR)/.cache/vulndb ./...
	$(BIN)/govulncheck -db file://$(CURDIR)/.cache/vulndb -tags $(LAMBDA_TAGS) ./functions/...

## build: the deployable arm64 bootstraps in dist/ (callback) and
## dist/delivery/ (the delivery function).
build:
	$(LAMBDA_BUILD) -o dist/bootstrap ./functions/callback
	$(LAMBDA_BUILD) -o dist/delivery/bootstrap ./functions/delivery
	@ls -l dist/bootstrap dist/delivery/bootstrap

## build-CallbackFunction: what `sam build` calls (BuildMethod: makefile).
build-CallbackFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/callback

## build-DeliveryFunction: the delivery function, for `sam build`.
build-DeliveryFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/delivery

## bench: benchmarks, load and cold-start runs; writes docs/benchmarks.md.
## Refuses a tree with uncommitted changes (BENCHFLAGS=-allow-dirty flags the
## document instead); BENCH_BASE=<revision> adds a before/after comparison.
## The generator is the benchreport module: built into dist/ and run from the
## repository root, so the paths given to it are relative to the root.
BENCH_BASE ?=
BENCHFLAGS ?=
bench: tools
	go -C benchreport build -o $(CURDIR)/dist/benchreport .
	dist/benchreport -out docs/benchmarks.md $(if $(BENCH_BASE),-base $(BENCH_BASE)) $(BENCHFLAGS)

## dynamodb-local: DynamoDB Local in the foreground on port 8000. -sharedDb:
## one database whatever the access key, so tables made with the AWS CLI's
## credentials and the ones seed-local and the server use are the same.
dynamodb-local: tools
	cd .cache/dynamodb-local && java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar -inMemory -sharedDb -port 8000

## seed-local: the table and the users of config.example.json in DynamoDB Local.
seed-local:
	go run ./cmd/seedlocal -endpoint http://127.0.0.1:8000 -table tickets-local -config config.example.json

clean:
	rm -rf dist .aws-sam tickets.sqlite tickets.sqlite-wal tickets.sqlite-shm
