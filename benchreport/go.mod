module github.com/aivax-examples/idempotent-callback/benchreport

go 1.27.0

toolchain go1.27.3

// The report reads the JSON shapes of the service's benchmarks
// (internal/bench/results) from the service module in this repository.
replace github.com/aivax-examples/idempotent-callback => ../

require (
	github.com/aivax-examples/idempotent-callback v0.0.0-00010101000000-000000000000
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da
)

require github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
