package httpapi_test

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// TestHandlerAllocsWithMetrics: a callback through the handler with EMF
// metrics on, as BenchmarkHandlerOverhead/emf_* runs it, stays under 100
// allocations (a deterministic count; the time goal is the benchmark's).
func TestHandlerAllocsWithMetrics(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	h := instrumentedHandler(&metrics.EMF{CallbackLabels: httpapi.MetricLabels(nil)})
	body := callBody(core.CreateTicket, "user-a", "allocs", `{"title":"Cannot sign in","priority":"high"}`)
	serve := func() { serveOK(t, h, body) }
	serve() // the create; the runs below repeat it, the costlier path
	if n := testing.AllocsPerRun(50, serve); n >= 100 {
		t.Errorf("%v allocations per callback with EMF metrics on, want under 100", n)
	}
}
