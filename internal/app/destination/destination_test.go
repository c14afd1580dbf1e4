package destination

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
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// checkStartError fails t unless err is how a bad setting stops the
// program at start: one line, starting with "config:", naming want.
func checkStartError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), "config:") || strings.ContainsAny(err.Error(), "\r\n") ||
		!strings.Contains(err.Error(), want) {
		t.Errorf("error %v; want one line starting with \"config:\" naming %q", err, want)
	}
}

// startBlock is what the local server does at start with a config file's
// delivery block: read the file, then build the destination.
func startBlock(block string) error {
	c, err := config.ParseFile([]byte(`{"hook_key":"k","delivery":` + block + `}`))
	if err != nil {
		return err
	}
	_, err = New(*c.Delivery)
	return err
}

// TestDeliveryBlockRefused: a bad delivery block stops the local server at
// start with one line naming the field, and never a credential, whether
// the configuration refuses it (its shape) or the destination's
// constructor does (the URL and the credentials).
func TestDeliveryBlockRefused(t *testing.T) {
	const zd = `"kind":"zendesk","url":"https://acme.zendesk.com","email":"a@b.c","token":"tok-SECRET"`
	const wh = `"kind":"webhook","url":"https://hooks.example/in","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"`
	tests := []struct{ block, want string }{
		{`{"url":"https://x.example","secret":"whsec_c2VjcmV0"}`, "delivery.kind"},
		{`{"kind":"jira","url":"https://x.example"}`, "delivery.kind"},
		{`{"kind":"zendesk","url":"https://acme.zendesk.com","email":"a@b.c"}`, "email and token"},
		{`{"kind":"zendesk","url":"https://acme.zendesk.com","token":"tok-SECRET"}`, "email and token"},
		{`{` + zd + `,"secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "for kind webhook"},
		{`{"kind":"webhook","url":"https://hooks.example/in"}`, "needs secret"},
		{`{` + wh + `,"token":"tok-SECRET"}`, "for kind zendesk"},
		{`{"kind":"webhook","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "delivery.url"},
		{`{"kind":"webhook","url":"http://hooks.example/in","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "must be https"},
		{`{"kind":"webhook","url":"ftp://127.0.0.1/in","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "must be https"},
		{`{"kind":"webhook","url":"https://user:pw-SECRET@hooks.example/in","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "user info"},
		{`{"kind":"webhook","url":"/relative","secret":"whsec_SECRETSECRETSECRETSECRETSECRETSE"}`, "delivery.url"},
		{`{` + wh + `,"max_attempts":0}`, "delivery.max_attempts"},
		{`{` + wh + `,"max_attempts":101}`, "delivery.max_attempts"},
		{`{` + wh + `,"max_attempts":2.5}`, "delivery.max_attempts"},
		{`{` + wh + `,"timeout":"10"}`, "delivery.timeout"},
		{`{` + wh + `,"timeout":"-1s"}`, "delivery.timeout"},
		{`{` + wh + `,"timeout":"1m"}`, "delivery.timeout"},
		{`{` + wh + `,"timeout":"1ms"}`, "delivery.timeout"},
		{`{` + wh + `,"retries":3}`, `"retries"`},
		{`"webhook"`, "delivery"},
	}
	for _, tc := range tests {
		t.Run(tc.want+" "+tc.block, func(t *testing.T) {
			err := startBlock(tc.block)
			checkStartError(t, err, tc.want)
			if err != nil && strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q shows a credential", err)
			}
		})
	}
}

func TestDeliveryLoopbackHTTP(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://localhost/hook", "http://[::1]:9/x", "http://LOCALHOST/x"} {
		if _, err := New(config.Destination{Kind: "webhook", URL: u, Secret: "whsec_c2VjcmV0"}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// TestDeliveryFromEnvRefused: the environment's URL rules are the
// constructors' too, and their errors name DELIVERY_URL.
func TestDeliveryFromEnvRefused(t *testing.T) {
	for name, c := range map[string]struct {
		field string
		vars  map[string]string
	}{
		"no url":            {"DELIVERY_URL", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`}},
		"http not loopback": {"must be https", map[string]string{"DELIVERY_KIND": "webhook", "DELIVERY_URL": "http://tickets.example/hook", "DELIVERY_SECRET": `{"secret":"s3cr3tvalue00000"}`}},
	} {
		t.Run(name, func(t *testing.T) {
			c.vars["TABLE_NAME"] = "t"
			cfg, err := config.DeliveryFromEnv(func(k string) string { return c.vars[k] })
			if err == nil {
				_, err = New(cfg.Destination)
			}
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("err=%v, want an error naming %s", err, c.field)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

func TestDeliveryValidate(t *testing.T) {
	ok := []config.Destination{
		{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "a@b", Token: "t"},
		{Kind: "webhook", URL: "http://localhost:8080/hook", Secret: "whsec_c2VjcmV0", Lookup: true, MaxAttempts: 100, Timeout: 20 * time.Second},
		{Kind: "webhook", URL: "http://[::1]:8080/hook", Secret: "whsec_c2VjcmV0", MaxAttempts: 1},
	}
	for _, d := range ok {
		if _, err := New(d); err != nil {
			t.Errorf("%v: %v", d, err)
		}
	}
	bad := []config.Destination{
		{Kind: "", URL: "https://x.example", Secret: "whsec_c2VjcmV0"},
		{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "a@b"},
		{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "a@b", Token: "t", Lookup: true},
		{Kind: "webhook", URL: "https://x.example"},
		{Kind: "webhook", URL: "ftp://x.example", Secret: "whsec_c2VjcmV0"},
		{Kind: "webhook", URL: "http://10.0.0.1/hook", Secret: "whsec_c2VjcmV0"},
		{Kind: "webhook", URL: "https://x.example", Secret: "whsec_c2VjcmV0", MaxAttempts: 101},
		{Kind: "webhook", URL: "https://x.example", Secret: "whsec_c2VjcmV0", MaxAttempts: -1},
		{Kind: "webhook", URL: "https://x.example", Secret: "whsec_c2VjcmV0", Timeout: -time.Second},
		{Kind: "webhook", URL: "https://x.example", Secret: "whsec_c2VjcmV0", Timeout: 21 * time.Second},
	}
	for _, d := range bad {
		if _, err := New(d); err == nil {
			t.Errorf("%v: accepted", d)
		}
	}
}

// TestDeliverySecretMustDecode: a webhook secret that is not whsec_ and
// base64 stops the program at start, with an error naming the field and
// not the value, from the config file and from the environment alike.
func TestDeliverySecretMustDecode(t *testing.T) {
	for _, bad := range []string{"plain-shared-secret", "whsec_not base64!", "whsec_"} {
		_, err := New(config.Destination{Kind: "webhook", URL: "https://hooks.example/in", Secret: bad})
		if err == nil || !strings.Contains(err.Error(), "delivery.secret") || (len(bad) > 6 && strings.Contains(err.Error(), bad)) {
			t.Errorf("%q: %v", bad, err)
		}
		env := map[string]string{"TABLE_NAME": "t", "DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://hooks.example/in",
			"DELIVERY_SECRET": `{"secret":"` + bad + `"}`}
		cfg, err := config.DeliveryFromEnv(func(k string) string { return env[k] })
		if err == nil {
			_, err = New(cfg.Destination)
		}
		if err == nil || !strings.Contains(err.Error(), "secret") || (len(bad) > 6 && strings.Contains(err.Error(), bad)) {
			t.Errorf("env %q: %v", bad, err)
		}
	}
	if _, err := New(config.Destination{Kind: "webhook", URL: "https://hooks.example/in", Secret: "c2VjcmV0"}); err != nil {
		t.Errorf("a secret without the optional prefix: %v", err)
	}
}

// TestNewDestination: each kind reaches the fake helpdesk through its own
// contract, with the credentials of the configuration.
func TestNewDestination(t *testing.T) {
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	fc := fake.Config()
	ticket := delivery.HelpdeskTicket{ID: "t-1", OperationKey: "op", TenantID: "ten", UserID: "u", Title: "Printer",
		Priority: "normal", CreatedAt: time.Unix(1700000000, 0).UTC()}
	for _, cfg := range []config.Destination{
		{Kind: "zendesk", URL: fake.URL(), Email: fc.Email, Token: fc.Token},
		{Kind: "webhook", URL: fake.WebhookURL(), Secret: fc.Secret, Lookup: true, Timeout: time.Second},
	} {
		d, err := New(cfg)
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

func TestNewDestinationRefusesBadConfig(t *testing.T) {
	for _, cfg := range []config.Destination{
		{Kind: "jira", URL: "https://x.example", Secret: "s"},
		{Kind: "webhook", URL: "http://tickets.example/hook", Secret: "s"},
		{Kind: "zendesk", URL: "https://acme.zendesk.com", Email: "a@b"},
	} {
		d, err := New(cfg)
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
	cfg := config.Destination{Kind: "webhook", URL: fake.URL() + path + query, Secret: fake.Config().Secret, Lookup: true, Timeout: time.Second}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	log.Info("delivery destination", slog.Any("delivery", cfg), slog.Any("destination", d))
	_, sendErr := d.Send(context.Background(), delivery.HelpdeskTicket{ID: "t-1", Title: "x", CreatedAt: time.Now()})
	_, _, lookErr := d.Lookup(context.Background(), "t-1")
	log.Info("step", slog.Any("send", sendErr), slog.Any("lookup", lookErr))
	fmt.Fprintf(&out, "%v %+v %v %v\n", cfg, d, sendErr, lookErr)
	text := out.String()
	for _, secret := range []string{"T000", "B000", "XXXXSECRET", "token=abc", fake.Config().Secret} {
		if strings.Contains(text, secret) {
			t.Fatalf("%q leaked:\n%s", secret, text)
		}
	}
	if sendErr == nil || lookErr == nil || !strings.Contains(text, fake.URL()+"/*") {
		t.Fatalf("not what the test means to check (%v, %v):\n%s", sendErr, lookErr, text)
	}
}
