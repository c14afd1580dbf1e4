package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
)

// Figures of the recorded in-region run (testdata/run/inregion.json, from
// BENCH_INREGION_OUT=… BENCH_INREGION_OPS=100 go test -run '^TestInRegion$'
// ./internal/bench, with the follow-up cases, on a machine other work
// loaded: its tail figures are that load's), checked by hand: the goals are p50 ratios under the
// same hop, the per-operation counts divide by the operations.
func TestInRegionFromRecordedRun(t *testing.T) {
	rp := loadRecorded(t)
	ir := rp.InRegion
	if len(ir.Rows) != len(inRegionKinds) || ir.Rows[0].Kind != "new" || ir.Rows[3].Kind != "repeat-cached" || ir.Rows[7].Kind != "three-writes" {
		t.Fatalf("rows %+v", ir.Rows)
	}
	if ir.LocalName != "DynamoDB Local" || ir.ModelName != "DynamoDB Local + in-region model" {
		t.Errorf("hop names %q, %q", ir.LocalName, ir.ModelName)
	}
	if len(ir.Goals) != 2 {
		t.Fatalf("goals %+v", ir.Goals)
	}
	// The p50s, read from the file apart from Load.
	p50 := recordedP50s(t)
	repeat, newOp := ir.Goals[0], ir.Goals[1]
	wantRepeat := p50["model/repeat"] / p50["model/get"]
	if !near(repeat.Model, wantRepeat) || !near(repeat.Local, p50["local/repeat"]/p50["local/get"]) ||
		repeat.ModelMet != (wantRepeat <= 1.2) || repeat.Target != 1.2 {
		t.Errorf("repeat ÷ GetItem: %+v, want %.3f under the model", repeat, wantRepeat)
	}
	wantNew := p50["model/new"] / p50["model/transact"]
	if !near(newOp.Model, wantNew) || newOp.ModelMet != (wantNew <= 1.05) || newOp.Target != 1.05 {
		t.Errorf("new ÷ TransactWriteItems: %+v, want %.3f under the model", newOp, wantNew)
	}
	three, err := ir.Case("three-writes")
	if err != nil {
		t.Fatal(err)
	}
	if got := requestsByOp(three.Model); got != "PutItem 2.00 + UpdateItem 1.00" {
		t.Errorf("three writes: requests %q", got)
	}
	if three.Model.RequestsPerOp() != 3 || three.Model.WCUPerOp() != 3 || three.Model.RCUPerOp() != 0 {
		t.Errorf("three writes: %g requests, %g WCU, %g RCU per operation; want 3, 3, 0",
			three.Model.RequestsPerOp(), three.Model.WCUPerOp(), three.Model.RCUPerOp())
	}
	get, _ := ir.Case("get")
	newRow, _ := ir.Case("new")
	// A new operation's transaction writes the claim and the ticket and
	// checks the other policy's key: 3 items, 2 WCU each.
	if get.Model.RCUPerOp() != 1 || newRow.Model.WCUPerOp() != 6 || newRow.Model.Tail == nil || newRow.Model.Tail.Ops != 1 {
		t.Errorf("GetItem %g RCU/op, new %g WCU/op, tail %+v; want 1, 6 and the one operation at the p99 of 100",
			get.Model.RCUPerOp(), newRow.Model.WCUPerOp(), newRow.Model.Tail)
	}
	if p, _ := ir.Case("new-parallel"); p.Model.Workers != 16 || p.Model.Mean != nil {
		t.Errorf("16-client case: %+v; want 16 workers and no split (the counters are shared)", p.Model)
	}
	if _, err := ir.Case("nothing"); err == nil {
		t.Errorf("Case of an unknown kind: no error")
	}
	// The repeat on a warm instance with the result cache: no request, no
	// capacity; the same repeat without it sends the read-ahead and the
	// transaction.
	cached, _ := ir.Case("repeat-cached")
	repeatRow, _ := ir.Case("repeat")
	if cached.Model.RequestsPerOp() != 0 || requestsByOp(cached.Model) != "none" || cached.Model.RCUPerOp() != 0 || cached.Model.WCUPerOp() != 0 ||
		requestsByOp(repeatRow.Model) != "GetItem 1.00 + TransactWriteItems 1.00" {
		t.Errorf("cached repeat %s (%g RCU, %g WCU), uncached %s; want none, 0, 0 and the read-ahead beside the transaction",
			requestsByOp(cached.Model), cached.Model.RCUPerOp(), cached.Model.WCUPerOp(), requestsByOp(repeatRow.Model))
	}
	doc := render(t, rp)
	cachedLine := fmt.Sprintf("per repeat: DynamoDB requests none, 0.00 RCU and 0.00 WCU; p50 **%.2f ms**", p50["model/repeat-cached"])
	if !strings.Contains(string(doc), cachedLine) {
		t.Errorf("the document lacks the cached repeat's figures %q", cachedLine)
	}
	goalRow := fmt.Sprintf("| repeat p50 ÷ one bare GetItem's p50 | ≤ 1.20× | %.2f× (%s) | **%.2f×** (%s) |",
		p50["local/repeat"]/p50["local/get"], verdict(p50["local/repeat"]/p50["local/get"] <= 1.2), wantRepeat, verdict(wantRepeat <= 1.2))
	for _, want := range []string{"## 8. In-region latency model", goalRow,
		"alexdebrie/dynamodb-performance-testing", "no ticket without its claim and no claim without its result"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the document lacks %q", want)
		}
	}
}

// The follow-up cases of the recorded run: a new add_comment or
// close_ticket is the read-ahead GetItem beside one TransactWriteItems of
// four items (2 WCU each); with a destination the outbox rule's read of
// the ticket comes on top, on a repeat too. They have their own rows,
// not the callback table's, and their own table in the document.
func TestInRegionFollowUps(t *testing.T) {
	rp := loadRecorded(t)
	ir := rp.InRegion
	if len(ir.FollowUps) != 8 || ir.FollowUps[0].Kind != "comment-new" || ir.FollowUps[4].Kind != "comment-new-destination" ||
		ir.FollowUps[7].Kind != "close-repeat-destination" || len(ir.Rows) != len(inRegionKinds) {
		t.Fatalf("follow-up rows %+v, callback rows %d", ir.FollowUps, len(ir.Rows))
	}
	for _, c := range []struct {
		kind, requests string
		rcu, wcu       float64
	}{
		{"comment-new", "GetItem 1.00 + TransactWriteItems 1.00", 1, 8},
		{"comment-repeat", "GetItem 1.00 + TransactWriteItems 1.00", 1, 8},
		{"close-new", "GetItem 1.00 + TransactWriteItems 1.00", 1, 8},
		{"close-repeat", "GetItem 1.00 + TransactWriteItems 1.00", 1, 8},
		{"comment-new-destination", "GetItem 2.00 + TransactWriteItems 1.00", 2, 8},
		{"comment-repeat-destination", "GetItem 2.00 + TransactWriteItems 1.00", 2, 8},
		{"close-new-destination", "GetItem 2.00 + TransactWriteItems 1.00", 2, 8},
		{"close-repeat-destination", "GetItem 2.00 + TransactWriteItems 1.00", 2, 8},
	} {
		row, err := ir.Case(c.kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []struct {
			name string
			got  results.InRegionCase
		}{{"local", row.Local}, {"model", row.Model}} {
			if got := requestsByOp(h.got); got != c.requests || h.got.RCUPerOp() != c.rcu || h.got.WCUPerOp() != c.wcu || len(h.got.Other) > 0 {
				t.Errorf("%s, %s: %s, %g RCU, %g WCU, other %v; want %s, %g, %g and none", c.kind, h.name, got,
					h.got.RCUPerOp(), h.got.WCUPerOp(), h.got.Other, c.requests, c.rcu, c.wcu)
			}
		}
	}
	p50 := recordedP50s(t)
	doc := string(render(t, rp))
	row := fmt.Sprintf("| close_ticket, repeat, destination configured | DynamoDB Local | %.2f |", p50["local/close-repeat-destination"])
	for _, want := range []string{"**The follow-ups.** `add_comment` and `close_ticket`", row,
		"per new add_comment GetItem 2.00 + TransactWriteItems 1.00 against GetItem 1.00 + TransactWriteItems 1.00"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the document lacks %q", want)
		}
	}
	// The tail tables are the callback path's: no follow-up in them.
	_, tail, _ := strings.Cut(doc, "### The tail under the model")
	if strings.Contains(tail, "add_comment") || strings.Contains(tail, "close_ticket") {
		t.Errorf("a follow-up case in the tail tables")
	}
}

// A missing or incomplete in-region result stops the report.
func TestInRegionInputRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(string) string // nil: remove the file
		want string
	}{
		{"not run", nil, FileInRegion},
		{"field renamed", replaceFirst(`"p99_ms"`, `"p99"`), "unknown field"},
		{"model hop missing", replaceFirst(`"kind": "model"`, `"kind": "modelled"`), `unknown hop "modelled"`},
		{"no operations", replaceFirst(`"ops": 100,`, `"ops": 0,`), "all must be positive"},
		{"case missing", replaceFirst(`"kind": "three-writes"`, `"kind": "three"`), `case "three-writes" missing`},
		{"follow-up missing", replaceFirst(`"kind": "close-repeat-destination"`, `"kind": "close-repeat-dest"`), `case "close-repeat-destination" missing`},
		{"case not measured", replaceFirst(`"ops": 200,`, `"ops": 0,`), "want a measured case"},
		{"no published quantiles", replaceFirst(`"published": [`, `"published": [], "x": [`), "unknown field"},
		{"no split of the tail", replaceAll(`"tail": {`, `"tail_": {`), "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) { loadRefuses(t, FileInRegion, tc.edit, tc.want) })
	}
}

// The checks of build on a result without the model's split, the capacity
// checks or the model's sequences.
func TestInRegionNeedsTheSplit(t *testing.T) {
	rp := loadRecorded(t)
	ir := InRegionReport{InRegion: rp.InRegion.InRegion}
	for i, h := range ir.Hops {
		if h.Kind != hopModel {
			continue
		}
		cases := append(h.Cases[:0:0], h.Cases...)
		for j := range cases {
			if cases[j].Kind == "new" {
				cases[j].Tail = nil
			}
		}
		ir.Hops = append(ir.Hops[:0:0], ir.Hops...)
		ir.Hops[i].Cases = cases
	}
	if err := ir.build(); err == nil || !strings.Contains(err.Error(), "no split") {
		t.Fatalf("build = %v, want a refusal of the new operation without its split", err)
	}
	ir = InRegionReport{InRegion: rp.InRegion.InRegion}
	ir.CapacityChecks = nil
	if err := ir.build(); err == nil || !strings.Contains(err.Error(), "no capacity checks") {
		t.Fatalf("build = %v, want a refusal without the capacity checks", err)
	}
	ir = InRegionReport{InRegion: rp.InRegion.InRegion}
	ir.Sequences = nil
	if err := ir.build(); err == nil || !strings.Contains(err.Error(), "no model sequence") {
		t.Fatalf("build = %v, want a refusal without the model's sequences", err)
	}
}

// recordedP50s are the p50s of the recorded in-region run, by "hop/kind".
func recordedP50s(t *testing.T) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "run", FileInRegion))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Hops []struct {
			Kind  string
			Cases []struct {
				Kind  string
				P50ms float64 `json:"p50_ms"`
			}
		}
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, h := range run.Hops {
		for _, c := range h.Cases {
			out[h.Kind+"/"+c.Kind] = c.P50ms
		}
	}
	if len(out) != 2*(len(inRegionKinds)+len(followUpKinds)) {
		t.Fatalf("recorded p50s: %v, want every case on 2 hops", out)
	}
	return out
}
