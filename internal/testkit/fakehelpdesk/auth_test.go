package fakehelpdesk_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// signedCreate posts body under key, signed for id at the given time.
func (c *client) signedCreate(key, id, body string, at time.Time) reply {
	req, _ := http.NewRequest(http.MethodPost, c.s.WebhookURL(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	fakehelpdesk.SignHeaders(req.Header, c.s.Config().Secret, id, at, []byte(body))
	return c.do(req)
}

// TestWebhookSignatureByHand: the fake accepts a signature computed here
// with crypto/hmac from the convention's text, "{id}.{timestamp}.{body}"
// under the secret's decoded bytes, so Sign and the fake's verifier agree
// with the convention and not only with each other.
func TestWebhookSignatureByHand(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Config().Secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"ticket_id":"k"}`
	ts := strconv.FormatInt(s.Now().Unix(), 10)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("k." + ts + "." + body))
	sig := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	if got := fakehelpdesk.Sign(s.Config().Secret, "k", s.Now(), []byte(body)); got != sig {
		t.Fatalf("Sign = %q; by hand %q", got, sig)
	}
	req, _ := http.NewRequest(http.MethodPost, s.WebhookURL(), strings.NewReader(body))
	req.Header.Set("Idempotency-Key", "k")
	req.Header.Set("webhook-id", "k")
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v0,ignored "+sig) // several signatures, space separated
	want(t, c.do(req), 201, "WH-1")
}

// TestWebhookTimestampTolerance: a timestamp more than five minutes from
// the fake's clock, either way, is refused with 401 and stores nothing.
func TestWebhookTimestampTolerance(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	body := `{"ticket_id":"k"}`
	want(t, c.signedCreate("k", "k", body, s.Now().Add(-fakehelpdesk.SignatureTolerance-2*time.Second)), 401, "tolerance")
	want(t, c.signedCreate("k", "k", body, s.Now().Add(fakehelpdesk.SignatureTolerance+2*time.Second)), 401, "tolerance")
	if s.Total() != 0 {
		t.Fatalf("total %d after refused requests", s.Total())
	}
	want(t, c.signedCreate("k", "k", body, s.Now().Add(-4*time.Minute)), 201, "WH-1")
	// The fake's clock is the reference: once it is advanced, a request
	// signed on the real clock is stale.
	s.Advance(time.Hour)
	want(t, c.signedCreate("k", "k", body, time.Now()), 401, "tolerance")
	want(t, c.signedCreate("k", "k", body, s.Now()), 201, "WH-1")
}

// TestWebhookReplay: the same id, timestamp and signature a second time is
// a replay, answered 409 and counted, and creates nothing; the same body
// signed a second later is a legitimate resend.
func TestWebhookReplay(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{RejectReplays: true})
	c := newClient(t, s, 5*time.Second)
	body := `{"ticket_id":"k"}`
	at := s.Now()
	want(t, c.signedCreate("k", "k", body, at), 201, "WH-1")
	want(t, c.signedCreate("k", "k", body, at), 409, "replayed")
	// A replay with a fresh Idempotency-Key under the same signed id is
	// refused too: the key must be the signed webhook-id.
	want(t, c.signedCreate("fresh", "k", body, at.Add(time.Second)), 400, "webhook-id")
	want(t, c.signedCreate("k", "k", body, at.Add(2*time.Second)), 201, "WH-1")
	if s.Replays() != 1 || s.Total() != 1 {
		t.Fatalf("replays %d, total %d; want 1 1", s.Replays(), s.Total())
	}

	// Lookups: signed over "idempotency_key=<id>" with webhook-id the id.
	lookup := func(id string, at time.Time) reply {
		req, _ := http.NewRequest(http.MethodGet, s.WebhookURL()+"?idempotency_key=k", nil)
		fakehelpdesk.SignHeaders(req.Header, s.Config().Secret, id, at, []byte("idempotency_key=k"))
		return c.do(req)
	}
	want(t, lookup("k", at), 200, "WH-1")
	want(t, lookup("k", at), 409, "replayed")
	want(t, lookup("other", at), 400, "webhook-id")
	want(t, lookup("k", at.Add(time.Second)), 200, "WH-1")
}

// TestRevoked: while the credentials are revoked every call of either
// side answers 401 and nothing is stored; restored, they work again.
func TestRevoked(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	s.SetRevoked(true)
	want(t, c.zendeskCreate("z", zBody("z", "a")), 401, "authenticate")
	want(t, c.zendeskLookup("z"), 401, "authenticate")
	want(t, c.webhookCreate("w", `{}`, ""), 401, "signature")
	want(t, c.webhookLookup("w", ""), 401, "signature")
	if s.Total() != 0 {
		t.Fatalf("total %d while revoked", s.Total())
	}
	s.SetRevoked(false)
	want(t, c.zendeskCreate("z", zBody("z", "a")), 201, "")
	want(t, c.webhookCreate("w", `{}`, ""), 201, "")
	if s.Total() != 2 {
		t.Fatalf("total %d once restored", s.Total())
	}
}

// TestRateLimitedLookups: a rule answering 429 with Retry-After applies to
// lookups of either side, as many times as it says, and then they answer.
func TestRateLimitedLookups(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskLookup, Times: 2, Fault: fakehelpdesk.TooManyRequests("7")})
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookLookup, Times: 2, Fault: fakehelpdesk.TooManyRequests("9")})
	for range 2 {
		if r := c.zendeskLookup("z"); r.status != 429 || r.header.Get("Retry-After") != "7" {
			t.Fatalf("zendesk lookup: %d Retry-After %q", r.status, r.header.Get("Retry-After"))
		}
		if r := c.webhookLookup("w", ""); r.status != 429 || r.header.Get("Retry-After") != "9" {
			t.Fatalf("webhook lookup: %d Retry-After %q", r.status, r.header.Get("Retry-After"))
		}
	}
	want(t, c.zendeskLookup("z"), 200, `"tickets":[]`)
	want(t, c.webhookLookup("w", ""), 404, "")
}

// TestLateCommit: the create is held past the client's timeout and
// committed after the delay anyway; meanwhile lookups do not see it and a
// resend under the same key answers 409.
func TestLateCommit(t *testing.T) {
	for _, kind := range []fakehelpdesk.Kind{fakehelpdesk.ZendeskCreate, fakehelpdesk.WebhookCreate} {
		t.Run(string(kind), func(t *testing.T) {
			s := fakehelpdesk.New(t, fakehelpdesk.Config{})
			s.Script(fakehelpdesk.Rule{Kind: kind, N: 1, Fault: fakehelpdesk.LateCommit(3 * time.Second)})
			impatient := newClient(t, s, 100*time.Millisecond)
			c := newClient(t, s, 5*time.Second)
			send := func(c *client) reply {
				if kind == fakehelpdesk.ZendeskCreate {
					return c.zendeskCreate("k", zBody("k", "a"))
				}
				return c.webhookCreate("k", `{"ticket_id":"k"}`, "")
			}
			lookup := func() reply {
				if kind == fakehelpdesk.ZendeskCreate {
					return c.zendeskLookup("k")
				}
				return c.webhookLookup("k", "")
			}
			if r := send(impatient); r.err == nil {
				t.Fatalf("got %d %q; want the client to time out", r.status, r.body)
			}
			// The client has left; the ticket is not there yet.
			if s.Held("k") != 0 || s.InFlight() != 1 {
				t.Fatalf("held %d, in flight %d right after the timeout", s.Held("k"), s.InFlight())
			}
			absent := lookup()
			if absent.status != 404 && !strings.Contains(absent.body, `"tickets":[]`) {
				t.Fatalf("lookup before the commit: %d %q", absent.status, absent.body)
			}
			want(t, send(c), 409, "InProgress")
			for s.InFlight() > 0 {
				time.Sleep(10 * time.Millisecond)
			}
			if s.Held("k") != 1 {
				t.Fatalf("held %d after the late commit", s.Held("k"))
			}
			want(t, lookup(), 200, "")
			want(t, send(c), 201, "") // the key replays the first ticket
			if s.Held("k") != 1 {
				t.Fatalf("held %d after the resend", s.Held("k"))
			}
		})
	}
}

// TestLateCommitAnswersAPatientClient: a client still waiting when the
// held create commits gets the normal answer.
func TestLateCommitAnswersAPatientClient(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, Fault: fakehelpdesk.LateCommit(50 * time.Millisecond)})
	want(t, newClient(t, s, 10*time.Second).zendeskCreate("k", zBody("k", "a")), 201, `"external_id":"k"`)
	if s.Held("k") != 1 || s.InFlight() != 0 {
		t.Fatalf("held %d, in flight %d", s.Held("k"), s.InFlight())
	}
}

// TestCloseDropsHeldCreates: Close does not wait for a late commit that
// is not due, and that commit never happens.
func TestCloseDropsHeldCreates(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Fault: fakehelpdesk.LateCommit(time.Hour)})
	if r := newClient(t, s, 100*time.Millisecond).webhookCreate("k", `{}`, ""); r.err == nil {
		t.Fatalf("got %d; want a timeout", r.status)
	}
	s.Close()
	if s.Held("k") != 0 {
		t.Fatalf("held %d after Close", s.Held("k"))
	}
}

// TestReplaysCountedByDefault: without RejectReplays a replay is served
// (the key replays the first answer) and counted.
func TestReplaysCountedByDefault(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 5*time.Second)
	at := s.Now()
	want(t, c.signedCreate("k", "k", `{}`, at), 201, "WH-1")
	want(t, c.signedCreate("k", "k", `{}`, at), 201, "WH-1")
	if s.Replays() != 1 || s.Total() != 1 {
		t.Fatalf("replays %d, total %d", s.Replays(), s.Total())
	}
}
