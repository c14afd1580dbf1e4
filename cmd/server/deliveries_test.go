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

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/app/localstore"
	"github.com/aivax-examples/idempotent-callback/internal/app/operator"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

// opsStore is a store as the operator's command sees it, with tickets
// created through the service and put in the states a person deals with.
type opsStore struct {
	t   *testing.T
	cfg config.Local
	st  localstore.Settings // cfg.Store, checked
	svc *core.Service
	ds  delivery.Outbox
	n   int
	// stdin is what the command reads on its standard input.
	stdin string
	// where is how the command names the store it acts on.
	where string
	// at, when set, is the service's clock (failedAt), read through
	// svc.Now: the service builds its Guard, clock and all, once.
	at time.Time
}

func newOpsStore(t *testing.T, kind string) *opsStore {
	t.Helper()
	return newOpsStoreIn(t, kind, "us-east-1")
}

// newOpsStoreIn is newOpsStore with the file's store.region (dynamodb; ""
// leaves it to the SDK's chain).
func newOpsStoreIn(t *testing.T, kind, region string) *opsStore {
	t.Helper()
	var sc config.StoreSettings
	var where string
	switch kind {
	case "sqlite":
		sc = config.StoreSettings{Kind: "sqlite", Path: filepath.Join(t.TempDir(), "tickets.sqlite")}
		where = "SQLite file " + sc.Path
	case "dynamodb":
		endpoint := testenv.DynamoDB(t)
		sc = config.StoreSettings{Kind: "dynamodb", Endpoint: endpoint, Table: testenv.CreateTable(t, endpoint), Region: region}
		where = "DynamoDB table " + sc.Table + " in region "
	}
	checked, err := localstore.CheckSettings(sc, "")
	if err != nil {
		t.Fatal(err)
	}
	st, closer, err := localstore.Open(context.Background(), checked, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })
	o := &opsStore{t: t, cfg: config.Local{Store: sc}, st: checked, ds: st.(delivery.Outbox), where: where}
	o.svc = &core.Service{Store: st, Users: memstore.Users{"user-a": {TenantID: "tenant-a", UserID: "alice"}},
		Policy: idem.PolicyArguments, Retention: time.Hour, Deliver: true,
		NewID: func() string { o.n++; return fmt.Sprintf("ops-%s-%02d", kind, o.n) },
		Now: func() time.Time {
			if o.at.IsZero() {
				return time.Now()
			}
			return o.at
		}}
	return o
}

// ticket creates a ticket and records it in state st.
func (o *opsStore) ticket(st delivery.State) string {
	o.t.Helper()
	ctx := context.Background()
	out := o.svc.Answer(ctx, core.Call{Function: core.CreateTicket, Content: json.RawMessage(callbacktest.Title("Printer")),
		ExternalUserID: "user-a", RequestID: fmt.Sprintf("r-%d", o.n)})
	id := coretest.TicketID(out)
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
	code := operator.Deliveries(context.Background(), o.cfg, o.st, args, strings.NewReader(o.stdin), &stdout, &stderr)
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
				strings.Contains(stdout, failed) || !strings.Contains(stdout, "bad gateway") || !strings.Contains(stderr, "2 unknown delivery record(s)") {
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

			// Refused transitions: the store the command was about to act
			// on, then one line naming the state; nothing changed.
			for _, args := range [][]string{
				{"retry", unknown1}, {"retry", pending},
				{"resolve", "-external-id", "1", failed}, {"resolve", "-resend", pending},
			} {
				code, _, stderr := o.run(args...)
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				if code != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], "store: "+o.where) || !strings.Contains(lines[1], "refused") {
					t.Fatalf("%v: %d %q, want exit 1, the store, and one line saying refused", args, code, stderr)
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
			// resolve as to be sent again: what is known of earlier sends
			// stays, so the engine looks the ticket up before it sends.
			if code, _, stderr := o.run("resolve", "-resend", unknown2); code != 0 {
				t.Fatalf("resolve resend: %d %s", code, stderr)
			}
			if r, _ := o.ds.Delivery(context.Background(), unknown2); r.State != delivery.StatePending || r.Attempts != 0 || !r.SentUnknown {
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

	code, stdout, stderr := runLocalBinary(t, operatorBin(bin), "-config", cfg, "list", "-state", "unknown")
	if code != 0 || !strings.Contains(stdout, lost) || strings.Contains(stdout, refused) {
		t.Fatalf("list unknown: %d\n%s%s", code, stdout, stderr)
	}
	if fake.Held(lost) != 0 {
		t.Fatal("the fake holds the lost ticket; the person would resolve it as delivered")
	}
	if code, _, stderr := runLocalBinary(t, operatorBin(bin), "-config", cfg, "resolve", "-resend", lost); code != 0 {
		t.Fatalf("resolve -resend: %d %s", code, stderr)
	}
	if code, _, stderr := runLocalBinary(t, operatorBin(bin), "-config", cfg, "retry", refused); code != 0 {
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

// failedAt creates a ticket as if at created and records it failed with
// the error text msg.
func (o *opsStore) failedAt(created time.Time, msg string) string {
	o.t.Helper()
	o.at = created
	defer func() { o.at = time.Time{} }()
	id := o.ticket(delivery.StatePending)
	now := time.Now()
	ctx := context.Background()
	if _, err := o.ds.Claim(ctx, id, "w", now, now.Add(time.Minute)); err != nil {
		o.t.Fatal(err)
	}
	if err := o.ds.Record(ctx, id, "w", delivery.Update{State: delivery.StateFailed, Attempts: 1, Error: msg}); err != nil {
		o.t.Fatal(err)
	}
	return id
}

// TestDeliveriesBulkRetry: retry -state failed shows the store it acts on,
// the tickets and their count, and changes nothing without a "y" on stdin
// or -yes; -since keeps the tickets created within the duration; unknown
// tickets are never retried in bulk. On SQLite and DynamoDB Local.
func TestDeliveriesBulkRetry(t *testing.T) {
	for _, kind := range []string{"sqlite", "dynamodb"} {
		t.Run(kind, func(t *testing.T) {
			o := newOpsStore(t, kind)
			old := o.failedAt(time.Now().Add(-3*time.Hour), "send refused (HTTP 422): RecordInvalid")
			recent1 := o.failedAt(time.Now(), "send refused (HTTP 422): RecordInvalid")
			recent2 := o.failedAt(time.Now(), "attempts ran out (8 sends): send not_created (HTTP 429)")
			unknown := o.ticket(delivery.StateUnknown)
			state := func(id string) delivery.State {
				r, err := o.ds.Delivery(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				return r.State
			}
			where := "SQLite file " + o.cfg.Store.Path
			if kind == "dynamodb" {
				where = "DynamoDB table " + o.cfg.Store.Table + " in region us-east-1"
			}

			// Not confirmed: no stdin (as in CI), or an answer other than y.
			for _, answer := range []string{"", "n\n", "maybe\n"} {
				o.stdin = answer
				code, stdout, stderr := o.run("retry", "--state", "failed")
				if code != 1 || stdout != "" || !strings.Contains(stderr, "store: "+where) ||
					!strings.Contains(stderr, "3 failed ticket(s) to retry") || !strings.Contains(stderr, recent2) ||
					!strings.Contains(stderr, "not confirmed: nothing changed") {
					t.Fatalf("answer %q: %d %q\n%s", answer, code, stdout, stderr)
				}
			}
			for _, id := range []string{old, recent1, recent2} {
				if st := state(id); st != delivery.StateFailed {
					t.Fatalf("%s is %s after an unconfirmed retry", id, st)
				}
			}

			// -since 1h -yes: the two recent ones only.
			o.stdin = ""
			code, stdout, stderr := o.run("retry", "--state", "failed", "--since", "1h", "--yes")
			if code != 0 || !strings.Contains(stderr, "2 failed ticket(s) created within 1h0m0s") ||
				strings.Count(stdout, "failed -> pending") != 2 || strings.Contains(stderr, old) {
				t.Fatalf("retry -since 1h -yes: %d\n%s%s", code, stdout, stderr)
			}
			if state(old) != delivery.StateFailed || state(recent1) != delivery.StatePending || state(recent2) != delivery.StatePending {
				t.Fatalf("after -since 1h: old %s, recent %s %s", state(old), state(recent1), state(recent2))
			}

			// Confirmed with "y" on stdin: the old one.
			o.stdin = "y\n"
			code, stdout, stderr = o.run("retry", "-state", "failed")
			if code != 0 || !strings.Contains(stderr, "1 failed ticket(s) to retry") || !strings.Contains(stdout, old+"\tfailed -> pending") {
				t.Fatalf("retry confirmed: %d\n%s%s", code, stdout, stderr)
			}
			if r, _ := o.ds.Delivery(context.Background(), old); r.State != delivery.StatePending || r.Attempts != 0 {
				t.Fatalf("after retry: %+v", r)
			}
			// Nothing left: no question asked.
			o.stdin = ""
			if code, _, stderr := o.run("retry", "-state", "failed"); code != 0 || !strings.Contains(stderr, "0 failed ticket(s): nothing to retry") {
				t.Fatalf("retry with nothing failed: %d %s", code, stderr)
			}
			if state(unknown) != delivery.StateUnknown {
				t.Fatalf("a bulk retry changed the unknown ticket")
			}
			for _, args := range [][]string{
				{"retry", "-state", "unknown", "-yes"}, {"retry", "-state", "failed", recent1}, {"retry", "-since", "1h", recent1},
				{"retry", "-yes", recent1}, {"retry", "-state", "failed", "-since", "-1h"}, {"list", "-yes"}, {"retry", "-state", "failed", "-json"},
			} {
				if code, _, _ := o.run(args...); code != 2 {
					t.Fatalf("%v: exit %d, want 2 (usage)", args, code)
				}
			}
			// The single-id retry still works.
			o.stdin = ""
			id := o.failedAt(time.Now(), "send refused (HTTP 400)")
			if code, _, stderr := o.run("retry", id); code != 0 || state(id) != delivery.StatePending {
				t.Fatalf("retry %s: %d %s", id, code, stderr)
			}
		})
	}
}

// TestDeliveriesListJSON: list -json writes one JSON object per line with
// the record's fields, and nothing for an empty state.
func TestDeliveriesListJSON(t *testing.T) {
	o := newOpsStore(t, "sqlite")
	a, b := o.ticket(delivery.StateUnknown), o.ticket(delivery.StateUnknown)
	o.ticket(delivery.StateFailed)
	code, stdout, stderr := o.run("list", "-state", "unknown", "-json")
	if code != 0 || !strings.Contains(stderr, "2 unknown delivery record(s)") {
		t.Fatalf("list -json: %d %s", code, stderr)
	}
	var ids []string
	for line := range strings.Lines(stdout) {
		var r struct {
			TicketID        string `json:"ticket_id"`
			State           string `json:"state"`
			Attempts        int    `json:"attempts"`
			MayBeInHelpdesk bool   `json:"may_be_in_helpdesk"`
			Error           string `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r.State != "unknown" || r.Attempts != 8 || !r.MayBeInHelpdesk || !strings.Contains(r.Error, "bad gateway") {
			t.Fatalf("line %q", line)
		}
		ids = append(ids, r.TicketID)
	}
	if fmt.Sprint(ids) != fmt.Sprint([]string{a, b}) {
		t.Fatalf("ids %v, want [%s %s]", ids, a, b)
	}
	if code, stdout, _ := o.run("list", "-state", "delivering", "-json"); code != 0 || stdout != "" {
		t.Fatalf("empty list -json: %d %q", code, stdout)
	}
}

// TestDeliveriesRedactURLs: an error text holding a Slack-style webhook
// URL (a secret in its path, a token in its query, user info) is printed
// by list, list -json, show and the bulk retry's preview only as
// urls.RedactedRaw shows that URL, the one redaction of the
// destinations' URLs: never its query or user info, and never a path
// segment that function drops.
func TestDeliveriesRedactURLs(t *testing.T) {
	const hook = "https://bot:PWSECRET@hooks.slack.com/services/T000/B000/XXXXSECRET?token=QSECRET"
	o := newOpsStore(t, "sqlite")
	id := o.failedAt(time.Now(), `send unknown: Post "`+hook+`": context deadline exceeded; also at `+hook+`.`)
	redacted := urls.RedactedRaw(hook)
	secrets := []string{"PWSECRET", "QSECRET"}
	if !strings.Contains(redacted, "XXXXSECRET") {
		secrets = append(secrets, "XXXXSECRET")
	}
	for _, args := range [][]string{{"list", "-state", "failed"}, {"list", "-state", "failed", "-json"}, {"show", id}, {"retry", "-state", "failed"}} {
		code, stdout, stderr := o.run(args...)
		out := stdout + stderr
		if args[0] == "list" && args[len(args)-1] == "-json" {
			var r struct{ Error string }
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			out = r.Error
		}
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%v prints %s:\n%s", args, s, out)
			}
		}
		if (args[0] != "retry" && code != 0) || !strings.Contains(out, redacted) {
			t.Errorf("%v: exit %d, want the URL as %s in\n%s", args, code, redacted, out)
		}
	}
}

// The operator's command names the table and the region the SDK's chain
// resolves (AWS_REGION here; no store.region in the file) before it
// changes anything: with a table of the same name in another region, the
// person sees which one they are about to change.
func TestDeliveriesNamesTheStoreAndRegionFirst(t *testing.T) {
	testenv.IsolatedAWSEnv(t, map[string]string{"AWS_REGION": "eu-north-1"})
	o := newOpsStoreIn(t, "dynamodb", "")
	failed := o.ticket(delivery.StateFailed)
	code, _, stderr := o.run("retry", failed)
	first, _, _ := strings.Cut(stderr, "\n")
	if want := "store: " + o.where + "eu-north-1 at "; code != 0 || !strings.HasPrefix(first, want) {
		t.Fatalf("retry: %d, first line %q, want it to start %q\n%s", code, first, want, stderr)
	}
}

// TestDeliveriesCheck: `deliveries check` makes one lookup of a key no
// ticket has, on the configuration's destination, and says in one line
// whether the helpdesk answers it (exit 0) or refuses it (exit 1, REFUSED,
// with what the token needs); it needs no store. The local server makes
// the same check at start and logs the refusal as an error.
func TestDeliveriesCheck(t *testing.T) {
	for _, kind := range []string{"zendesk", "webhook"} {
		for _, refuse := range []bool{false, true} {
			fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
			lookup := fakehelpdesk.ZendeskLookup
			d := &config.Destination{Kind: kind, URL: fake.URL(), Email: fake.Config().Email, Token: fake.Config().Token}
			if kind == "webhook" {
				lookup = fakehelpdesk.WebhookLookup
				d = &config.Destination{Kind: kind, URL: fake.WebhookURL(), Secret: fake.Config().Secret, Lookup: true}
			}
			if refuse {
				fake.Script(fakehelpdesk.Rule{Kind: lookup, Fault: fakehelpdesk.Forbidden()})
			}
			var stdout, stderr bytes.Buffer
			code := operator.Deliveries(context.Background(), config.Local{Delivery: d}, localstore.Settings{}, []string{"check"}, strings.NewReader(""), &stdout, &stderr)
			want, says := 0, "lookups work"
			if refuse {
				want, says = 1, "REFUSED: the helpdesk refused a lookup (HTTP 403)"
			}
			if code != want || !strings.Contains(stdout.String(), says) || strings.Count(stdout.String(), "\n") != 1 ||
				fake.Requests(lookup) != 1 || fake.Total() != 0 {
				t.Fatalf("%s, refused %t: exit %d, %d lookups, %d tickets\n%s%s; want exit %d, one line saying %q, one lookup, no ticket",
					kind, refuse, code, fake.Requests(lookup), fake.Total(), stdout.String(), stderr.String(), want, says)
			}
		}
	}
	var stderr bytes.Buffer
	if code := operator.Deliveries(context.Background(), config.Local{}, localstore.Settings{}, []string{"check"}, strings.NewReader(""), io.Discard, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "no delivery block") {
		t.Fatalf("without a delivery block: exit %d, %s", code, stderr.String())
	}
}

// followUp adds a comment to ticket (fn add_comment) or closes it (fn
// close_ticket) through the service and returns the follow-up's outbox id,
// the id the command takes: the last of the ticket's follow-ups.
func (o *opsStore) followUp(fn, ticket string) string {
	o.t.Helper()
	o.n++
	args := map[string]string{"ticket_id": ticket, "body": "It fails on my phone too."}
	if fn == core.CloseTicket {
		args = map[string]string{"ticket_id": ticket, "resolution": "Works now."}
	}
	content, _ := json.Marshal(args)
	out := o.svc.Answer(context.Background(), core.Call{Function: fn, Content: content, ExternalUserID: "user-a",
		RequestID: fmt.Sprintf("r-%s-%d", fn, o.n)})
	if out.Kind != core.KindCreated {
		o.t.Fatalf("%s: kind %v, code %s, err %v", fn, out.Kind, out.Code, out.Err)
	}
	tk, err := o.svc.Store.Ticket(context.Background(), ticket)
	if err != nil {
		o.t.Fatal(err)
	}
	list := tk.Attrs.List(core.AttrFollowUps)
	if len(list) == 0 {
		o.t.Fatalf("%s of %s: no follow-up listed", fn, ticket)
	}
	return list[len(list)-1]
}

// record claims id and records u on it, as a worker would.
func (o *opsStore) record(id string, u delivery.Update) {
	o.t.Helper()
	ctx := context.Background()
	now := time.Now()
	if _, err := o.ds.Claim(ctx, id, "w", now, now.Add(time.Minute)); err != nil {
		o.t.Fatalf("claim %s: %v", id, err)
	}
	if err := o.ds.Record(ctx, id, "w", u); err != nil {
		o.t.Fatalf("record %s: %v", id, err)
	}
}

// TestDeliveriesFollowUps: the command takes a follow-up's outbox id
// (COMMENT#…, CLOSE#…) as it takes a ticket's: list shows it with its
// kind (table and -json), show names its kind, retry sends a failed
// comment again, resolve -failed ends an unknown comment failed with the
// person's reason, and resolve -external-id records an unknown close
// delivered; each line names the record by its kind, not as a ticket.
func TestDeliveriesFollowUps(t *testing.T) {
	o := newOpsStore(t, "sqlite")
	ctx := context.Background()
	ticket := o.ticket(delivery.StatePending)
	o.record(ticket, delivery.Update{State: delivery.StateDelivered, Attempts: 1, ExternalID: "8812", DeliveredAt: time.Now()})
	comment := o.followUp(core.AddComment, ticket)
	closing := o.followUp(core.CloseTicket, ticket)
	if !strings.HasPrefix(comment, "COMMENT#") || !strings.HasPrefix(closing, "CLOSE#") {
		t.Fatalf("follow-up ids %s, %s", comment, closing)
	}
	o.record(comment, delivery.Update{State: delivery.StateFailed, Attempts: 1, Error: "send refused (HTTP 422): RecordInvalid"})

	code, stdout, stderr := o.run("list", "-state", "failed")
	if code != 0 || !strings.Contains(stderr, "1 failed delivery record(s)") || !strings.HasPrefix(stdout, "ID ") {
		t.Fatalf("list failed: %d\n%s%s", code, stdout, stderr)
	}
	if row := strings.Fields(strings.Split(stdout, "\n")[1]); len(row) < 3 || row[0] != comment || row[1] != "comment" || row[2] != "failed" {
		t.Fatalf("list failed: the row %q, want the comment's id, its kind and its state:\n%s", row, stdout)
	}
	code, stdout, _ = o.run("list", "-state", "failed", "-json")
	var listed struct {
		TicketID string `json:"ticket_id"`
		Kind     string `json:"kind"`
		State    string `json:"state"`
	}
	if err := json.Unmarshal([]byte(stdout), &listed); code != 0 || err != nil || listed.TicketID != comment || listed.Kind != "comment" || listed.State != "failed" {
		t.Fatalf("list -json: %d %q (%v)", code, stdout, err)
	}
	code, stdout, _ = o.run("show", comment)
	for _, want := range []string{"id: " + comment, "kind: comment", "state: failed", "RecordInvalid"} {
		if code != 0 || !strings.Contains(strings.Join(strings.Fields(stdout), " "), want) {
			t.Fatalf("show %s: %d, no %q in\n%s", comment, code, want, stdout)
		}
	}
	if strings.Contains(stdout, "ticket_id") {
		t.Errorf("show of a comment names its id ticket_id:\n%s", stdout)
	}

	// retry: the failed comment back to pending, due now, attempts reset.
	code, _, stderr = o.run("retry", comment)
	if code != 0 || !strings.Contains(stderr, "comment "+comment+": failed -> pending") || strings.Contains(stderr, "ticket "+comment) {
		t.Fatalf("retry %s: %d %s", comment, code, stderr)
	}
	if r, _ := o.ds.Delivery(ctx, comment); r.State != delivery.StatePending || r.Attempts != 0 || r.DueAt.After(time.Now()) {
		t.Fatalf("after retry: %+v", r)
	}

	// resolve -failed: a person decided the unknown comment is not to be
	// sent.
	o.record(comment, delivery.Update{State: delivery.StateUnknown, Attempts: 8, SentUnknown: true, Error: "send unknown (HTTP 502): bad gateway"})
	code, _, stderr = o.run("resolve", "-failed", "the customer withdrew it", comment)
	if code != 0 || !strings.Contains(stderr, "comment "+comment+": unknown -> failed") {
		t.Fatalf("resolve -failed %s: %d %s", comment, code, stderr)
	}
	if r, _ := o.ds.Delivery(ctx, comment); r.State != delivery.StateFailed || !strings.Contains(r.Error, "the customer withdrew it") {
		t.Fatalf("after resolve -failed: %+v", r)
	}

	// resolve -external-id: the unknown close is in the helpdesk.
	o.record(closing, delivery.Update{State: delivery.StateUnknown, Attempts: 8, SentUnknown: true, Error: "send unknown (HTTP 502): bad gateway"})
	if code, stdout, _ := o.run("list", "-state", "unknown"); code != 0 || !strings.Contains(stdout, closing) || !strings.Contains(stdout, " close ") {
		t.Fatalf("list unknown: %d\n%s", code, stdout)
	}
	code, _, stderr = o.run("resolve", "-external-id", "8812", closing)
	if code != 0 || !strings.Contains(stderr, "close "+closing+": unknown -> delivered as 8812") {
		t.Fatalf("resolve -external-id %s: %d %s", closing, code, stderr)
	}
	if r, _ := o.ds.Delivery(ctx, closing); r.State != delivery.StateDelivered || r.ExternalID != "8812" {
		t.Fatalf("after resolve: %+v", r)
	}

	// A follow-up id that names nothing: one line saying so, and what a
	// follow-up's id looks like.
	if code, _, stderr := o.run("show", "COMMENT#no-such-comment"); code != 1 || !strings.Contains(stderr, "COMMENT#") || !strings.Contains(stderr, "no ticket or follow-up") {
		t.Fatalf("show missing follow-up: %d %q", code, stderr)
	}
}
