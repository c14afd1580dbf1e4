package dest_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
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

// TestSlackURLNeverLogged: a destination built from a configuration whose
// webhook URL carries secrets in its path and query (Slack style) logs,
// prints and fails with scheme, host and first path segment only, and
// never with the signing secret, as the cold-start lines and the engine's
// step lines show it.
func TestSlackURLNeverLogged(t *testing.T) {
	const path, query = "/services/T000/B000/XXXXSECRET", "?token=abc"
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{WebhookPath: path})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Fault: fakehelpdesk.CommitThenStatus(502)})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookLookup, Fault: fakehelpdesk.Unavailable("3")})
	cfg := config.Delivery{Kind: "webhook", URL: fake.URL() + path + query, Secret: fake.Config().Secret, Lookup: true, Timeout: time.Second}
	d, err := dest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	log.Info("delivery destination", slog.Any("delivery", cfg), slog.Any("destination", d))
	_, sendErr := d.Send(context.Background(), delivery.Ticket{ID: "t-1", Title: "x", CreatedAt: time.Now()})
	_, _, lookErr := d.Lookup(context.Background(), "t-1")
	log.Info("step", slog.Any("send", sendErr), slog.Any("lookup", lookErr))
	fmt.Fprintf(&out, "%v %+v %v %v\n", cfg, d, sendErr, lookErr)
	text := out.String()
	for _, secret := range []string{"T000", "B000", "XXXXSECRET", "token=abc", fake.Config().Secret} {
		if strings.Contains(text, secret) {
			t.Fatalf("%q leaked:\n%s", secret, text)
		}
	}
	if sendErr == nil || lookErr == nil || !strings.Contains(text, fake.URL()+"/services/*") {
		t.Fatalf("not what the test means to check (%v, %v):\n%s", sendErr, lookErr, text)
	}
}
