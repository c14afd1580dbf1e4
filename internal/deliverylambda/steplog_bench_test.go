package deliverylambda

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// BenchmarkStepLine is the cost of one delivery step's log line with its
// EMF metrics, written by the JSON handler the function uses.
func BenchmarkStepLine(b *testing.B) {
	s := stepLog{log: slog.New(slog.NewJSONHandler(discard{}, nil)), rec: NewRecorder()}
	st := delivery.Step{TicketID: "6f1c2a9e-1b7d-4c55-9a57-0c1f3e8d2b44", Result: delivery.ResultDelivered, Lag: 1500 * time.Millisecond,
		Update: delivery.Update{State: delivery.StateDelivered, Attempts: 1, ExternalID: "12345"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s.StepEnded(ctx, st)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
