// Package results holds what the throughput and cold-start tests of
// internal/bench measured, as the JSON files they write and the report
// reads (package report of the benchreport module). It imports nothing
// outside the standard library, so the benchmarks build at any revision
// they are copied into, and the benchreport module needs no more of the
// service than this package.
package results

import (
	"encoding/json"
	"fmt"
	"os"
)

// Throughput is what TestThroughput (internal/bench) measured: one cell per
// store, kind of operation and number of concurrent clients.
type Throughput struct {
	// CellSeconds is how long each cell ran.
	CellSeconds float64          `json:"cell_seconds"`
	Cells       []ThroughputCell `json:"cells"`
}

// ThroughputCell is one store, mode and concurrency.
type ThroughputCell struct {
	Store     string  `json:"store"`      // as the report shows it
	StoreKind string  `json:"store_kind"` // "dynamodb" or "sqlite"
	Mode      string  `json:"mode"`       // "new" or "repeat"
	Clients   int     `json:"clients"`
	Ops       int     `json:"ops"`
	Seconds   float64 `json:"seconds"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	// Other counts answers other than the expected one, by outcome.
	Other map[string]int `json:"other,omitempty"`
}

// PerSecond is the cell's callbacks per second.
func (c ThroughputCell) PerSecond() float64 {
	if c.Seconds <= 0 {
		return 0
	}
	return float64(c.Ops) / c.Seconds
}

// ColdStart is what TestColdStart (internal/bench) measured.
type ColdStart struct {
	HostArch string           `json:"host_arch"`
	Runs     int              `json:"runs"`
	Traced   int              `json:"traced"`
	Builds   []ColdStartBuild `json:"builds"`
}

// ColdStartBuild is one build of the bootstrap.
type ColdStartBuild struct {
	Name          string    `json:"name"`
	Tags          string    `json:"tags"`
	SQLite        bool      `json:"sqlite"`
	HostBytes     int64     `json:"host_bytes"`
	ARM64Bytes    int64     `json:"arm64_bytes"`
	InitMs        []float64 `json:"init_ms"`         // the emulator's INIT REPORT of each cold start
	FirstMs       []float64 `json:"first_invoke_ms"` // the first invoke's REPORT Duration
	PackageInitMs []float64 `json:"package_init_ms"` // total package initialisation of each traced start
	// TopPackages are the largest package initialisers, slowest first
	// (mean over the traced starts).
	TopPackages []PackageInit `json:"top_packages"`
}

// PackageInit is one package's initialisation under GODEBUG=inittrace=1.
type PackageInit struct {
	Package string  `json:"package"`
	Ms      float64 `json:"ms"`
	Bytes   int64   `json:"bytes"`
}

// WriteJSON writes v to path, indented.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// ReadJSON reads path into v, refusing unknown fields so that a renamed
// field fails here instead of rendering as zero.
func ReadJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// DeliveryMatrixEnv names the environment variable that makes
// TestDeliveryFailureMatrix write its DeliveryMatrix to the file it names.
const DeliveryMatrixEnv = "BENCH_DELIVERY_MATRIX_OUT"

// DeliveryMatrix is what TestDeliveryFailureMatrix (internal/store/sqlite,
// internal/store/dynamo) counted: the helpdesk requests each ticket took
// under each failure mode the fake helpdesk scripts, per destination.
type DeliveryMatrix struct {
	MaxAttempts     int                 `json:"max_attempts"`
	ClientTimeoutMs float64             `json:"client_timeout_ms"`
	Rows            []DeliveryMatrixRow `json:"rows"`
}

// DeliveryMatrixRow is one failure mode against one destination.
type DeliveryMatrixRow struct {
	Mode        string `json:"mode"`
	Destination string `json:"destination"`
	State       string `json:"state"`   // the ticket's final delivery state
	Creates     int    `json:"creates"` // create requests the fake received
	Lookups     int    `json:"lookups"` // lookup requests the fake received
	Steps       int    `json:"steps"`   // engine runs until the state was final
}

// Calls is the helpdesk requests of the row, creates and lookups.
func (r DeliveryMatrixRow) Calls() int { return r.Creates + r.Lookups }
