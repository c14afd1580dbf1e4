package core_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

// get_ticket shows the delivery: its state while pending, the helpdesk's id
// and URL once delivered, and nothing for a ticket created while no
// destination was configured.
func TestGetTicketShowsDelivery(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 3, 0, 0, 700e6, time.UTC)
	svc, st := newService(memstore.Users{"u": {TenantID: "t", UserID: "alice"}})
	ids := 0
	svc.Now = func() time.Time { return at }
	svc.NewID = func() string { ids++; return "ticket-" + string(rune('0'+ids)) }
	create := func(rid string) string {
		out := svc.Answer(ctx, core.Call{Function: core.CreateTicket, Content: json.RawMessage(`{"title":"Printer"}`),
			ExternalUserID: "u", RequestID: rid})
		if out.Kind != core.KindCreated {
			t.Fatalf("create: %v %v", out.Kind, out.Err)
		}
		return coretest.TicketID(out)
	}
	get := func(id string) string {
		out := svc.Answer(ctx, core.Call{Function: core.GetTicket, Content: json.RawMessage(`{"ticket_id":"` + id + `"}`), ExternalUserID: "u"})
		if out.Kind != core.KindFound {
			t.Fatalf("get: %v %v", out.Kind, out.Err)
		}
		b, err := json.Marshal(coretest.FoundTicket(out))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	plain := create("r1")
	svc.Deliver = true
	outbox := create("r2")

	if got := get(plain); strings.Contains(got, "delivery") {
		t.Fatalf("ticket without a destination: %s", got)
	}
	if got := get(outbox); !strings.HasSuffix(got, `,"delivery":{"state":"pending"}}`) {
		t.Fatalf("pending ticket: %s", got)
	}
	r, err := st.Delivery(ctx, outbox)
	if err != nil || !r.DueAt.Equal(at.Truncate(time.Second)) {
		t.Fatalf("outbox record %+v, %v: want due %v", r, err, at.Truncate(time.Second))
	}
	// Claimed: the state shows, no ids yet.
	if _, err := st.Claim(ctx, outbox, "w", at, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := get(outbox); !strings.HasSuffix(got, `,"delivery":{"state":"delivering"}}`) {
		t.Fatalf("delivering ticket: %s", got)
	}
	if err := st.Record(ctx, outbox, "w", delivery.Update{State: delivery.StateDelivered, Attempts: 1,
		ExternalID: "8812", ExternalURL: "https://acme.zendesk.test/agent/tickets/8812", DeliveredAt: at}); err != nil {
		t.Fatal(err)
	}
	want := `,"delivery":{"state":"delivered","external_id":"8812","external_url":"https://acme.zendesk.test/agent/tickets/8812"}}`
	if got := get(outbox); !strings.HasSuffix(got, want) {
		t.Fatalf("delivered ticket: %s", got)
	}
}
