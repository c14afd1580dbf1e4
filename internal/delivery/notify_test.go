package delivery_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// The worker is woken by each commit of a ticket to deliver, not by a
// repeat, and not for a ticket that has no delivery.
func TestNotifyOnCommit(t *testing.T) {
	notified := 0
	svc := deliverytest.NewService(delivery.NotifyOnCommit(memtest.New(), func() { notified++ }), false,
		func() string { return time.Now().Format("150405.000000000") })
	call := func(rid string) core.Kind {
		return svc.Answer(context.Background(), core.Call{Function: core.CreateTicket,
			Content: json.RawMessage(`{"title":"x"}`), ExternalUserID: deliverytest.User, RequestID: rid}).Kind
	}
	if call("r0") != core.KindCreated || notified != 0 {
		t.Fatalf("no destination: notified %d", notified)
	}
	svc.Deliver = true
	if call("r1") != core.KindCreated || notified != 1 {
		t.Fatalf("new ticket: notified %d, want 1", notified)
	}
	if call("r1") != core.KindDuplicate || notified != 1 {
		t.Fatalf("repeat: notified %d, want 1", notified)
	}
}
