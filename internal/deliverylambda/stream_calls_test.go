package deliverylambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// TestStreamCallsPerTicket: delivering a pending ticket from the stream
// costs exactly two DynamoDB calls, the claim and the result.
func TestStreamCallsPerTicket(t *testing.T) {
	fx, counted, calls := countingFixture(t)
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	env := fx.env
	var recs []rec
	const n = 5
	for i := range n {
		id := env.Create(`{"title":"Count me"}`)
		recs = append(recs, rec{seq: string(rune('a' + i)), name: "INSERT", image: fx.image(t, "TICKET#"+id)})
	}
	dst := zendeskFor(t, fake)
	h := deliverylambda.New(delivery.Engine{}, counted, dst, slog.New(slog.DiscardHandler))
	calls.Store(0)
	out, err := h.Handle(context.Background(), batch(t, recs...))
	if err != nil || len(failures(t, out)) != 0 {
		t.Fatalf("%v %v", out, err)
	}
	if fake.Total() != n {
		t.Fatalf("helpdesk holds %d, want %d", fake.Total(), n)
	}
	// The claim, the result, and the read of the ticket's follow-ups once
	// it is delivered (delivery.Sequencer.Neighbours: the engine moves on
	// to a follow-up that waited for it).
	if got := calls.Load(); got != 3*n {
		t.Errorf("%d DynamoDB calls for %d delivered tickets, want %d (claim, result, follow-ups)", got, n, 3*n)
	}
	t.Logf("a stream batch of %d pending tickets, delivered: %d DynamoDB requests", n, calls.Load()) // read back by make bench

	// Records the handler ignores cost nothing: the same tickets, now
	// delivered, and an item that is not a ticket.
	var ignored []rec
	for i, r := range recs {
		var img map[string]any
		if err := json.Unmarshal(r.image, &img); err != nil {
			t.Fatal(err)
		}
		ignored = append(ignored, rec{seq: fmt.Sprint("m", i), name: "MODIFY",
			image: fx.image(t, img[dynamo.PartitionKey].(map[string]any)["S"].(string))})
	}
	ignored = append(ignored, rec{seq: "u", name: "INSERT", image: json.RawMessage(`{"pk":{"S":"USER#x"},"delivery_state":{"S":"pending"}}`)})
	calls.Store(0)
	if out, err := h.Handle(context.Background(), batch(t, ignored...)); err != nil || len(failures(t, out)) != 0 {
		t.Fatalf("%v %v", out, err)
	}
	t.Logf("a stream batch of %d records that are not pending tickets: %d DynamoDB requests", len(ignored), calls.Load()) // read back by make bench
	if got := calls.Load(); got != 0 {
		t.Errorf("%d DynamoDB calls for records that are not pending tickets, want 0", got)
	}
}
