package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// A 429 creates nothing: the engine retries later with the same key, and
// the same bytes.
func Example() {
	endpoint := fakehelpdesk.New(nil, fakehelpdesk.Config{})
	defer endpoint.Close()
	endpoint.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Fault: fakehelpdesk.TooManyRequests("30")})

	dest, err := webhook.New(webhook.Config{
		URL:    endpoint.WebhookURL(), // https://tickets.example/hook in production
		Secret: endpoint.Config().Secret,
		Lookup: true,
		Now:    endpoint.Now, // the endpoint's clock, which the example moves on
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	t := delivery.HelpdeskTicket{ID: "9b2e4c1a-0000-4000-8000-000000000001", Title: "VPN down",
		Priority: "high", CreatedAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}

	_, err = dest.Send(context.Background(), t)
	var se *delivery.SendError
	if errors.As(err, &se) {
		fmt.Println("send:", se.Failure, se.Status, se.RetryAfter)
	}
	endpoint.Advance(se.RetryAfter) // the engine waits as asked, then resends, signed afresh
	r, err := dest.Send(context.Background(), t)
	fmt.Println("resend:", r.ExternalID, err)
	fmt.Println("tickets held:", endpoint.Held(t.ID))
	// Output:
	// send: not_created 429 30s
	// resend: WH-1 <nil>
	// tickets held: 1
}
