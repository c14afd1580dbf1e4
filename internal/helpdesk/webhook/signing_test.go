package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/helpdesktest"
)

// verify checks a request's Standard Webhooks headers over data with the
// convention's own library (not our signer), ignoring the timestamp's
// distance from the real clock: the callers compare it themselves.
func verify(t *testing.T, h http.Header, data []byte) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(fakehelpdesk.DefaultSecret)
	if err != nil {
		t.Fatal(err)
	}
	return wh.VerifyIgnoringTimestamp(data, h)
}

// TestSignedByTheConvention: on the real clock (no Now given), the
// library's full Verify (five minutes' tolerance against its own clock)
// accepts what Send and Lookup sign; the lookup signs the parameter's
// unescaped text, and the timestamp is the clock's when sent.
func TestSignedByTheConvention(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c, err := webhook.New(webhook.Config{URL: s.WebhookURL(), Secret: s.Config().Secret, Lookup: true})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Unix()
	if _, err := c.Send(context.Background(), ticket); err != nil {
		t.Fatal(err)
	}
	odd := "id with space+plus/é"
	if _, _, err := c.Lookup(context.Background(), odd); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Unix()
	wh, err := standardwebhooks.NewWebhook(fakehelpdesk.DefaultSecret)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Received()
	if err := wh.Verify(got[0].Body, got[0].Header); err != nil {
		t.Fatalf("send: %v (headers %v)", err, got[0].Header)
	}
	if err := wh.Verify([]byte("idempotency_key="+odd), got[1].Header); err != nil || got[1].Header.Get("webhook-id") != odd {
		t.Fatalf("lookup: %v (headers %v)", err, got[1].Header)
	}
	for _, r := range got {
		ts, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		if err != nil || ts < before || ts > after {
			t.Fatalf("webhook-timestamp %q outside [%d, %d]", r.Header.Get("webhook-timestamp"), before, after)
		}
	}
	// The secret without its prefix is the same key.
	bare, err := webhook.DecodeSecret(strings.TrimPrefix(fakehelpdesk.DefaultSecret, webhook.SecretPrefix))
	if err != nil {
		t.Fatal(err)
	}
	want := got[0].Header.Get("webhook-signature")
	ts, _ := strconv.ParseInt(got[0].Header.Get("webhook-timestamp"), 10, 64)
	if sig := webhook.Sign(bare, ticket.ID, time.Unix(ts, 0), got[0].Body); sig != want {
		t.Fatalf("Sign with the bare key %q; sent %q", sig, want)
	}
}

// TestResendSignedAfresh: a resend carries the same body bytes with its
// own timestamp and so its own signature, each valid; the idempotency key
// and webhook-id stay the ticket id.
func TestResendSignedAfresh(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{RejectReplays: true})
	at := s.Now()
	clock := func() time.Time { return at }
	c, err := webhook.New(webhook.Config{URL: s.WebhookURL(), Secret: s.Config().Secret, Now: func() time.Time { return clock() }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(context.Background(), ticket); err != nil {
		t.Fatal(err)
	}
	at = at.Add(90 * time.Second)
	if _, err := c.Send(context.Background(), ticket); err != nil {
		t.Fatal(err)
	}
	got := s.Received()
	a, b := got[0].Header, got[1].Header
	if !bytes.Equal(got[0].Body, got[1].Body) || a.Get("webhook-signature") == b.Get("webhook-signature") ||
		b.Get("webhook-timestamp") != strconv.FormatInt(at.Unix(), 10) ||
		a.Get("webhook-id") != ticket.ID || b.Get("webhook-id") != ticket.ID || b.Get("Idempotency-Key") != ticket.ID {
		t.Fatalf("first %v\nresend %v", a, b)
	}
	if verify(t, a, got[0].Body) != nil || verify(t, b, got[1].Body) != nil || s.Held(ticket.ID) != 1 || s.Replays() != 0 {
		t.Fatalf("held %d, replays %d", s.Held(ticket.ID), s.Replays())
	}
}

// TestStaleClockIsRefused: a sender whose clock is more than five minutes
// off the receiver's is refused: the timestamp is what the signature
// vouches for, so a captured request does not stay valid.
func TestStaleClockIsRefused(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c, err := webhook.New(webhook.Config{URL: s.WebhookURL(), Secret: s.Config().Secret, Lookup: true,
		Now: func() time.Time { return s.Now().Add(-6 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(context.Background(), ticket)
	if se := helpdesktest.SendError(t, err); se.Status != 401 || se.Failure != delivery.Misconfigured {
		t.Fatalf("send: %v", se)
	}
	_, _, err = c.Lookup(context.Background(), ticket.ID)
	if se := helpdesktest.SendError(t, err); se.Status != 401 || se.Failure != delivery.Misconfigured {
		t.Fatalf("lookup: %v", se)
	}
}

func TestDecodeSecret(t *testing.T) {
	raw := []byte("0123456789abcdef0123456789abcdef")
	enc := base64.StdEncoding.EncodeToString(raw)
	for _, ok := range []string{"whsec_" + enc, enc} {
		if k, err := webhook.DecodeSecret(ok); err != nil || !bytes.Equal(k, raw) {
			t.Errorf("%q: %x %v", ok, k, err)
		}
	}
	for _, bad := range []string{"", "whsec_", "plain-shared-secret", "whsec_" + enc + "!", "whsec_" + strings.TrimRight(enc, "=")} {
		_, err := webhook.DecodeSecret(bad)
		if err == nil || (len(bad) > len(webhook.SecretPrefix) && strings.Contains(err.Error(), bad)) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestLookupAnswers: only 200 with a JSON object is found and only 404 is
// absent; every other answer is a *delivery.SendError, Misconfigured for
// 401 and 403, Unknown otherwise, with the status, Retry-After and a body
// clipped to about 200 bytes.
func TestLookupAnswers(t *testing.T) {
	long := strings.Repeat("x", 1000)
	cases := []struct {
		name       string
		fault      fakehelpdesk.Fault
		found      bool
		outcome    delivery.Failure // 0: no error
		retryAfter time.Duration
	}{
		{"200 object", fakehelpdesk.Fault{Status: 200, Body: `{"id":7,"url":"https://x/7"}`}, true, 0, 0},
		{"404", fakehelpdesk.Fault{Status: 404, Body: `{"error":"not found"}`}, false, 0, 0},
		{"200 []", fakehelpdesk.Fault{Status: 200, Body: `[]`}, false, delivery.Unknown, 0},
		{"200 null", fakehelpdesk.Fault{Status: 200, Body: `null`}, false, delivery.Unknown, 0},
		{"200 text", fakehelpdesk.Fault{Status: 200, Body: `ok ` + long}, false, delivery.Unknown, 0},
		{"204 empty", fakehelpdesk.Fault{Status: 204}, false, delivery.Unknown, 0},
		{"201 object", fakehelpdesk.Fault{Status: 201, Body: `{"id":7}`}, false, delivery.Unknown, 0},
		{"401", fakehelpdesk.Refuse(401), false, delivery.Misconfigured, 0},
		{"403", fakehelpdesk.Refuse(403), false, delivery.Misconfigured, 0},
		{"429", fakehelpdesk.TooManyRequests("7"), false, delivery.Unknown, 7 * time.Second},
		{"503", fakehelpdesk.Unavailable("5"), false, delivery.Unknown, 5 * time.Second},
		{"500", fakehelpdesk.Fault{Status: 500, Body: long}, false, delivery.Unknown, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fakehelpdesk.New(t, fakehelpdesk.Config{})
			s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookLookup, Fault: tc.fault})
			r, found, err := newClient(t, s, true, 0).Lookup(context.Background(), ticket.ID)
			if tc.outcome == 0 {
				if err != nil || found != tc.found {
					t.Fatalf("got %+v %v %v", r, found, err)
				}
				if found && r != (delivery.Receipt{ExternalID: "7", ExternalURL: "https://x/7"}) {
					t.Fatalf("receipt %+v", r)
				}
				return
			}
			if found || r != (delivery.Receipt{}) {
				t.Fatalf("got %+v %v", r, found)
			}
			se := helpdesktest.SendError(t, err)
			if se.Failure != tc.outcome || se.Status != tc.fault.Status || se.RetryAfter != tc.retryAfter {
				t.Fatalf("got %s %d %v (%v)", se.Failure, se.Status, se.RetryAfter, se)
			}
			if len(err.Error()) > 400 || !strings.Contains(err.Error(), strconv.Itoa(tc.fault.Status)) {
				t.Fatalf("error text (%d bytes): %v", len(err.Error()), err)
			}
		})
	}
}

// slackURL is a Slack-style webhook URL whose path and query are secret.
const slackPath = "/services/T000/B000/XXXXSECRET"

// TestURLSecretsNeverShown: a webhook URL with a secret in its path and
// its query (as Slack, Zapier and Teams hand out) and the signing secret
// appear in no printed or logged form of the destination, and in no error
// of Send or Lookup: timeouts, a dropped connection, 4xx, 5xx, 429, a
// refused connection and a constructor error. What stays is scheme, host
// and the first path segment.
func TestURLSecretsNeverShown(t *testing.T) {
	const query = "?token=abc-query-secret"
	secrets := []string{"T000", "B000", "XXXXSECRET", "abc-query-secret", testSecret, strings.TrimPrefix(testSecret, "whsec_")}
	s := fakehelpdesk.New(t, fakehelpdesk.Config{Secret: testSecret, WebhookPath: slackPath})
	cfg := webhook.Config{URL: s.URL() + slackPath + query, Secret: testSecret, Lookup: true, Timeout: 300 * time.Millisecond, Now: stepClock(s)}
	c, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	helpdesktest.Shown(&out, cfg, c)
	echo := fakehelpdesk.Fault{Status: 500, Body: "failed for " + s.URL() + slackPath + query} // a helpdesk quoting the URL
	helpdesktest.FailEach(&out, s, c, fakehelpdesk.WebhookCreate, fakehelpdesk.WebhookLookup, []fakehelpdesk.Fault{
		fakehelpdesk.CommitThenDrop(), fakehelpdesk.CommitThenStatus(500),
		fakehelpdesk.Refuse(422), fakehelpdesk.Refuse(401), fakehelpdesk.CommitThenSlow(time.Second),
		fakehelpdesk.TooManyRequests("1"), echo, {Status: 200, Body: "[]"}})
	refused, err := webhook.New(webhook.Config{URL: "http://" + helpdesktest.ClosedAddr(t) + slackPath + query, Secret: testSecret, Lookup: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = refused.Send(context.Background(), ticket)
	fmt.Fprintln(&out, err)
	_, _, err = refused.Lookup(context.Background(), ticket.ID)
	fmt.Fprintln(&out, err)
	_, err = webhook.New(webhook.Config{URL: "http://example.com" + slackPath + query, Secret: testSecret})
	fmt.Fprintln(&out, err)

	text := out.String()
	for _, secret := range secrets {
		if strings.Contains(text, secret) {
			t.Fatalf("%q leaked:\n%s", secret, text)
		}
	}
	var se *delivery.SendError
	if !errors.As(err, &se) && !strings.Contains(text, "/*") || !strings.Contains(text, "[redacted]") ||
		!strings.Contains(text, "answered 422") || !strings.Contains(text, "connect") || !strings.Contains(text, "timed out") {
		t.Fatalf("the output is not what the test means to check:\n%s", text)
	}
}
