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

// TestNew: each kind reaches the fake helpdesk through its own contract,
// with the credentials of the configuration.
func TestNew(t *testing.T) {
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	fc := fake.Config()
	ticket := delivery.Ticket{ID: "t-1", OperationKey: "op", TenantID: "ten", UserID: "u", Title: "Printer",
		Priority: "normal", CreatedAt: time.Unix(1700000000, 0).UTC()}
	for _, cfg := range []config.Delivery{
		{Kind: "zendesk", URL: fake.URL(), Email: fc.Email, Token: fc.Token},
		{Kind: "webhook", URL: fake.WebhookURL(), Secret: fc.Secret, Lookup: true, Timeout: time.Second},
	} {
		d, err := dest.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", cfg.Kind, err)
		}
		if _, err := d.Send(context.Background(), ticket); err != nil {
			t.Fatalf("%s: send: %v", cfg.Kind, err)
		}
		if _, found, err := d.Lookup(context.Background(), ticket.ID); err != nil || !found {
			t.Errorf("%s: lookup found=%t err=%v", cfg.Kind, found, err)
		}
	}
	if fake.Total() != 2 {
		t.Errorf("fake holds %d tickets, want 2 (one per kind)", fake.Total())
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []config.Delivery{
		{Kind: "jira", URL: "https://x.example", Secret: "s"},
		{Kind: "webhook", URL: "http://tickets.example/hook", Secret: "s"},
		{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "a@b"},
	} {
		d, err := dest.New(cfg)
		if err == nil || d != nil {
			t.Errorf("%v: got %v, %v; want nil and an error", cfg, d, err)
		}
	}
}
