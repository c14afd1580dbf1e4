package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Figures of the recorded follow-up run
// (testdata/run/delivery-stream-followups.json: go test -json -run '^$'
// -bench '^BenchmarkDeliveryStreamFollowUps$' -benchtime 200x -count 2
// ./functions/delivery), checked by hand: each is the median of the two
// runs' values.
func TestFollowUpsFromRecordedRun(t *testing.T) {
	rp := loadRecorded(t)
	f := rp.Delivery.StreamLambda.FollowUps
	for _, c := range []struct {
		name string
		got  Stat
		want float64
	}{
		{"comment p50", f.Comment.P50ms, (172.8 + 234.4) / 2},
		{"comment p99", f.Comment.P99ms, (677.1 + 1495) / 2},
		{"close p50", f.Close.P50ms, (348.4 + 504.5) / 2},
		{"close p99", f.Close.P99ms, (1004 + 2464) / 2},
		{"ticket p50", f.TicketP50, (323.3 + 414.0) / 2},
		{"threads/s", f.PerSecond, (9.170 + 5.623) / 2},
		{"helpdesk calls per record", f.Calls, 1},
		{"late follow-ups", f.Late, (4 + 1) / 2.0},
	} {
		if c.got.N != 2 || !near(c.got.Center, c.want) {
			t.Errorf("%s = %+v, want %g over 2 runs", c.name, c.got, c.want)
		}
	}
	if f.Threads != 200 || f.GoalP50ms != 1000 || !f.CommentMet || !f.CloseMet {
		t.Errorf("follow-ups %+v: want 200 threads, both p50s within the 1000 ms goal", f)
	}
	doc := string(render(t, rp))
	for _, want := range []string{
		"**A follow-up after its ticket.** `BenchmarkDeliveryStreamFollowUps`",
		fmt.Sprintf("| the comment's | %.1f | %.1f | ≤ 1000 ms (meets) |", f.Comment.P50ms.Center, f.Comment.P99ms.Center),
		fmt.Sprintf("| the close's | %.1f | %.1f | ≤ 1000 ms (meets) |", f.Close.P50ms.Center, f.Close.P99ms.Center),
		"1.00 helpdesk calls per record",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the document lacks %q", want)
		}
	}
}

// A follow-up p50 over the goal is reported as missing it.
func TestFollowUpGoalMissed(t *testing.T) {
	dir := copyRun(t)
	path := filepath.Join(dir, FileDeliveryStreamFollowUps)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.NewReplacer("348.4 close-p50-ms", "1348 close-p50-ms", "504.5 close-p50-ms", "1504 close-p50-ms").Replace(string(b))
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	rp, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := rp.Delivery.StreamLambda.FollowUps
	if f.CloseMet || !f.CommentMet || !near(f.Close.P50ms.Center, (1348+1504)/2.0) {
		t.Fatalf("follow-ups %+v: want the close missing the goal, the comment meeting it", f)
	}
	if doc := string(render(t, rp)); !strings.Contains(doc, "| the close's | 1426.0 |") || !strings.Contains(doc, "≤ 1000 ms (misses) |") {
		t.Errorf("the document does not show the close missing its goal")
	}
}

// A missing or incomplete follow-up result stops the report.
func TestFollowUpsInputRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(string) string // nil: remove the file
		want string
	}{
		{"not run", nil, FileDeliveryStreamFollowUps},
		{"benchmark renamed", replaceAll("DeliveryStreamFollowUps", "DeliveryStreamFollowUp"), "no threads/s of BenchmarkDeliveryStreamFollowUps"},
		{"metric gone", replaceAll("close-p99-ms", "close-p98-ms"), "no close-p99-ms"},
		{"late count gone", replaceAll("late-followups", "late"), "no late-followups"},
		{"runs of different sizes", replaceFirst(`     200\t`, `     199\t`), "runs of 199 and 200 threads"},
	} {
		t.Run(tc.name, func(t *testing.T) { loadRefuses(t, FileDeliveryStreamFollowUps, tc.edit, tc.want) })
	}
}
