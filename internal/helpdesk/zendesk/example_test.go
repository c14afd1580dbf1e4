package zendesk_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// A send whose answer is lost is Unknown; the lookup by the delivery key
// finds the ticket Zendesk did create, so nothing is sent twice.
func Example() {
	helpdesk := fakehelpdesk.New(nil, fakehelpdesk.Config{})
	defer helpdesk.Close()
	helpdesk.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, Fault: fakehelpdesk.CommitThenDrop()})

	dest, err := zendesk.New(zendesk.Config{
		URL:     helpdesk.URL(), // https://acme.zendesk.com in production
		Email:   helpdesk.Config().Email,
		Token:   helpdesk.Config().Token,
		Timeout: 10 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	t := delivery.HelpdeskTicket{ID: "9b2e4c1a-0000-4000-8000-000000000001", Title: "VPN down", Priority: "high"}

	_, err = dest.Send(context.Background(), t)
	var se *delivery.SendError
	if errors.As(err, &se) {
		fmt.Println("send:", se.Failure)
	}
	r, found, err := dest.Lookup(context.Background(), t.ID)
	fmt.Println("lookup:", found, r.ExternalID, err)
	fmt.Println("tickets held:", helpdesk.Held(t.ID))
	// Output:
	// send: unknown
	// lookup: true 1001 <nil>
	// tickets held: 1
}
