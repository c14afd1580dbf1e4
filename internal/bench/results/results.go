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

// The environment of TestThroughput (internal/bench): the file its
// Throughput is written to (unset: the test skips), and how long each cell
// runs (a Go duration; default 2s).
const (
	ThroughputEnv   = "BENCH_THROUGHPUT_OUT"
	CellDurationEnv = "BENCH_CELL_DURATION"
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

// The environment of TestColdStart (internal/bench): the file its ColdStart
// is written to (unset: the test skips), and the cold starts per build
// (default 7).
const (
	ColdStartEnv     = "BENCH_COLDSTART_OUT"
	ColdStartRunsEnv = "BENCH_COLDSTART_RUNS"
	// ColdStartOnlyEnv, when set, keeps the builds whose name contains
	// it (for running a few alone; make bench leaves it unset).
	ColdStartOnlyEnv = "BENCH_COLDSTART_ONLY"
)

// ColdStart is what TestColdStart (internal/bench) measured.
type ColdStart struct {
	HostArch string           `json:"host_arch"`
	Runs     int              `json:"runs"`
	Traced   int              `json:"traced"`
	Builds   []ColdStartBuild `json:"builds"`
}

// ColdStartBuild is one build of the bootstrap.
type ColdStartBuild struct {
	Name string `json:"name"`
	// Function is the function built: "callback" (also when empty, in
	// the results of revisions that measured only it) or "delivery".
	Function string `json:"function,omitempty"`
	Tags     string `json:"tags"`
	SQLite   bool   `json:"sqlite"`
	Tracing  bool   `json:"tracing"` // spans exported over OTLP/HTTP (to a loopback receiver)
	// NoExporter: built with -tags notrace, without the OpenTelemetry
	// SDK and its OTLP exporter.
	NoExporter    bool      `json:"no_exporter,omitempty"`
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

// InRegionEnv names the environment variable that makes TestInRegion
// (internal/bench) write its InRegion to the file it names.
const InRegionEnv = "BENCH_INREGION_OUT"

// InRegion is what TestInRegion measured: the callback path and the bare
// DynamoDB operations under it, through a loopback proxy in front of
// DynamoDB Local that counts every request, once adding no delay and once
// adding the in-region latency model's (package
// internal/bench/inregion).
type InRegion struct {
	Seed  uint64 `json:"seed"` // of the model's draws
	Ops   int    `json:"ops"`  // operations per sequential case
	Draws int    `json:"draws"`
	// Published are the quantiles the model draws from; Rules which
	// operation draws from which.
	Published []InRegionQuantiles `json:"published"`
	Rules     []InRegionRule      `json:"rules"`
	// Sequences are the model's own figures for sequences of operations,
	// drawn Draws times without sending anything.
	Sequences []InRegionSequence `json:"sequences"`
	Hops      []InRegionHop      `json:"hops"`
	// CapacityChecks are the floors' requests sent once more, asking for
	// ReturnConsumedCapacity: the rules' figure against DynamoDB Local's.
	CapacityChecks []InRegionCapacityCheck `json:"capacity_checks"`
}

// InRegionCapacityCheck is one request's capacity by AWS's billing rules
// (as the proxy computes it) and as DynamoDB Local reported it; Local is
// nil when it returned none.
type InRegionCapacityCheck struct {
	Request string         `json:"request"`
	Rules   InRegionUnits  `json:"rules"`
	Local   *InRegionUnits `json:"local"`
}

// InRegionUnits are capacity units.
type InRegionUnits struct {
	RCU float64 `json:"rcu"`
	WCU float64 `json:"wcu"`
}

// InRegionQuantiles are one operation's published latency, in ms.
type InRegionQuantiles struct {
	Name  string  `json:"name"`
	MinMs float64 `json:"min_ms"`
	P50ms float64 `json:"p50_ms"`
	P90ms float64 `json:"p90_ms"`
	P95ms float64 `json:"p95_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// InRegionRule names the quantiles an operation's delay is drawn from, when
// DynamoDB answers 200 (Done) and TransactionCanceledException (Cancelled).
type InRegionRule struct {
	Operation string `json:"operation"`
	Done      string `json:"done"`
	Cancelled string `json:"cancelled"`
}

// InRegionSequence is the model's latency of operations run one after
// another.
type InRegionSequence struct {
	Name  string  `json:"name"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

// InRegionHop is one way to DynamoDB Local: "local" (the proxy adds no
// delay) or "model".
type InRegionHop struct {
	Kind  string         `json:"kind"`
	Name  string         `json:"name"`
	Cases []InRegionCase `json:"cases"`
}

// Kinds of InRegionCase.
const (
	InRegionNew          = "new"           // a new operation through the whole callback path, one at a time
	InRegionNewParallel  = "new-parallel"  // the same from Workers concurrent clients
	InRegionRepeat       = "repeat"        // a repeat of a completed operation, one at a time
	InRegionRepeatCached = "repeat-cached" // the repeat on a warm instance whose result cache (core.Service.Cache) holds it
	InRegionGet          = "get"           // one bare strongly consistent GetItem of the operation
	InRegionPut          = "put"           // one bare conditional PutItem of an operation item
	InRegionTransact     = "transact"      // one bare TransactWriteItems of the same three items the store sends
	InRegionThreeWrites  = "three-writes"  // the Powertools pattern: claim, effect, completion, three requests
)

// Kinds of InRegionCase for the follow-ups, through the same callback path
// as InRegionNew and InRegionRepeat: add_comment on a fresh open ticket,
// close_ticket of one, and a repeat of each; without a destination (as
// the create_ticket cases), and with one (the ticket delivered, so the
// follow-up gets its delivery record and the outbox rule reads the ticket
// first; the kind ends in InRegionWithDestination).
const (
	InRegionCommentNew      = "comment-new"
	InRegionCommentRepeat   = "comment-repeat"
	InRegionCloseNew        = "close-new"
	InRegionCloseRepeat     = "close-repeat"
	InRegionWithDestination = "-destination"
)

// InRegionCase is one measured operation on one hop.
type InRegionCase struct {
	Kind    string  `json:"kind"`
	Name    string  `json:"name"` // as the report shows it
	Workers int     `json:"workers"`
	Ops     int     `json:"ops"`
	Seconds float64 `json:"seconds"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	// Requests counts the requests the proxy received, by operation;
	// Cancelled those answered TransactionCanceledException, Abandoned
	// those whose client had stopped waiting by the time of the answer.
	Requests  map[string]int `json:"requests"`
	Cancelled int            `json:"cancelled"`
	Abandoned int            `json:"abandoned,omitempty"`
	// RCU and WCU are the capacity consumed by all Ops, by AWS's billing
	// rules; Disagreed lists where DynamoDB Local, asked, reported another
	// figure.
	RCU       float64  `json:"rcu"`
	WCU       float64  `json:"wcu"`
	Disagreed []string `json:"disagreed,omitempty"`
	// Mean and Tail split the time of the operations (all of them, and
	// those at or above the p99) into the delay the model drew, the time
	// the proxy slept beyond it (timer overshoot on a busy machine),
	// DynamoDB Local's time and the rest (the handler, the SDK, loopback
	// HTTP and the proxy's own work). Only for
	// one-at-a-time cases, where the proxy's counters belong to one
	// operation.
	// P99 is each part's own p99 (the parts' p99s do not add up to the
	// total's: their tails fall on different operations).
	Mean *InRegionSplit `json:"mean,omitempty"`
	Tail *InRegionSplit `json:"tail,omitempty"`
	P99  *InRegionSplit `json:"p99,omitempty"`
	// Other counts answers other than the expected one, by outcome.
	Other map[string]int `json:"other,omitempty"`
}

// InRegionSplit is where the time of some operations went, in mean ms.
type InRegionSplit struct {
	Ops         int     `json:"ops"`
	TotalMs     float64 `json:"total_ms"`
	DelayMs     float64 `json:"delay_ms"`     // drawn by the model
	OvershootMs float64 `json:"overshoot_ms"` // slept beyond the drawn delay
	LocalMs     float64 `json:"local_ms"`
	RestMs      float64 `json:"rest_ms"`
}

// PerSecond is the case's operations per second.
func (c InRegionCase) PerSecond() float64 {
	if c.Seconds <= 0 {
		return 0
	}
	return float64(c.Ops) / c.Seconds
}

// RequestsPerOp is the DynamoDB requests per operation.
func (c InRegionCase) RequestsPerOp() float64 {
	n := 0
	for _, v := range c.Requests {
		n += v
	}
	return perOp(float64(n), c.Ops)
}

// RCUPerOp and WCUPerOp are the capacity per operation.
func (c InRegionCase) RCUPerOp() float64 { return perOp(c.RCU, c.Ops) }

// WCUPerOp is the write capacity per operation.
func (c InRegionCase) WCUPerOp() float64 { return perOp(c.WCU, c.Ops) }

func perOp(v float64, ops int) float64 {
	if ops <= 0 {
		return 0
	}
	return v / float64(ops)
}
