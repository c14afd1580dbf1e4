package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// TestSlackStyleURLNeverShown: a webhook URL that carries secrets in its
// path and query (as Slack, Zapier and Teams URLs do), on the built local
// binary. A send that times out (the client's error names the URL it
// posted to) is recorded with its error; neither the server's log (its
// start line included), the stored delivery_error as the operator's list,
// list -json and show print it, nor get_ticket shows any part of the URL
// past its first path segment.
func TestSlackStyleURLNeverShown(t *testing.T) {
	bin := buildLocal(t)
	const pathSecret, querySecret = "XXXXPATHSECRET", "QUERYSECRET"
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{WebhookPath: "/services/T0ORG/B0HOOK/" + pathSecret})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, N: 1, Fault: fakehelpdesk.Fault{Delay: 3 * time.Second}})
	url := fake.WebhookURL() + "?token=" + querySecret
	cfg := writeConfig(t, fmt.Sprintf(`{"listen":"127.0.0.1:0","insecure_no_auth":true,
		"store":{"kind":"sqlite","path":%q},"users":{"user-a":{"tenant_id":"tenant-a","user_id":"alice"}},
		"delivery":{"kind":"webhook","url":%q,"secret":%q,"lookup":true,"timeout":"1s"}}`,
		filepath.Join(t.TempDir(), "tickets.sqlite"), url, fake.Config().Secret))
	s := startServer(t, bin, cfg)
	id := s.call(callbacktest.Create("user-a", "r-slack", callbacktest.Title("Secret URL")))["ticket_id"].(string)

	// The first send times out: the ticket is pending with its error.
	var shown string
	waitFor(t, "the timed-out send recorded", func() bool {
		_, out, _ := runLocalBinary(t, operatorBin(bin), "-config", cfg, "show", id)
		shown = out
		return strings.Contains(out, "may_be_in_helpdesk: true")
	}, s.logs)
	_, listed, _ := runLocalBinary(t, operatorBin(bin), "-config", cfg, "list", "-state", "pending")
	_, listedJSON, _ := runLocalBinary(t, operatorBin(bin), "-config", cfg, "list", "-state", "pending", "-json")
	ticket := fmt.Sprint(s.delivery(id))
	s.stop()
	logs := s.logs()
	if !strings.Contains(logs, "/*") {
		t.Errorf("the start line does not name the destination as https://host/*:\n%s", logs)
	}
	if !strings.Contains(shown, "send unknown") {
		t.Errorf("show does not give the send's error:\n%s", shown)
	}
	for what, text := range map[string]string{"server log": logs, "show": shown, "list": listed,
		"list -json": listedJSON, "get_ticket": ticket} {
		for _, secret := range []string{pathSecret, querySecret, "B0HOOK", "token="} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows %q:\n%s", what, secret, text)
			}
		}
	}
}
