package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/prom"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// BenchmarkHandlerOverhead: create_ticket through the whole handler
// (parse, validate, canonicalize, key, store, respond, one JSON log line
// to io.Discard) with authentication off and the in-memory store, so it
// measures the handler's own cost. new_key writes a ticket per iteration;
// repeat_key replays the same call (a duplicate each time). The emf_ and
// prometheus_ variants run the same with metrics on, as the Lambda and the
// local server wire them (httpapi.Collect, a timed store, the handler's
// Metrics hook); the EMF members go into the same discarded line.
// deliver_new_key is new_key with a helpdesk destination configured: the
// ticket is written with its delivery outbox in the same store call.
func BenchmarkHandlerOverhead(b *testing.B) {
	benchmarkHandlerOverhead(b, "", nil)
	benchmarkDeliverNewKey(b)
	benchmarkHandlerOverhead(b, "emf_", &metrics.EMF{CallbackLabels: httpapi.MetricLabels(nil)})
	benchmarkHandlerOverhead(b, "prometheus_", prom.New(httpapi.MetricLabels(nil), metrics.DeliveryLabels{}))
}

// overheadHandler is the handler the overhead benchmarks and allocation
// budgets measure: authentication off, the in-memory store, one JSON log
// line to io.Discard.
func overheadHandler() *httpapi.Handler {
	return newHandler(memtest.New(), nonce.Off{}, 24*time.Hour, slog.New(slog.NewJSONHandler(io.Discard, nil)))
}

// instrumentedHandler is overheadHandler with metrics on rec, wired as the
// composition root wires them: the timed store, the handler's Metrics
// hook, and httpapi.Collect around the handler.
func instrumentedHandler(rec metrics.Recorder) http.Handler {
	h := newHandler(core.TimedStore{Store: memtest.New(), Observe: rec.StoreCall}, nonce.Off{}, 24*time.Hour,
		slog.New(slog.NewJSONHandler(io.Discard, nil)))
	h.Metrics = rec
	return httpapi.Collect(h)
}

// serveOK posts body to h's /callback and fails tb unless the answer is 200.
func serveOK(tb testing.TB, h http.Handler, body string) {
	r := httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		tb.Fatalf("%d %s", w.Code, w.Body)
	}
}

func benchmarkHandlerOverhead(b *testing.B, prefix string, rec metrics.Recorder) {
	var h http.Handler = overheadHandler()
	if rec != nil {
		h = instrumentedHandler(rec)
	}
	benchmarkNewKey(b, prefix+"new_key", h, "bench-")
	b.Run(prefix+"repeat_key", func(b *testing.B) {
		body := callBody(core.CreateTicket, "user-a", "bench-repeat-"+prefix, callbacktest.Arguments)
		serveOK(b, h, body)
		b.ReportAllocs()
		for b.Loop() {
			serveOK(b, h, body)
		}
	})
}

func benchmarkDeliverNewKey(b *testing.B) {
	h := overheadHandler()
	h.Service.Deliver = true
	benchmarkNewKey(b, "deliver_new_key", h, "deliver-")
}

// benchmarkNewKey runs name: create_ticket on h with a new request id
// (idPrefix and a counter) each time.
func benchmarkNewKey(b *testing.B, name string, h http.Handler, idPrefix string) {
	b.Run(name, func(b *testing.B) {
		head, tail, _ := strings.Cut(callBody(core.CreateTicket, "user-a", "REQUEST-ID", callbacktest.Arguments), "REQUEST-ID")
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			serveOK(b, h, head+idPrefix+strconv.Itoa(i)+tail)
		}
	})
}

// TestHandlerAllocationBudget: the allocation half of the handler's
// overhead budget (under 100 allocations per callback), counted, not
// timed, on the same calls as BenchmarkHandlerOverhead.
func TestHandlerAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations of its own")
	}
	const budget = 100
	h := overheadHandler()
	i := 0
	for _, tc := range []struct {
		name string
		body func() string
	}{
		{"new key", func() string {
			i++
			return callBody(core.CreateTicket, "user-a", "alloc-"+strconv.Itoa(i), callbacktest.Arguments)
		}},
		{"repeat key", func() string { return callBody(core.CreateTicket, "user-a", "alloc-repeat", callbacktest.Arguments) }},
	} {
		allocs := testing.AllocsPerRun(200, func() { serveOK(t, h, tc.body()) })
		if allocs >= budget {
			t.Errorf("%s: %.0f allocations per callback (request building included), budget %d", tc.name, allocs, budget)
		}
		t.Logf("%s: %.0f allocations per callback, request building included", tc.name, allocs)
	}
}

// BenchmarkHandlerOverheadTracing: new_key and repeat_key (as in
// BenchmarkHandlerOverhead) with the tracing the programs wire. noexport_:
// as shipped when nothing exports (the outcome set on a span that does
// not record, the door unwrapped): the figure
// held to within 5 % of BenchmarkHandlerOverhead's. door_noop_: the door
// wrapped in its server span too, on the no-op provider, what a
// never-recording provider costs per request. export_: tracing on, the
// door's span recorded by the SDK's provider and handed to its batch
// processor, whose exporter discards the spans (the SDK's cost per
// request without the network, which the batch exporter sends outside
// the request anyway).
func BenchmarkHandlerOverheadTracing(b *testing.B) {
	logged := func() http.Handler {
		return newHandler(memtest.New(), nonce.Off{}, 24*time.Hour,
			slog.New(slog.NewJSONHandler(io.Discard, nil)))
	}
	defer otel.SetTracerProvider(tracenoop.NewTracerProvider())
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = sdk.Shutdown(context.Background()) }()
	for _, v := range []struct {
		prefix   string
		provider trace.TracerProvider
		door     bool
	}{
		{"noexport_", tracenoop.NewTracerProvider(), false},
		{"door_noop_", tracenoop.NewTracerProvider(), true},
		{"export_", sdk, true},
	} {
		otel.SetTracerProvider(v.provider)
		var door trace.TracerProvider // nil: the door unwrapped
		if v.door {
			door = v.provider
		}
		// Each variant has a store of its own, so the request ids are
		// those of BenchmarkHandlerOverhead: the bodies, and so the bytes
		// per callback, are the same as there.
		h := tracing.Door(logged(), door)
		benchmarkNewKey(b, v.prefix+"new_key", h, "bench-")
		b.Run(v.prefix+"repeat_key", func(b *testing.B) {
			body := callBody(core.CreateTicket, "user-a", "bench-repeat-", callbacktest.Arguments)
			serveOK(b, h, body)
			b.ReportAllocs()
			for b.Loop() {
				serveOK(b, h, body)
			}
		})
	}
}
