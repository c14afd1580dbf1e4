//go:build !windows

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/app"
	"github.com/aivax-examples/idempotent-callback/internal/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testenv"
)

// opsStore is a store as the operator's command sees it, with tickets
// created through the service and put in the states a person deals with.
type opsStore struct {
	t   *testing.T
	cfg config.Local
	svc *core.Service
	ds  delivery.Store
	n   int
}

func newOpsStore(t *testing.T, kind string) *opsStore {
	t.Helper()
	var sc config.Store
	switch kind {
	case "sqlite":
		sc = config.Store{Kind: "sqlite", Path: filepath.Join(t.TempDir(), "tickets.sqlite")}
	case "dynamodb":
		endpoint := testenv.DynamoDB(t)
		sc = config.Store{Kind: "dynamodb", Endpoint: endpoint, Table: testenv.CreateTable(t, endpoint), Region: "us-east-1"}
	}
	st, closer, err := app.OpenStore(context.Background(), sc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })
	o := &opsStore{t: t, cfg: config.Local{Store: sc}, ds: st.(delivery.Store)}
	o.svc = &core.Service{Store: st, Users: memstore.Users{"user-a": {TenantID: "tenant-a", UserID: "alice"}},
		Policy: opkey.PolicyArguments, Retention: time.Hour, Deliver: true,
		NewID: func() string { o.n++; return fmt.Sprintf("ops-%s-%02d", kind, o.n) }}
	return o
}

// ticket creates a ticket and records it in state st.
func (o *opsStore) ticket(st delivery.State) string {
	o.t.Helper()
	ctx := context.Background()
	out := o.svc.Answer(ctx, core.Call{Function: core.CreateTicket, Content: json.RawMessage(callbacktest.Title("Printer")),
		ExternalUserID: "user-a", RequestID: fmt.Sprintf("r-%d", o.n)})
	id := out.TicketID()
	if st == delivery.StatePending {
		return id
	}
	now := time.Now()
	if _, err := o.ds.Claim(ctx, id, "w", now, now.Add(time.Minute)); err != nil {
		o.t.Fatal(err)
	}
	u := delivery.Update{State: st, Attempts: 8, Error: "send unknown (HTTP 502): bad gateway", SentUnknown: st == delivery.StateUnknown}
	if st == delivery.StateFailed {
		u.Error = "send refused (HTTP 422): RecordInvalid"
		u.Attempts = 1
	}
	if err := o.ds.Record(ctx, id, "w", u); err != nil {
		o.t.Fatal(err)
	}
	return id
}

// run runs the operator's command in-process.
func (o *opsStore) run(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := app.Deliveries(context.Background(), o.cfg, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestDeliveriesCommand: the operator's command on SQLite and DynamoDB
// Local lists tickets by state, shows one, retries a failed one, resolves
// an unknown one as delivered or as to be sent again, and refuses, with
// one clear line and nothing changed, a transition the ticket's state does
// not allow.
func TestDeliveriesCommand(t *testing.T) {
	for _, kind := range []string{"sqlite", "dynamodb"} {
		t.Run(kind, func(t *testing.T) {
			o := newOpsStore(t, kind)
			unknown1, unknown2 := o.ticket(delivery.StateUnknown), o.ticket(delivery.StateUnknown)
			failed, pending := o.ticket(delivery.StateFailed), o.ticket(delivery.StatePending)

			code, stdout, stderr := o.run("list", "-state", "unknown")
			if code != 0 || !strings.Contains(stdout, unknown1) || !strings.Contains(stdout, unknown2) ||
				strings.Contains(stdout, failed) || !strings.Contains(stdout, "bad gateway") || !strings.Contains(stderr, "2 unknown ticket(s)") {
				t.Fatalf("list unknown: %d\n%s%s", code, stdout, stderr)
			}
			if code, stdout, _ := o.run("list"); code != 0 || !strings.Contains(stdout, unknown1) {
				t.Fatalf("list (default unknown): %d\n%s", code, stdout)
			}
			if code, stdout, _ := o.run("list", "-state", "failed"); code != 0 || !strings.Contains(stdout, failed) || strings.Contains(stdout, unknown1) {
				t.Fatalf("list failed: %d\n%s", code, stdout)
			}
			code, stdout, _ = o.run("show", unknown1)
			for _, want := range []string{"state:", "unknown", "attempts:", "8", "bad gateway", "due_at:", "external_id:", "may_be_in_helpdesk: true"} {
				if code != 0 || !strings.Contains(stdout, want) {
					t.Fatalf("show: %d, no %q in\n%s", code, want, stdout)
				}
			}

			// Refused transitions: one line naming the state, nothing changed.
			for _, args := range [][]string{
				{"retry", unknown1}, {"retry", pending},
				{"resolve", "-external-id", "1", failed}, {"resolve", "-resend", pending},
			} {
				code, _, stderr := o.run(args...)
				if code != 1 || !strings.Contains(stderr, "refused") || strings.Count(stderr, "\n") != 1 {
					t.Fatalf("%v: %d %q, want exit 1 and one line saying refused", args, code, stderr)
				}
			}
			if code, _, stderr := o.run("show", "no-such-ticket"); code != 1 || !strings.Contains(stderr, "no such ticket") {
				t.Fatalf("show missing: %d %q", code, stderr)
			}
			for _, args := range [][]string{
				{}, {"frobnicate"}, {"show"}, {"retry", "a", "b"}, {"list", "-state", "lost"}, {"list", "-limit", "0"},
				{"resolve", unknown1}, {"resolve", "-resend", "-external-id", "1", unknown1},
				{"resolve", "-resend", "-external-url", "https://x.test/1", unknown1}, {"retry", "-resend", failed},
			} {
				if code, _, _ := o.run(args...); code != 2 {
					t.Fatalf("%v: exit %d, want 2 (usage)", args, code)
				}
			}
			if r, _ := o.ds.Delivery(context.Background(), unknown1); r.State != delivery.StateUnknown {
				t.Fatalf("a refused command changed %s: %+v", unknown1, r)
			}

			// retry: failed -> pending, due now, attempts reset.
			code, stdout, stderr = o.run("retry", failed)
			if code != 0 || !strings.Contains(stdout, "pending") || !strings.Contains(stderr, "failed -> pending") {
				t.Fatalf("retry: %d\n%s%s", code, stdout, stderr)
			}
			if r, _ := o.ds.Delivery(context.Background(), failed); r.State != delivery.StatePending || r.Attempts != 0 || r.DueAt.After(time.Now()) {
				t.Fatalf("after retry: %+v", r)
			}
			// resolve as delivered, flags after the id.
			code, _, stderr = o.run("resolve", unknown1, "-external-id", "8812", "-external-url", "https://acme.zendesk.test/agent/tickets/8812")
			if code != 0 {
				t.Fatalf("resolve delivered: %d %s", code, stderr)
			}
			if r, _ := o.ds.Delivery(context.Background(), unknown1); r.State != delivery.StateDelivered || r.ExternalID != "8812" ||
				r.ExternalURL != "https://acme.zendesk.test/agent/tickets/8812" {
				t.Fatalf("after resolve: %+v", r)
			}
			// resolve as to be sent again.
			if code, _, stderr := o.run("resolve", "-resend", unknown2); code != 0 {
				t.Fatalf("resolve resend: %d %s", code, stderr)
			}
			if r, _ := o.ds.Delivery(context.Background(), unknown2); r.State != delivery.StatePending || r.Attempts != 0 || r.SentUnknown {
				t.Fatalf("after resolve -resend: %+v", r)
			}
			if code, stdout, _ := o.run("list", "-state", "unknown"); code != 0 || strings.Count(stdout, "\n") != 1 {
				t.Fatalf("unknown tickets left:\n%s", stdout)
			}
		})
	}
}

// TestOperatorSettlesWhileServerRuns: the whole operator's path on the
// built binary. The server delivers to a webhook without lookup, one send
// at most: one ticket's send is lost in a dropped connection (unknown),
// another is refused (failed). The command lists the unknown one; a
// person, having checked the helpdesk, resolves it to be sent again and
// retries the failed one (the refusal was fixed on the helpdesk's side);
// the running server then delivers both, each once.
func TestOperatorSettlesWhileServerRuns(t *testing.T) {
	bin := buildLocal(t)
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, N: 1, Fault: fakehelpdesk.Drop()})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, N: 2, Fault: fakehelpdesk.Refuse(422)})
	cfg := writeConfig(t, fmt.Sprintf(`{"listen":"127.0.0.1:0","insecure_no_auth":true,
		"store":{"kind":"sqlite","path":%q},"users":{"user-a":{"tenant_id":"tenant-a","user_id":"alice"}},
		"delivery":{"kind":"webhook","url":%q,"secret":%q,"max_attempts":1,"timeout":"2s"}}`,
		filepath.Join(t.TempDir(), "tickets.sqlite"), fake.WebhookURL(), fake.Config().Secret))
	if code, stdout, stderr := runLocalBinary(t, bin, "-config", cfg, "delivries", "list"); code != 2 || stdout != "" ||
		!strings.Contains(stderr, `unknown command "delivries"`) {
		t.Fatalf("a mistyped command: %d %q %q, want exit 2 naming it", code, stdout, stderr)
	}
	s := startServer(t, bin, cfg)
	lost := s.call(callbacktest.Create("user-a", "r-lost", callbacktest.Title("Lost")))["ticket_id"].(string)
	waitFor(t, "the lost send ends unknown", func() bool { return s.delivery(lost)["state"] == "unknown" }, s.logs)
	refused := s.call(callbacktest.Create("user-a", "r-refused", callbacktest.Title("Refused")))["ticket_id"].(string)
	waitFor(t, "the refused send ends failed", func() bool { return s.delivery(refused)["state"] == "failed" }, s.logs)
	if !strings.Contains(s.logs(), "needs a person") {
		t.Fatalf("no warning for the tickets that need a person:\n%s", s.logs())
	}

	code, stdout, stderr := runLocalBinary(t, bin, "-config", cfg, "deliveries", "list", "-state", "unknown")
	if code != 0 || !strings.Contains(stdout, lost) || strings.Contains(stdout, refused) {
		t.Fatalf("list unknown: %d\n%s%s", code, stdout, stderr)
	}
	if fake.Held(lost) != 0 {
		t.Fatal("the fake holds the lost ticket; the person would resolve it as delivered")
	}
	if code, _, stderr := runLocalBinary(t, bin, "-config", cfg, "deliveries", "resolve", "-resend", lost); code != 0 {
		t.Fatalf("resolve -resend: %d %s", code, stderr)
	}
	if code, _, stderr := runLocalBinary(t, bin, "-config", cfg, "deliveries", "retry", refused); code != 0 {
		t.Fatalf("retry: %d %s", code, stderr)
	}
	for _, id := range []string{lost, refused} {
		waitFor(t, id+" delivered", func() bool { return s.delivery(id)["state"] == "delivered" }, s.logs)
		if fake.Held(id) != 1 {
			t.Fatalf("the fake holds %s %d times", id, fake.Held(id))
		}
	}
	s.stop()
}
