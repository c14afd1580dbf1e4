package dest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/dest"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/fakehelpdesk"
)

// Each kind builds the adapter that speaks its contract: the fake helpdesk
// accepts the ticket on the matching endpoint with the configured
// credentials, and holds it once.
func TestNewBuildsTheKindsAdapter(t *testing.T) {
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	fc := fake.Config()
	cases := []struct {
		cfg  config.Delivery
		kind fakehelpdesk.Kind
	}{
		{config.Delivery{Kind: "zendesk", URL: fake.URL(), Email: fc.Email, Token: fc.Token}, fakehelpdesk.ZendeskCreate},
		{config.Delivery{Kind: "webhook", URL: fake.WebhookURL(), Secret: fc.Secret, Lookup: true}, fakehelpdesk.WebhookCreate},
	}
	for i, tc := range cases {
		t.Run(tc.cfg.Kind, func(t *testing.T) {
			d, err := dest.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			id := "dest-" + tc.cfg.Kind
			before := fake.Requests(tc.kind)
			r, err := d.Send(context.Background(), delivery.Ticket{ID: id, Title: "t", Priority: "normal", CreatedAt: time.Now()})
			if err != nil || r.ExternalID == "" {
				t.Fatalf("send: %+v, %v", r, err)
			}
			if fake.Requests(tc.kind) != before+1 || fake.Held(id) != 1 || fake.Total() != i+1 {
				t.Fatalf("fake: %d %s requests, holds %d under %s, %d in all", fake.Requests(tc.kind), tc.kind, fake.Held(id), id, fake.Total())
			}
			got, found, err := d.Lookup(context.Background(), id)
			if err != nil || !found || got.ExternalID != r.ExternalID {
				t.Fatalf("lookup: %+v %v %v, want %+v", got, found, err, r)
			}
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, c := range []config.Delivery{
		{Kind: "jira", URL: "https://x.example"},
		{Kind: "webhook", URL: "http://x.example/hook", Secret: "s"},
		{Kind: "zendesk", URL: "https://x.example"},
	} {
		if d, err := dest.New(c); err == nil {
			t.Errorf("%v: got %v, want an error", c, d)
		}
	}
}
