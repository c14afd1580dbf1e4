//go:build !nosqlite

package localserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/otlptest"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
)

// TestLocalServerDoesNotWaitOnItsCollector: with spans exported to a
// collector that hangs (each export held for the exporter's 10 s timeout,
// the batch sent 10 ms after its first span), ten calls and their repeats
// each answer right (created, then deduplicated with the same ticket) and
// well under that timeout: the exporter runs beside the requests, never
// in their way. Then a shutdown bounded by its context returns.
func TestLocalServerDoesNotWaitOnItsCollector(t *testing.T) {
	col := otlptest.StartFaulty(t, otlptest.Hang, 0)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL}
	tp, err := otelsetup.Setup(context.Background(), otelsetup.Options{Getenv: func(k string) string { return env[k] }, Service: "fault-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	const hookKey = "hook-key-local-fault"
	srv := serve(t, localConfig(t, hookKey), tp)
	for i := range 10 {
		n, err := nonce.Generate(hookKey, 4)
		if err != nil {
			t.Fatal(err)
		}
		body := callbacktest.Create("user-a", fmt.Sprintf("local-fault-%d", i), callbacktest.Title("collector hangs"))
		var ticket string
		for _, dedup := range []bool{false, true} {
			start := time.Now()
			code, b := callbacktest.Send(t, http.MethodPost, srv.URL+"/callback", n, body)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("call %d took %s with the collector hanging", i, took)
			}
			var got struct {
				TicketID     string `json:"ticket_id"`
				Deduplicated bool   `json:"deduplicated"`
			}
			if code != http.StatusOK || json.Unmarshal(b, &got) != nil || got.Deduplicated != dedup || got.TicketID == "" {
				t.Fatalf("call %d: %d %s, want 200 deduplicated=%v", i, code, b, dedup)
			}
			if dedup && got.TicketID != ticket {
				t.Errorf("call %d: the repeat answered ticket %s, want %s", i, got.TicketID, ticket)
			}
			ticket = got.TicketID
		}
	}
	if col.Requests() == 0 {
		t.Error("no export reached the collector: the test proves nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = tp.Shutdown(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("shutdown with a 500 ms context took %s", took)
	}
}
