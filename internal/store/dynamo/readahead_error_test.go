package dynamo_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/prom"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/jsonlines"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// denyReadAhead is DynamoDB Local behind a proxy that answers every
// GetItem of an operation item (the claim's read-ahead) as DynamoDB does
// when the role does not allow it: 400 AccessDeniedException. Every other
// request reaches DynamoDB Local. denied counts the refusals.
func denyReadAhead(t *testing.T, endpoint string, denied *atomic.Int64) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".GetItem") && bytes.Contains(body, []byte(`"S":"OP#`)) {
			denied.Add(1)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazon.coral.service#AccessDeniedException","message":"User: arn:aws:sts::123456789012:assumed-role/callback/fn is not authorized to perform: dynamodb:GetItem because no identity-based policy allows the dynamodb:GetItem action"}`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A read-ahead the role denies is counted with its class
// (read_ahead_errors_total{class="access_denied"}, once per claim) and
// logged once per process however many fail, with its error; the
// transaction still answers: the call is created, its repeat
// deduplicated with the same ticket.
func TestDeniedReadAheadIsCountedAndLoggedOnce(t *testing.T) {
	var denied atomic.Int64
	rec := prom.New(httpapi.MetricLabels(nil), destination.MetricLabels())
	var logs testenv.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	hook := metrics.ReadAheadReporter(func() metrics.Recorder { return rec }, logger, dynamo.ReadAheadClass)
	r := newRoundTrips(t, denyReadAhead(t, testenv.DynamoDB(t), &denied),
		dynamo.Options{OnReadAheadError: hook, CallTimeout: 10 * time.Second})

	first, _ := r.call("r-denied")
	again, _ := r.call("r-denied")
	if first.Kind != core.KindCreated || again.Kind != core.KindDuplicate ||
		coretest.TicketID(first) == "" || coretest.TicketID(again) != coretest.TicketID(first) {
		t.Fatalf("first %v (%s), repeat %v (%s); want created, then deduplicated with the same ticket",
			first.Kind, first.Body, again.Kind, again.Body)
	}
	if denied.Load() != 2 {
		t.Fatalf("%d read-aheads denied, want 2 (one per claim)", denied.Load())
	}
	if got := counter(t, rec, metrics.ReadAheadErrors, metrics.LabelClass, "access_denied"); got != 2 {
		t.Errorf("%s{class=access_denied} = %v, want 2", metrics.ReadAheadErrors, got)
	}
	if got := counter(t, rec, metrics.ReadAheadErrors, metrics.LabelClass, "other"); got != 0 {
		t.Errorf("%s{class=other} = %v, want 0", metrics.ReadAheadErrors, got)
	}
	var lines []map[string]any
	for _, m := range jsonlines.Decode(t, logs.String()) {
		if strings.HasPrefix(fmt.Sprint(m["msg"]), "read-ahead failed") {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d read-ahead log lines for two failures, want 1 (once per process):\n%s", len(lines), logs.String())
	}
	if l := lines[0]; l["level"] != "WARN" || l["class"] != "access_denied" || !strings.Contains(fmt.Sprint(l["error"]), "AccessDeniedException") {
		t.Errorf("the read-ahead log line is %v; want WARN, class access_denied and the error", l)
	}
}

// counter is the value of the counter name with label=value in rec's
// registry (0 when absent).
func counter(t *testing.T, rec *prom.Recorder, name, label, value string) float64 {
	t.Helper()
	mfs, err := rec.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
