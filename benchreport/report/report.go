// Package report turns the measurements of `make bench` into
// docs/benchmarks.md. Command benchreport runs the benchmarks and tests with
// `go test -json` into a directory of raw results; [Load] reads that
// directory (benchmark lines through golang.org/x/perf/benchfmt, medians
// and before/after comparisons through golang.org/x/perf/benchmath, the
// throughput and cold-start results as the JSON types of package results) and
// [Render] writes the document from one text/template. Every figure comes
// from the directory; a benchmark or unit the template needs that is
// missing is an error, not an empty cell.
package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
)

// Files of a results directory.
const (
	FileMeta           = "meta.json"
	FileOverhead       = "overhead.json"      // BenchmarkHandlerOverhead, internal/httpapi
	FileOverheadBase   = "overhead.base.json" // the same at the base revision
	FileOpkey          = "opkey.json"         // BenchmarkCanonical, BenchmarkKey, idem
	FileOpkeyBase      = "opkey.base.json"
	FileStages         = "stages.json"   // BenchmarkStages, internal/httpapi
	FileBCrypt         = "bcrypt.json"   // BenchmarkVerify, internal/nonce
	FileDynamoDB       = "dynamodb.json" // BenchmarkDynamoDB, internal/bench
	FileSQLite         = "sqlite.json"   // BenchmarkSQLite, internal/bench
	FileSQLiteBase     = "sqlite.base.json"
	FileRoundTrips     = "roundtrips.json"     // TestRoundTripsPerCallback, internal/store/dynamo
	FileMCPOverhead    = "mcp-overhead.json"   // BenchmarkMCPHandlerOverhead, internal/mcpdoor
	FileJWT            = "jwt.json"            // BenchmarkVerify, internal/jwtauth
	FileMCPRoundTrips  = "mcp-roundtrips.json" // TestMCPRoundTrips, internal/mcpdoor
	mcpNew             = "BenchmarkMCPHandlerOverhead/new_key"
	mcpRepeat          = "BenchmarkMCPHandlerOverhead/repeat_key"
	mcpRoundTripsTest  = "TestMCPRoundTrips"
	FileThroughput     = "throughput.json" // results.Throughput from TestThroughput
	FileColdStart      = "coldstart.json"  // results.ColdStart from TestColdStart
	roundTripsTest     = "TestRoundTripsPerCallback"
	handlerNew         = "BenchmarkHandlerOverhead/new_key"
	handlerRepeat      = "BenchmarkHandlerOverhead/repeat_key"
	handlerEMFNew      = "BenchmarkHandlerOverhead/emf_new_key"
	handlerEMFRepeat   = "BenchmarkHandlerOverhead/emf_repeat_key"
	handlerPromNew     = "BenchmarkHandlerOverhead/prometheus_new_key"
	handlerPromRepeat  = "BenchmarkHandlerOverhead/prometheus_repeat_key"
	stagesRequest      = "BenchmarkStages/new_request"
	bcryptPrefix       = "BenchmarkVerify/cost="
	unitTime           = "sec/op"
	unitAllocs         = "allocs/op"
	unitBytes          = "B/op"
	unitRaw, unitFull  = "raw-µs", "full-µs"
	unitRatio          = "full/raw"
	unitCalls          = "ddb-calls/callback"
	confidence         = 0.95
	lambdaOneVCPUMB    = 1769 // Lambda's memory size with one full vCPU
	storeKindDynamoDB  = "dynamodb"
	storeKindSQLite    = "sqlite"
	throughputModeNew  = "new"
	throughputModeRept = "repeat"
)

// The handler with tracing: BenchmarkHandlerOverheadTracing,
// internal/httpapi, run in the same rounds as BenchmarkHandlerOverhead.
const (
	FileOverheadTracing = "overhead-tracing.json"
	tracingBench        = "BenchmarkHandlerOverheadTracing/"
)

// Files and names of the delivery measurements.
const (
	// BenchmarkDeliveryLocalWorker, internal/store/sqlite and internal/store/dynamo
	FileDeliveryWorkerSQLite   = "delivery-worker.sqlite.json"
	FileDeliveryWorkerDynamoDB = "delivery-worker.dynamodb.json"
	FileDeliveryStream         = "delivery-stream.json" // BenchmarkDeliveryStreamPath, functions/delivery
	// results.DeliveryMatrix from TestDeliveryFailureMatrix, per store
	FileDeliveryMatrixSQLite   = "delivery-matrix.sqlite.json"
	FileDeliveryMatrixDynamoDB = "delivery-matrix.dynamodb.json"
	FileDeliveryRoundTrips     = "delivery-roundtrips.json" // TestDeliveryRoundTrips, internal/store/dynamo
	FileStreamRoundTrips       = "stream-roundtrips.json"   // TestStreamCallsPerTicket, internal/deliverylambda
	FileDeliverySweep          = "delivery-sweep.json"      // BenchmarkDeliverySweepDrain, functions/delivery
	deliveryRoundTripsTest     = "TestDeliveryRoundTrips"
	streamRoundTripsTest       = "TestStreamCallsPerTicket"
	deliveryWorkerBench        = "BenchmarkDeliveryLocalWorker"
	deliveryStreamBench        = "BenchmarkDeliveryStreamPath"
	deliverySweepBench         = "BenchmarkDeliverySweepDrain"
	unitSweepDelivered         = "delivered/invocation"
	unitSweepSeconds           = "invocation-s"
	unitSweepPerMinute         = "tickets/min"
	handlerDeliverNew          = "BenchmarkHandlerOverhead/deliver_new_key"
	unitTickets                = "tickets/s"
	unitP50, unitP99           = "p50-ms", "p99-ms"
	unitHelpdeskCalls          = "helpdesk-calls/ticket"
)

// BenchmarkDeliveryLocalWorkerLinear, internal/store/sqlite: the local
// worker delivering to Linear (the fake's GraphQL side), without and with
// faults.
const (
	FileDeliveryWorkerLinear = "delivery-worker.linear.json"
	deliveryLinearBench      = "BenchmarkDeliveryLocalWorkerLinear"
)

// Meta describes the run: where, on what, with which commands. The
// command fills it in while it measures.
type Meta struct {
	Revision  string   `json:"revision"` // git revision the tree was at
	Dirty     bool     `json:"dirty"`    // the tree had uncommitted changes
	Base      string   `json:"base"`     // revision compared against, "" for none
	CPU       string   `json:"cpu"`      // model name
	CPUs      int      `json:"cpus"`     // logical CPUs
	Go        string   `json:"go"`       // go version
	Java      string   `json:"java"`     // java -version, first line
	OS        string   `json:"os"`       // kernel and architecture
	TempFS    string   `json:"temp_fs"`  // file system of the temporary directory
	LoadStart string   `json:"load_start"`
	LoadEnd   string   `json:"load_end"`
	Seconds   int      `json:"seconds"` // how long the run took
	Count     int      `json:"count"`   // runs per benchmark
	Commands  []string `json:"commands"`
}

// Stat is a median with its confidence interval.
type Stat struct {
	Center, Lo, Hi float64
	N              int
}

// Row is one benchmark's time, bytes and allocations.
type Row struct {
	Name                string
	Time, Bytes, Allocs Stat // Time in ns
}

// Comparison is one benchmark and unit, before and after.
type Comparison struct {
	Name, Unit string
	Base, New  Stat
	Delta      string // benchmath's "-12.34% (p=0.008 n=5)" or "~ (p=… n=…)"
}

// StorePath is one full-path-against-raw-store benchmark.
type StorePath struct {
	Name               string
	RawUs, FullUs      Stat
	Ratio              Stat
	Calls              *Stat // DynamoDB requests per callback; nil on SQLite
	BaseFullUs, BaseRt *Stat // at the base revision, when compared
}

// BCrypt is one work factor's verification time.
type BCrypt struct {
	Cost     int
	Ms       Stat
	AtMemory []MemoryTime // expected time at smaller Lambda memory sizes
}

// MemoryTime is the expected time at a Lambda memory size.
type MemoryTime struct {
	MB int
	Ms float64
}

// DeliveryBench is one delivery benchmark: tickets committed by callbacks and
// delivered to the fake helpdesk.
type DeliveryBench struct {
	Name          string
	Tickets       int // tickets per run (the benchmark's iterations)
	PerSecond     Stat
	P50ms, P99ms  Stat // from commit to delivered
	HelpdeskCalls Stat // helpdesk requests per ticket
}

// SweepDrain is one run of the scheduled sweep over a backlog of due
// tickets, at one helpdesk create delay.
type SweepDrain struct {
	Delay     string // the fake helpdesk's time per create, as the sub-benchmark names it
	Delivered Stat   // tickets delivered by the one invocation
	Seconds   Stat   // how long the invocation ran
	PerMinute Stat   // the drain rate
}

// MatrixRow is one failure mode against one destination, as each store's
// run of the failure matrix counted it.
type MatrixRow struct {
	Mode, Destination string
	SQLite, DynamoDB  results.DeliveryMatrixRow
}

// Report is everything the template shows.
type Report struct {
	Meta          Meta
	RoundTrips    []RoundTrip
	HandlerNew    Row
	HandlerRepeat Row
	// The same callbacks with metrics on: EMF in the log line (Lambda),
	// Prometheus counters (local server).
	HandlerEMFNew, HandlerEMFRepeat   Row
	HandlerPromNew, HandlerPromRepeat Row
	HandlerBaseNew                    *Row
	HandlerBaseRep                    *Row
	HarnessRequest                    Row
	Stages                            []Row
	Opkey                             []Row
	Comparisons                       []Comparison // empty without a base
	DynamoDBNew                       StorePath
	DynamoDBRepeat                    StorePath
	SQLiteNew                         StorePath
	SQLiteRepeat                      StorePath
	Throughput                        results.Throughput
	ColdStart                         results.ColdStart
	ColdNoSQLite                      results.ColdStartBuild
	ColdWithSQLite                    results.ColdStartBuild
	BCrypt                            []BCrypt
	LambdaSmallerMBs                  []int
	OneVCPUMB                         int
	Delivery                          DeliveryReport
	InRegion                          InRegionReport // TestInRegion (inregion.go)
	// MCP is the MCP door's figures; nil when the results hold none (a
	// results directory made before the door).
	MCP *MCPReport
	// ColdTracing is the Lambda build started with spans exported; nil
	// when the results hold none (made before tracing).
	ColdTracing *results.ColdStartBuild
	// ColdNoExporter is the callback's Lambda build without the
	// OpenTelemetry SDK and exporter (-tags notrace); nil when the results
	// hold none (made before that build was measured).
	ColdNoExporter *results.ColdStartBuild
	// ColdDelivery is the delivery function's cold starts; nil when the
	// results hold none (made before it was measured).
	ColdDelivery *DeliveryCold
	// Tracing is the handler's overhead with tracing wired; nil when the
	// results hold none (made before tracing).
	Tracing *TracingReport
}

// TracingReport is BenchmarkHandlerOverheadTracing: the handler of
// BenchmarkHandlerOverhead with the tracing the programs wire, as shipped
// with nothing to export (NoExport), with the door's span on the no-op
// provider (DoorNoop), and with spans recorded and exported to a
// discarding exporter (Export).
type TracingReport struct {
	NoExportNew, NoExportRepeat Row
	DoorNoopNew, DoorNoopRepeat Row
	ExportNew, ExportRepeat     Row
}

// MCPReport is what the report shows of the MCP door.
type MCPReport struct {
	HandlerNew, HandlerRepeat Row         // BenchmarkMCPHandlerOverhead
	JWT                       []Row       // BenchmarkVerify, internal/jwtauth, by algorithm
	RoundTrips                []RoundTrip // TestMCPRoundTrips
}

// DeliveryReport is what the report shows of delivery to the helpdesk.
type DeliveryReport struct {
	RoundTrips       []RoundTrip     // TestDeliveryRoundTrips
	StreamRoundTrips []RoundTrip     // TestStreamCallsPerTicket
	HandlerNew       Row             // BenchmarkHandlerOverhead/deliver_new_key
	Workers          []DeliveryBench // the local worker on SQLite, then on DynamoDB Local
	Stream           DeliveryBench
	StreamLambda     StreamLambda // the stream path under Lambda's polling: streamlambda.go
	Sweep            []SweepDrain // BenchmarkDeliverySweepDrain, by create delay
	Matrix           []MatrixRow
	MatrixSettings   results.DeliveryMatrix // the matrix's settings; Rows empty
}

// StorePaths are the four store benchmarks in the order the table shows.
func (rp *Report) StorePaths() []StorePath {
	return []StorePath{rp.DynamoDBNew, rp.DynamoDBRepeat, rp.SQLiteNew, rp.SQLiteRepeat}
}

// Load reads a results directory.
func Load(dir string) (*Report, error) {
	rp := &Report{LambdaSmallerMBs: []int{512, 1024}, OneVCPUMB: lambdaOneVCPUMB}
	if err := results.ReadJSON(filepath.Join(dir, FileMeta), &rp.Meta); err != nil {
		return nil, err
	}
	read := func(name string) (*testRun, error) { return readTestJSON(filepath.Join(dir, name)) }
	hasBase := rp.Meta.Base != ""

	rt, err := read(FileRoundTrips)
	if err != nil {
		return nil, err
	}
	if rp.RoundTrips, err = rt.roundTrips(roundTripsTest); err != nil {
		return nil, err
	}

	if rp.MCP, err = loadMCP(dir); err != nil {
		return nil, err
	}

	overhead, err := read(FileOverhead)
	if err != nil {
		return nil, err
	}
	if err := overhead.fillRows([]namedRow{
		{&rp.HandlerNew, handlerNew}, {&rp.HandlerRepeat, handlerRepeat}, {&rp.Delivery.HandlerNew, handlerDeliverNew},
		{&rp.HandlerEMFNew, handlerEMFNew}, {&rp.HandlerEMFRepeat, handlerEMFRepeat},
		{&rp.HandlerPromNew, handlerPromNew}, {&rp.HandlerPromRepeat, handlerPromRepeat},
	}); err != nil {
		return nil, err
	}
	if rp.Tracing, err = loadTracing(dir); err != nil {
		return nil, err
	}
	opkey, err := read(FileOpkey)
	if err != nil {
		return nil, err
	}
	if rp.Opkey, err = opkey.rows(); err != nil {
		return nil, err
	}
	stages, err := read(FileStages)
	if err != nil {
		return nil, err
	}
	if rp.Stages, err = stages.rows(); err != nil {
		return nil, err
	}
	if rp.HarnessRequest, err = stages.row(stagesRequest); err != nil {
		return nil, err
	}
	if hasBase {
		ob, err := read(FileOverheadBase)
		if err != nil {
			return nil, err
		}
		bn, err := ob.row(handlerNew)
		if err != nil {
			return nil, err
		}
		br, err := ob.row(handlerRepeat)
		if err != nil {
			return nil, err
		}
		rp.HandlerBaseNew, rp.HandlerBaseRep = &bn, &br
		kb, err := read(FileOpkeyBase)
		if err != nil {
			return nil, err
		}
		for _, pair := range [][2]*testRun{{ob, overhead}, {kb, opkey}} {
			cs, err := compare(pair[0], pair[1])
			if err != nil {
				return nil, err
			}
			rp.Comparisons = append(rp.Comparisons, cs...)
		}
	}

	for _, st := range []struct {
		file, bench string
		dynamo      bool
		nw, repeat  *StorePath
	}{
		{FileDynamoDB, "BenchmarkDynamoDB", true, &rp.DynamoDBNew, &rp.DynamoDBRepeat},
		{FileSQLite, "BenchmarkSQLite", false, &rp.SQLiteNew, &rp.SQLiteRepeat},
	} {
		run, err := read(st.file)
		if err != nil {
			return nil, err
		}
		if *st.nw, err = run.storePath(st.bench+"/new", st.dynamo); err != nil {
			return nil, err
		}
		if *st.repeat, err = run.storePath(st.bench+"/repeat", st.dynamo); err != nil {
			return nil, err
		}
	}
	if hasBase {
		lb, err := read(FileSQLiteBase)
		if err != nil {
			return nil, err
		}
		old, err := lb.storePath("BenchmarkSQLite/new", false)
		if err != nil {
			return nil, err
		}
		rp.SQLiteNew.BaseFullUs, rp.SQLiteNew.BaseRt = &old.FullUs, &old.Ratio
	}

	bc, err := read(FileBCrypt)
	if err != nil {
		return nil, err
	}
	for _, name := range bc.names() {
		costText, ok := strings.CutPrefix(name, bcryptPrefix)
		if !ok {
			continue
		}
		cost, err := strconv.Atoi(costText)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: work factor %q", FileBCrypt, name, costText)
		}
		s, err := bc.stat(name, unitTime)
		if err != nil {
			return nil, err
		}
		s = s.scale(1e3) // benchfmt reports ns/op as sec/op
		b := BCrypt{Cost: cost, Ms: s}
		for _, mb := range rp.LambdaSmallerMBs {
			b.AtMemory = append(b.AtMemory, MemoryTime{MB: mb, Ms: s.Center * lambdaOneVCPUMB / float64(mb)})
		}
		rp.BCrypt = append(rp.BCrypt, b)
	}
	if len(rp.BCrypt) == 0 {
		return nil, fmt.Errorf("%s: no %sN results", FileBCrypt, bcryptPrefix)
	}

	if err := results.ReadJSON(filepath.Join(dir, FileThroughput), &rp.Throughput); err != nil {
		return nil, err
	}
	for _, kind := range []string{storeKindDynamoDB, storeKindSQLite} {
		for _, mode := range []string{throughputModeNew, throughputModeRept} {
			if len(rp.cells(kind, mode)) == 0 {
				return nil, fmt.Errorf("%s: no %s %s cells", FileThroughput, kind, mode)
			}
		}
	}
	if err := results.ReadJSON(filepath.Join(dir, FileColdStart), &rp.ColdStart); err != nil {
		return nil, err
	}
	var haveWith, haveWithout bool
	for i, b := range rp.ColdStart.Builds {
		if len(b.InitMs) == 0 || len(b.FirstMs) == 0 || len(b.PackageInitMs) == 0 {
			return nil, fmt.Errorf("%s: build %q has no measurements", FileColdStart, b.Name)
		}
		if b.NoExporter && (b.Tracing || b.SQLite) {
			return nil, fmt.Errorf("%s: build %q: the build without the exporter is the Lambda build, not traced", FileColdStart, b.Name)
		}
		switch b.Function {
		case "", "callback":
		case "delivery":
			if err := rp.addDeliveryCold(&rp.ColdStart.Builds[i]); err != nil {
				return nil, err
			}
			continue
		default:
			return nil, fmt.Errorf("%s: build %q: unknown function %q", FileColdStart, b.Name, b.Function)
		}
		switch {
		case b.NoExporter:
			if rp.ColdNoExporter != nil {
				return nil, fmt.Errorf("%s: two callback builds without the exporter", FileColdStart)
			}
			rp.ColdNoExporter = &rp.ColdStart.Builds[i]
		case b.Tracing && b.SQLite:
			return nil, fmt.Errorf("%s: build %q: tracing is measured on the Lambda build, without SQLite", FileColdStart, b.Name)
		case b.Tracing:
			if rp.ColdTracing != nil {
				return nil, fmt.Errorf("%s: two builds with tracing", FileColdStart)
			}
			rp.ColdTracing = &rp.ColdStart.Builds[i]
		case b.SQLite:
			rp.ColdWithSQLite, haveWith = b, true
		default:
			rp.ColdNoSQLite, haveWithout = b, true
		}
	}
	if !haveWith || !haveWithout {
		return nil, fmt.Errorf("%s: want a build with and one without SQLite", FileColdStart)
	}
	if d := rp.ColdDelivery; d != nil && d.Lambda == nil {
		return nil, fmt.Errorf("%s: delivery builds without the Lambda build they are compared with", FileColdStart)
	}
	if err := rp.loadDelivery(dir); err != nil {
		return nil, err
	}
	if err := rp.loadInRegion(dir); err != nil {
		return nil, err
	}
	if err := rp.loadStreamLambda(dir); err != nil {
		return nil, err
	}
	if err := rp.loadFollowUps(dir); err != nil {
		return nil, err
	}
	return rp, nil
}

// loadDelivery reads the delivery benchmarks, the DynamoDB requests the
// delivery tests counted, and the failure matrix of both stores.
func (rp *Report) loadDelivery(dir string) error {
	for _, rt := range []struct {
		file, test string
		into       *[]RoundTrip
	}{
		{FileDeliveryRoundTrips, deliveryRoundTripsTest, &rp.Delivery.RoundTrips},
		{FileStreamRoundTrips, streamRoundTripsTest, &rp.Delivery.StreamRoundTrips},
	} {
		run, err := readTestJSON(filepath.Join(dir, rt.file))
		if err != nil {
			return err
		}
		if *rt.into, err = run.roundTrips(rt.test); err != nil {
			return fmt.Errorf("%s: %w", rt.file, err)
		}
	}
	for _, b := range []struct {
		file, bench, name string
		into              *DeliveryBench
	}{
		{FileDeliveryWorkerSQLite, deliveryWorkerBench, "local worker, SQLite", nil},
		{FileDeliveryWorkerDynamoDB, deliveryWorkerBench, "local worker, DynamoDB Local", nil},
		{FileDeliveryWorkerLinear, deliveryLinearBench + "/no-faults", "local worker, SQLite, to Linear", nil},
		{FileDeliveryWorkerLinear, deliveryLinearBench + "/faults", "local worker, SQLite, to Linear, one create in ten failing first", nil},
		{FileDeliveryStream, deliveryStreamBench, "stream path, DynamoDB Local", &rp.Delivery.Stream},
	} {
		run, err := readTestJSON(filepath.Join(dir, b.file))
		if err != nil {
			return err
		}
		d, err := run.delivery(b.bench, b.name)
		if err != nil {
			return fmt.Errorf("%s: %w", b.file, err)
		}
		if b.into != nil {
			*b.into = d
		} else {
			rp.Delivery.Workers = append(rp.Delivery.Workers, d)
		}
	}
	sweep, err := readTestJSON(filepath.Join(dir, FileDeliverySweep))
	if err != nil {
		return err
	}
	if rp.Delivery.Sweep, err = sweep.sweepDrain(deliverySweepBench); err != nil {
		return fmt.Errorf("%s: %w", FileDeliverySweep, err)
	}
	var lite, ddb results.DeliveryMatrix
	for _, m := range []struct {
		file string
		into *results.DeliveryMatrix
	}{{FileDeliveryMatrixSQLite, &lite}, {FileDeliveryMatrixDynamoDB, &ddb}} {
		if err := results.ReadJSON(filepath.Join(dir, m.file), m.into); err != nil {
			return err
		}
		if err := checkMatrix(m.into); err != nil {
			return fmt.Errorf("%s: %w", m.file, err)
		}
	}
	if lite.MaxAttempts != ddb.MaxAttempts || lite.ClientTimeoutMs != ddb.ClientTimeoutMs {
		return fmt.Errorf("%s and %s: the stores' matrices ran with different settings", FileDeliveryMatrixSQLite, FileDeliveryMatrixDynamoDB)
	}
	type key struct{ mode, dest string }
	byKey := map[key]results.DeliveryMatrixRow{}
	for _, r := range ddb.Rows {
		byKey[key{r.Mode, r.Destination}] = r
	}
	for _, r := range lite.Rows {
		d, ok := byKey[key{r.Mode, r.Destination}]
		if !ok {
			return fmt.Errorf("%s: no row for %q against %s, which %s has", FileDeliveryMatrixDynamoDB, r.Mode, r.Destination, FileDeliveryMatrixSQLite)
		}
		delete(byKey, key{r.Mode, r.Destination})
		rp.Delivery.Matrix = append(rp.Delivery.Matrix, MatrixRow{Mode: r.Mode, Destination: r.Destination, SQLite: r, DynamoDB: d})
	}
	for _, r := range ddb.Rows {
		if _, extra := byKey[key{r.Mode, r.Destination}]; extra {
			return fmt.Errorf("%s: no row for %q against %s, which %s has", FileDeliveryMatrixSQLite, r.Mode, r.Destination, FileDeliveryMatrixDynamoDB)
		}
	}
	rp.Delivery.MatrixSettings = results.DeliveryMatrix{MaxAttempts: lite.MaxAttempts, ClientTimeoutMs: lite.ClientTimeoutMs}
	return nil
}

// checkMatrix refuses a matrix with missing settings or incomplete rows.
func checkMatrix(m *results.DeliveryMatrix) error {
	if m.MaxAttempts <= 0 || m.ClientTimeoutMs <= 0 {
		return fmt.Errorf("max_attempts %d and client_timeout_ms %g must be positive", m.MaxAttempts, m.ClientTimeoutMs)
	}
	if len(m.Rows) == 0 {
		return fmt.Errorf("no rows")
	}
	seen := map[[2]string]bool{}
	for i, r := range m.Rows {
		if r.Mode == "" || r.Destination == "" || r.State == "" {
			return fmt.Errorf("row %d: mode, destination and state are required: %+v", i, r)
		}
		if r.Creates < 0 || r.Lookups < 0 || r.Steps < 1 {
			return fmt.Errorf("row %d (%s, %s): creates and lookups must not be negative, steps at least 1: %+v", i, r.Mode, r.Destination, r)
		}
		k := [2]string{r.Mode, r.Destination}
		if seen[k] {
			return fmt.Errorf("row %d: %q against %s twice", i, r.Mode, r.Destination)
		}
		seen[k] = true
	}
	return nil
}

// delivery summarizes a delivery benchmark; every run must have delivered
// the same number of tickets.
func (r *testRun) delivery(bench, name string) (DeliveryBench, error) {
	d := DeliveryBench{Name: name}
	for _, res := range r.Results {
		if baseName(res) != bench {
			continue
		}
		if d.Tickets != 0 && res.Iters != d.Tickets {
			return d, fmt.Errorf("%s: runs of %d and %d tickets; want one -benchtime Nx", bench, d.Tickets, res.Iters)
		}
		d.Tickets = res.Iters
	}
	var err error
	for _, u := range []struct {
		unit string
		into *Stat
	}{{unitTickets, &d.PerSecond}, {unitP50, &d.P50ms}, {unitP99, &d.P99ms}, {unitHelpdeskCalls, &d.HelpdeskCalls}} {
		if *u.into, err = r.stat(bench, u.unit); err != nil {
			return d, err
		}
	}
	return d, nil
}

// sweepDrain summarizes the sub-benchmarks bench/create=DELAY, in the
// order they ran; at least one is required.
func (r *testRun) sweepDrain(bench string) ([]SweepDrain, error) {
	var out []SweepDrain
	for _, name := range r.names() {
		delay, ok := strings.CutPrefix(name, bench+"/create=")
		if !ok {
			continue
		}
		d := SweepDrain{Delay: delay}
		var err error
		for _, u := range []struct {
			unit string
			into *Stat
		}{{unitSweepDelivered, &d.Delivered}, {unitSweepSeconds, &d.Seconds}, {unitSweepPerMinute, &d.PerMinute}} {
			if *u.into, err = r.stat(name, u.unit); err != nil {
				return nil, err
			}
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s/create=… results (benchmarks: %v)", bench, r.names())
	}
	return out, nil
}

// stat summarizes every value of unit that benchmark name reported.
func (r *testRun) stat(name, unit string) (Stat, error) {
	vs := r.values(name, unit)
	if len(vs) == 0 {
		return Stat{}, fmt.Errorf("no %s of %s in the results (benchmarks: %v)", unit, name, r.names())
	}
	return summarize(vs), nil
}

func summarize(vs []float64) Stat {
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(vs, &benchmath.DefaultThresholds), confidence)
	return Stat{Center: s.Center, Lo: s.Lo, Hi: s.Hi, N: len(vs)}
}

func (s Stat) scale(f float64) Stat {
	return Stat{Center: s.Center * f, Lo: s.Lo * f, Hi: s.Hi * f, N: s.N}
}

// row is a benchmark's time (ns), bytes and allocations; -benchmem is
// required.
func (r *testRun) row(name string) (Row, error) {
	t, err := r.stat(name, unitTime)
	if err != nil {
		return Row{}, err
	}
	b, err := r.stat(name, unitBytes)
	if err != nil {
		return Row{}, err
	}
	a, err := r.stat(name, unitAllocs)
	if err != nil {
		return Row{}, err
	}
	// benchfmt normalizes ns/op to sec/op; the tables show ns.
	return Row{Name: strings.TrimPrefix(name, "Benchmark"), Time: t.scale(1e9), Bytes: b, Allocs: a}, nil
}

// namedRow is where the row of the benchmark name goes.
type namedRow struct {
	dst  *Row
	name string
}

// fillRows sets each dst to its benchmark's row, in order; the first
// benchmark missing from the run is the error.
func (r *testRun) fillRows(rows []namedRow) error {
	for _, nr := range rows {
		row, err := r.row(nr.name)
		if err != nil {
			return err
		}
		*nr.dst = row
	}
	return nil
}

// rows are every benchmark of the run.
func (r *testRun) rows() ([]Row, error) {
	var out []Row
	for _, n := range r.names() {
		row, err := r.row(n)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no benchmark results")
	}
	return out, nil
}

func (r *testRun) storePath(name string, dynamo bool) (StorePath, error) {
	p := StorePath{Name: strings.TrimPrefix(name, "Benchmark")}
	var err error
	if p.RawUs, err = r.stat(name, unitRaw); err != nil {
		return p, err
	}
	if p.FullUs, err = r.stat(name, unitFull); err != nil {
		return p, err
	}
	if p.Ratio, err = r.stat(name, unitRatio); err != nil {
		return p, err
	}
	if dynamo {
		c, err := r.stat(name, unitCalls)
		if err != nil {
			return p, err
		}
		p.Calls = &c
	}
	return p, nil
}

// compare holds every benchmark and unit of base against the same in cur
// with benchmath's Mann-Whitney U test, as benchstat does.
func compare(base, cur *testRun) ([]Comparison, error) {
	var out []Comparison
	for _, name := range cur.names() {
		for _, unit := range cur.units(name) {
			bv, nv := base.values(name, unit), cur.values(name, unit)
			if len(bv) == 0 {
				continue // new at this revision: nothing to compare
			}
			scale, shown := 1.0, unit
			if unit == unitTime {
				scale, shown = 1e9, "ns/op"
			}
			bs := benchmath.NewSample(bv, &benchmath.DefaultThresholds)
			ns := benchmath.NewSample(nv, &benchmath.DefaultThresholds)
			c := benchmath.AssumeNothing.Compare(bs, ns)
			b, n := summarize(bv).scale(scale), summarize(nv).scale(scale)
			out = append(out, Comparison{Name: strings.TrimPrefix(name, "Benchmark"), Unit: shown, Base: b, New: n,
				Delta: c.FormatDelta(b.Center, n.Center) + " (" + c.String() + ")"})
		}
	}
	return out, nil
}

// cells are the throughput cells of a store kind and mode, by clients.
func (rp *Report) cells(kind, mode string) []results.ThroughputCell {
	var out []results.ThroughputCell
	for _, c := range rp.Throughput.Cells {
		if c.StoreKind == kind && c.Mode == mode {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b results.ThroughputCell) int { return a.Clients - b.Clients })
	return out
}

// Render writes the document.
func Render(rp *Report) ([]byte, error) {
	var b strings.Builder
	if err := tmpl.Execute(&b, rp); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// WriteFile renders rp to path.
func WriteFile(rp *Report, path string) error {
	b, err := Render(rp)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644) //nolint:gosec // a document of the repository, readable like every checked-in file
}

// loadMCP reads the MCP door's results; none (no overhead file) is nil.
func loadMCP(dir string) (*MCPReport, error) {
	if _, err := os.Stat(filepath.Join(dir, FileMCPOverhead)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	m := &MCPReport{}
	overhead, err := readTestJSON(filepath.Join(dir, FileMCPOverhead))
	if err != nil {
		return nil, err
	}
	if err := overhead.fillRows([]namedRow{{&m.HandlerNew, mcpNew}, {&m.HandlerRepeat, mcpRepeat}}); err != nil {
		return nil, err
	}
	jwt, err := readTestJSON(filepath.Join(dir, FileJWT))
	if err != nil {
		return nil, err
	}
	if m.JWT, err = jwt.rows(); err != nil {
		return nil, fmt.Errorf("%s: %w", FileJWT, err)
	}
	rt, err := readTestJSON(filepath.Join(dir, FileMCPRoundTrips))
	if err != nil {
		return nil, err
	}
	if m.RoundTrips, err = rt.roundTrips(mcpRoundTripsTest); err != nil {
		return nil, err
	}
	return m, nil
}

// loadTracing reads BenchmarkHandlerOverheadTracing's rows; nil without
// the file (a results directory made before tracing).
func loadTracing(dir string) (*TracingReport, error) {
	run, err := readTestJSON(filepath.Join(dir, FileOverheadTracing))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	tr := &TracingReport{}
	if err := run.fillRows([]namedRow{
		{&tr.NoExportNew, tracingBench + "noexport_new_key"}, {&tr.NoExportRepeat, tracingBench + "noexport_repeat_key"},
		{&tr.DoorNoopNew, tracingBench + "door_noop_new_key"}, {&tr.DoorNoopRepeat, tracingBench + "door_noop_repeat_key"},
		{&tr.ExportNew, tracingBench + "export_new_key"}, {&tr.ExportRepeat, tracingBench + "export_repeat_key"},
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", FileOverheadTracing, err)
	}
	return tr, nil
}

// DeliveryCold is the delivery function's cold starts: its Lambda build
// (no exporter configured), the same build with spans exported, and the
// build without the exporter linked (-tags notrace); the last two nil
// when not measured.
type DeliveryCold struct {
	Lambda, Tracing, NoExporter *results.ColdStartBuild
}

// addDeliveryCold files a delivery build of coldstart.json.
func (rp *Report) addDeliveryCold(b *results.ColdStartBuild) error {
	if b.SQLite {
		return fmt.Errorf("%s: build %q: the delivery function is measured without SQLite", FileColdStart, b.Name)
	}
	if rp.ColdDelivery == nil {
		rp.ColdDelivery = &DeliveryCold{}
	}
	slot := &rp.ColdDelivery.Lambda
	switch {
	case b.Tracing:
		slot = &rp.ColdDelivery.Tracing
	case b.NoExporter:
		slot = &rp.ColdDelivery.NoExporter
	}
	if *slot != nil {
		return fmt.Errorf("%s: two delivery builds like %q", FileColdStart, b.Name)
	}
	*slot = b
	return nil
}
