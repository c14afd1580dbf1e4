export GOTOOLCHAIN := go1.27.3

BIN := $(CURDIR)/.cache/bin

.PHONY: tools test vet unit lint vuln

# Install DynamoDB Local, aws-lambda-rie, golangci-lint, govulncheck and the
# offline vulnerability database into .cache/ (idempotent).
tools:
	bash scripts/tools.sh

test: vet unit lint vuln

vet:
	go vet ./...

unit:
	go test -race -count=1 ./...

lint:
	$(BIN)/golangci-lint run ./...

vuln:
	$(BIN)/govulncheck -db file://$(CURDIR)/.cache/vulndb ./...
