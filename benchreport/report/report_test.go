package report

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/benchmarks.golden.md from testdata/run")

// The recorded results in testdata/run come from one short real run
// (benchreport -count 2 -cell 300ms -coldstart-runs 1 -base
// HEAD -keep ...): `go test -json` streams and the JSON of the throughput
// and cold-start tests. overhead.json, overhead-tracing.json,
// delivery-worker.linear.json and coldstart.json come from a separate run
// of the same commands (BenchmarkHandlerOverhead and BenchmarkHandlerOverheadTracing
// alternating, two rounds; cold starts with -coldstart-runs 3), on a
// loaded machine; inregion.json and delivery-stream-followups.json from
// their own runs (see TestInRegionFromRecordedRun and
// TestFollowUpsFromRecordedRun). The document rendered from them must stay the
// golden one; a change to the template or the arithmetic shows up here as
// a diff to review (go test -run TestGolden -update ./report, in benchreport/).
func TestGolden(t *testing.T) {
	rp := loadRecorded(t)
	got := render(t, rp)
	golden := filepath.Join("testdata", "benchmarks.golden.md")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("rendered report differs from %s (run with -update after checking the change):\n%s", golden, firstDiff(string(want), string(got)))
	}
	for _, s := range []string{"<no value>", "NaN", "%!"} {
		if strings.Contains(string(got), s) {
			t.Errorf("rendered report contains %q", s)
		}
	}
}

// Spot checks on the golden input, so that the golden file is not merely
// self-consistent: figures computed by hand from the recorded events.
func TestFiguresFromRecordedRun(t *testing.T) {
	rp := loadRecorded(t)
	if len(rp.RoundTrips) != 4 || rp.RoundTrips[0].Requests != 2 || rp.RoundTrips[1].Requests != 1 {
		t.Errorf("round trips = %+v, want 2, 1, 1, 1", rp.RoundTrips)
	}
	if rp.HandlerNew.Time.N != rp.Meta.Count || rp.HandlerNew.Time.Center <= 0 {
		t.Errorf("handler new key: %+v, want %d samples", rp.HandlerNew.Time, rp.Meta.Count)
	}
	if rp.Meta.Base == "" || len(rp.Comparisons) == 0 {
		t.Errorf("recorded run has a base, but no comparisons")
	}
	if rp.DynamoDBNew.Calls == nil || rp.SQLiteNew.Calls != nil {
		t.Errorf("DynamoDB must report calls per callback, SQLite none")
	}
	if got := len(rp.Throughput.Cells); got != 16 {
		t.Errorf("throughput cells = %d, want 16", got)
	}
	if rp.Delivery.HandlerNew.Allocs.N != rp.Meta.Count || rp.Delivery.HandlerNew.Allocs.Center != 70 {
		t.Errorf("handler with a destination: %+v, want %d samples of 70 allocations", rp.Delivery.HandlerNew.Allocs, rp.Meta.Count)
	}
	if got := rp.Delivery.RoundTrips; len(got) != 6 || got[4].Requests != 2 || !strings.HasPrefix(got[4].Step, "delivering one ticket") {
		t.Errorf("delivery round trips = %+v, want 6 steps, the fifth delivering one ticket in 2", got)
	}
	if got := rp.Delivery.StreamRoundTrips; len(got) != 2 || got[0].Requests != 10 || got[1].Requests != 0 {
		t.Errorf("stream round trips = %+v, want 10 and 0", got)
	}
	// The recorded SQLite worker runs: 518.7 and 486.2 tickets/s, p99 232.8
	// and 122.4 ms.
	if len(rp.Delivery.Workers) != 4 {
		t.Fatalf("delivery workers = %+v, want SQLite, DynamoDB, and Linear without and with faults", rp.Delivery.Workers)
	}
	// The Linear rows: 500 tickets each; without faults one helpdesk call
	// per ticket, with one create in ten failing first more than one.
	for i, want := range []struct {
		name  string
		calls func(float64) bool
	}{{"to Linear", func(c float64) bool { return c == 1 }}, {"failing first", func(c float64) bool { return c > 1 }}} {
		w := rp.Delivery.Workers[2+i]
		if !strings.Contains(w.Name, want.name) || w.Tickets != 500 || w.PerSecond.N != 2 || !want.calls(w.HelpdeskCalls.Center) {
			t.Errorf("Linear worker %d = %+v", i, w)
		}
	}
	// Tracing: every variant measured in both rounds; with no exporter the
	// allocations are those without tracing, exported spans cost more.
	tr := rp.Tracing
	if tr == nil {
		t.Fatal("no tracing rows")
	}
	for _, r := range []Row{tr.NoExportNew, tr.NoExportRepeat, tr.DoorNoopNew, tr.DoorNoopRepeat, tr.ExportNew, tr.ExportRepeat} {
		if r.Time.N != rp.Meta.Count || r.Time.Center <= 0 {
			t.Errorf("tracing row %s: %+v, want %d samples", r.Name, r.Time, rp.Meta.Count)
		}
	}
	if tr.NoExportNew.Allocs.Center != rp.HandlerNew.Allocs.Center || tr.ExportNew.Allocs.Center <= tr.NoExportNew.Allocs.Center {
		t.Errorf("allocations: %v without tracing, %v with no exporter, %v exported", rp.HandlerNew.Allocs.Center,
			tr.NoExportNew.Allocs.Center, tr.ExportNew.Allocs.Center)
	}
	if c := rp.ColdTracing; c == nil || c.SQLite || c.Tags != rp.ColdNoSQLite.Tags || len(c.InitMs) == 0 {
		t.Errorf("cold start with tracing: %+v, want the Lambda build's tags", c)
	}
	// Without the exporter linked (notrace): the Lambda build's tags plus
	// notrace, a smaller bootstrap; the delivery function's three builds
	// filed apart from the callback's.
	if c := rp.ColdNoExporter; c == nil || c.Tags != rp.ColdNoSQLite.Tags+",notrace" || c.ARM64Bytes >= rp.ColdNoSQLite.ARM64Bytes {
		t.Errorf("callback cold start without the exporter: %+v", c)
	}
	if d := rp.ColdDelivery; d == nil || d.Lambda == nil || d.Tracing == nil || d.NoExporter == nil {
		t.Errorf("delivery cold starts: %+v, want the Lambda build, traced, and without the exporter", d)
	} else if !d.Tracing.Tracing || d.Tracing.ARM64Bytes != d.Lambda.ARM64Bytes || d.NoExporter.ARM64Bytes >= d.Lambda.ARM64Bytes ||
		d.Lambda.Function != "delivery" || d.Lambda.ARM64Bytes == rp.ColdNoSQLite.ARM64Bytes {
		t.Errorf("delivery cold starts: Lambda %+v, traced %+v, without the exporter %+v", d.Lambda, d.Tracing, d.NoExporter)
	}
	if w := rp.Delivery.Workers[0]; w.Tickets != 500 || w.PerSecond.N != 2 || !near(w.PerSecond.Center, (518.7+486.2)/2) ||
		!near(w.P99ms.Center, (232.8+122.4)/2) || w.HelpdeskCalls.Center != 1 {
		t.Errorf("SQLite worker = %+v", w)
	}
	if s := rp.Delivery.Stream; s.Tickets != 200 || s.HelpdeskCalls.Center != 1 || s.PerSecond.N != 2 {
		t.Errorf("stream path = %+v", s)
	}
	if len(rp.Delivery.Matrix) != 40 || rp.Delivery.MatrixSettings.MaxAttempts != 4 {
		t.Errorf("matrix: %d rows, max_attempts %d; want 40 and 4", len(rp.Delivery.Matrix), rp.Delivery.MatrixSettings.MaxAttempts)
	}
	for _, r := range rp.Delivery.Matrix {
		if r.Mode == "outage: 503 on every send" && r.Destination == "zendesk" &&
			(r.SQLite.State != "failed" || r.SQLite.Calls() != 8 || r.DynamoDB.Calls() != 8) {
			t.Errorf("503 outage against zendesk: %+v", r)
		}
	}
	for _, b := range rp.BCrypt {
		if len(b.AtMemory) != 2 || b.AtMemory[0].MB != 512 || b.AtMemory[0].Ms != b.Ms.Center*1769/512 {
			t.Errorf("BCrypt cost %d at memory: %+v", b.Cost, b.AtMemory)
		}
	}
}

// The report is only as honest as its inputs: a benchmark the template
// needs that is missing, a renamed JSON field, or a round-trip test that did
// not pass must stop the report, never render as an empty or zero cell.
func TestMissingInputFails(t *testing.T) {
	cases := []struct {
		name, file string
		edit       func(string) string // nil: remove the file
		want       string
	}{
		{"delivery benchmark renamed", FileDeliveryStream,
			replaceAll("DeliveryStreamPath", "DeliveryStreamPoll"),
			"no tickets/s of BenchmarkDeliveryStreamPath"},
		{"delivery benchmark not run", FileDeliveryWorkerSQLite, nil, FileDeliveryWorkerSQLite},
		{"delivery metric gone", FileDeliveryWorkerDynamoDB,
			replaceAll("helpdesk-calls/ticket", "calls/ticket"),
			"no helpdesk-calls/ticket of BenchmarkDeliveryLocalWorker"},
		{"delivery runs of different sizes", FileDeliveryWorkerSQLite,
			replaceFirst(`     500\t`, `     499\t`),
			"runs of 499 and 500 tickets"},
		{"handler with EMF metrics not measured", FileOverhead,
			replaceAll("emf_new_key", "emf_key"),
			"BenchmarkHandlerOverhead/emf_new_key"},
		{"handler with a destination not measured", FileOverhead,
			replaceAll("deliver_new_key", "deliver_key"),
			"BenchmarkHandlerOverhead/deliver_new_key"},
		{"delivery round-trip test failed", FileDeliveryRoundTrips,
			failDynamoTest("TestDeliveryRoundTrips"),
			"TestDeliveryRoundTrips did not pass"},
		{"stream round trips not logged", FileStreamRoundTrips,
			replaceAll("DynamoDB requests", "requests"),
			"TestStreamCallsPerTicket logged no"},
		{"matrix not written", FileDeliveryMatrixDynamoDB, nil, FileDeliveryMatrixDynamoDB},
		{"matrix field renamed", FileDeliveryMatrixSQLite,
			replaceAll(`"lookups"`, `"lookup"`),
			"unknown field"},
		{"matrix state empty", FileDeliveryMatrixSQLite,
			replaceFirst(`"state": "failed"`, `"state": ""`),
			"state are required"},
		{"matrix row missing on one store", FileDeliveryMatrixDynamoDB,
			replaceAll(`"mode": "permanent 422"`, `"mode": "permanent 423"`),
			`no row for "permanent 422"`},
		{"matrices with different settings", FileDeliveryMatrixDynamoDB,
			replaceAll(`"max_attempts": 4`, `"max_attempts": 5`),
			"different settings"},
		{"benchmark renamed", FileOverhead,
			replaceAll("repeat_key", "repeated_key"),
			"BenchmarkHandlerOverhead/repeat_key"},
		{"unit gone", FileDynamoDB,
			replaceAll("ddb-calls/callback", "calls"),
			"ddb-calls/callback"},
		{"JSON field renamed", FileThroughput,
			replaceAll(`"p99_ms"`, `"p99"`),
			"unknown field"},
		{"round-trip test failed", FileRoundTrips,
			failDynamoTest("TestRoundTripsPerCallback"),
			"did not pass"},
		{"round-trip counts not logged", FileRoundTrips,
			replaceAll("DynamoDB requests", "requests"),
			"logged no"},
		{"tracing variant not measured", FileOverheadTracing,
			replaceAll("noexport_new_key", "noexport_key"),
			"BenchmarkHandlerOverheadTracing/noexport_new_key"},
		{"Linear worker not run", FileDeliveryWorkerLinear, nil, FileDeliveryWorkerLinear},
		{"Linear worker with faults renamed", FileDeliveryWorkerLinear,
			replaceAll("Linear/faults", "Linear/fault"),
			"BenchmarkDeliveryLocalWorkerLinear/faults"},
		{"cold start with tracing on the SQLite build", FileColdStart,
			replaceAll(`"tracing": true`, `"tracing": true, "sqlite": true`),
			"tracing is measured on the Lambda build"},
		{"cold start without the exporter, traced", FileColdStart,
			replaceAll(`"no_exporter": true`, `"no_exporter": true, "tracing": true`),
			"the build without the exporter is the Lambda build"},
		{"cold start of an unknown function", FileColdStart,
			replaceAll(`"function": "delivery"`, `"function": "deliver"`),
			`unknown function "deliver"`},
		{"cold start without the SQLite build", FileColdStart,
			replaceAll(`"sqlite": true`, `"sqlite": false`),
			"with and one without SQLite"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { loadRefuses(t, tc.file, tc.edit, tc.want) })
	}
}

// A run on a tree with uncommitted changes is flagged at the top of the
// document and beside the revision.
func TestDirtyTreeIsFlagged(t *testing.T) {
	rp := loadRecorded(t)
	clean := render(t, rp)
	if bytes.Contains(clean, []byte("uncommitted")) {
		t.Fatalf("a clean run mentions uncommitted changes")
	}
	rp.Meta.Dirty = true
	dirty := render(t, rp)
	head, _, _ := strings.Cut(string(dirty), "## Machine")
	if !strings.Contains(head, "WARNING: the working tree had uncommitted changes") {
		t.Errorf("dirty run not flagged before the first section:\n%s", head)
	}
}

// loadRecorded is the report of the recorded run in testdata/run.
func loadRecorded(t *testing.T) *Report {
	t.Helper()
	rp, err := Load(filepath.Join("testdata", "run"))
	if err != nil {
		t.Fatal(err)
	}
	return rp
}

// render is Render that fails t on an error.
func render(t *testing.T, rp *Report) []byte {
	t.Helper()
	doc, err := Render(rp)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func copyRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "run"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return ""
}

// replaceAll is an edit replacing every from with to.
func replaceAll(from, to string) func(string) string {
	return func(s string) string { return strings.ReplaceAll(s, from, to) }
}

// replaceFirst is an edit replacing the first from with to.
func replaceFirst(from, to string) func(string) string {
	return func(s string) string { return strings.Replace(s, from, to, 1) }
}

// failDynamoTest is an edit of a test2json log of internal/store/dynamo
// that turns test's pass into a fail.
func failDynamoTest(test string) func(string) string {
	const pkg = `"Package":"github.com/aivax-examples/idempotent-callback/internal/store/dynamo","Test":"`
	return replaceAll(`"Action":"pass",`+pkg+test+`"`, `"Action":"fail",`+pkg+test+`"`)
}

// loadRefuses edits file in a copy of the recorded run (removes it when
// edit is nil) and checks that Load refuses the run with an error
// containing want.
func loadRefuses(t *testing.T, file string, edit func(string) string, want string) {
	t.Helper()
	dir := copyRun(t)
	path := filepath.Join(dir, file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if edit == nil {
		err = os.Remove(path)
	} else {
		edited := edit(string(b))
		if edited == string(b) {
			t.Fatalf("the edit changed nothing in %s", file)
		}
		err = os.WriteFile(path, []byte(edited), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Load = %v, want an error containing %q", err, want)
	}
}
