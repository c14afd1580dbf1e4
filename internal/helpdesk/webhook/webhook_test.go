package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/golden"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/helpdesktest"
)

var ticket = helpdesktest.Ticket()

// testSecret is a valid Standard Webhooks secret other than the fake's.
const testSecret = "whsec_dGVzdC1vbmx5LXNpZ25pbmcta2V5LW5vdC1hLXJlYWwtb25l" //nolint:gosec // a test fixture

// stepClock is the fake's clock, a second further on every reading, as a
// real client's successive requests are: no two requests are signed with
// the same timestamp, so none is taken for a replay.
func stepClock(s *fakehelpdesk.Server) func() time.Time {
	var n atomic.Int64
	return func() time.Time { return s.Now().Add(time.Duration(n.Add(1)) * time.Second) }
}

func newClient(t *testing.T, s *fakehelpdesk.Server, lookup bool, timeout time.Duration) *webhook.Client {
	t.Helper()
	c, err := webhook.New(webhook.Config{URL: s.WebhookURL(), Secret: s.Config().Secret, Lookup: lookup, Timeout: timeout, Now: stepClock(s)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSendAsSent(t *testing.T) {
	noDesc := ticket
	noDesc.Description = ""
	for _, tc := range []struct {
		name   string
		ticket delivery.HelpdeskTicket
	}{
		{"create.golden.json", ticket},
		{"create_no_description.golden.json", noDesc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakehelpdesk.New(t, fakehelpdesk.Config{})
			r, req := helpdesktest.SendOnce(t, s, newClient(t, s, false, 0), tc.ticket)
			golden.Check(t, tc.name, req.Body)
			if req.Method != http.MethodPost || req.Path != fakehelpdesk.DefaultWebhookPath ||
				req.Header.Get("Idempotency-Key") != tc.ticket.ID ||
				req.Header.Get("Content-Type") != "application/json" ||
				req.Header.Get("webhook-id") != tc.ticket.ID || req.Header.Get("webhook-timestamp") == "" ||
				verify(t, req.Header, req.Body) != nil {
				t.Fatalf("request %s %s %v", req.Method, req.Path, req.Header)
			}
			if r.ExternalID != "WH-1" || r.ExternalURL != s.URL()+"/tickets/WH-1" {
				t.Fatalf("receipt %+v", r)
			}
		})
	}
}

// TestBodyIsDeterministic: the body depends on the ticket alone: the
// created_at's zone and sub-second digits (which stores keep differently)
// change no byte, and two sends carry the same bytes and signature.
func TestBodyIsDeterministic(t *testing.T) {
	want, err := webhook.Body(ticket)
	if err != nil {
		t.Fatal(err)
	}
	shifted := ticket
	shifted.CreatedAt = ticket.CreatedAt.Add(987654321 * time.Nanosecond).In(time.FixedZone("X", 5*3600))
	if got, _ := webhook.Body(shifted); !bytes.Equal(got, want) {
		t.Fatalf("got %s; want %s", got, want)
	}
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, false, 0)
	for range 2 {
		if _, err := c.Send(context.Background(), shifted); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Received()
	if !bytes.Equal(got[0].Body, want) || !bytes.Equal(got[1].Body, want) || s.Held(ticket.ID) != 1 {
		t.Fatalf("resend differs or %d held", s.Held(ticket.ID))
	}
}

func TestReplies(t *testing.T) {
	cases := []struct {
		reply   fakehelpdesk.Reply
		id, url string // URL is replaced by the server's
	}{
		{fakehelpdesk.ReplyStringID, "WH-1", "URL/tickets/WH-1"},
		{fakehelpdesk.ReplyNumberID, "1", "URL/tickets/1"},
		{fakehelpdesk.ReplyNoURL, "WH-1", ""},
		{fakehelpdesk.ReplyNoID, ticket.ID, ""},
		{fakehelpdesk.ReplyEmpty, ticket.ID, ""},
		{fakehelpdesk.ReplyText, ticket.ID, ""},
	}
	for _, tc := range cases {
		s := fakehelpdesk.New(t, fakehelpdesk.Config{})
		s.SetWebhookReply(tc.reply)
		c := newClient(t, s, true, 0)
		want := delivery.Receipt{ExternalID: tc.id, ExternalURL: strings.ReplaceAll(tc.url, "URL", s.URL())}
		r, err := c.Send(context.Background(), ticket)
		if err != nil || r != want {
			t.Errorf("reply %d: send %+v %v; want %+v", tc.reply, r, err, want)
		}
		r, found, err := c.Lookup(context.Background(), ticket.ID)
		if tc.reply == fakehelpdesk.ReplyEmpty || tc.reply == fakehelpdesk.ReplyText {
			// A send may be answered so, a lookup may not: neither found
			// nor absent.
			if se := helpdesktest.SendError(t, err); found || se.Failure != delivery.Unknown {
				t.Errorf("reply %d: lookup %v %v; want an unknown answer", tc.reply, found, err)
			}
			continue
		}
		if err != nil || !found || r != want {
			t.Errorf("reply %d: lookup %+v %v %v; want %+v", tc.reply, r, found, err, want)
		}
	}
	// Odd but valid answers.
	for body, want := range map[string]delivery.Receipt{
		`{"id":12345678901234567890}`:   {ExternalID: "12345678901234567890"},
		`{"id":"","url":"https://x/1"}`: {ExternalID: ticket.ID, ExternalURL: "https://x/1"},
		`{"id":null,"url":7}`:           {ExternalID: ticket.ID},
		`{"id":true}`:                   {ExternalID: ticket.ID},
		`[{"id":"x"}]`:                  {ExternalID: ticket.ID},
		`"x"`:                           {ExternalID: ticket.ID},
		`{"id":"a"} trailing`:           {ExternalID: ticket.ID},
	} {
		s := fakehelpdesk.New(t, fakehelpdesk.Config{})
		s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Fault: fakehelpdesk.Fault{Status: 202, Body: body}})
		r, err := newClient(t, s, false, 0).Send(context.Background(), ticket)
		if err != nil || r != want {
			t.Errorf("answer %s: %+v %v; want %+v", body, r, err, want)
		}
	}
}

func TestSendFailures(t *testing.T) {
	helpdesktest.RunSendFailures(t, fakehelpdesk.WebhookCreate, func(t *testing.T, s *fakehelpdesk.Server) delivery.Destination {
		return newClient(t, s, true, 300*time.Millisecond)
	}, []helpdesktest.SendFailure{
		{Name: "commit then drop", Fault: fakehelpdesk.CommitThenDrop(), Failure: delivery.Unknown, Held: 1},
		{Name: "drop after reading", Fault: fakehelpdesk.Drop(), Failure: delivery.Unknown},
		{Name: "commit then 502", Fault: fakehelpdesk.CommitThenStatus(502), Failure: delivery.Unknown, Status: 502, Held: 1},
		{Name: "commit then slow", Fault: fakehelpdesk.CommitThenSlow(5 * time.Second), Failure: delivery.Unknown, Held: 1},
		{Name: "503 Retry-After date", Fault: fakehelpdesk.Unavailable(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)), Failure: delivery.Unknown, Status: 503, RetryAfter: -1},
		{Name: "429 Retry-After", Fault: fakehelpdesk.TooManyRequests("30"), Failure: delivery.NotCreated, Status: 429, RetryAfter: 30 * time.Second},
		{Name: "409 in progress", Fault: fakehelpdesk.InProgress(), Failure: delivery.Unknown, Status: 409},
		{Name: "400", Fault: fakehelpdesk.Refuse(400), Failure: delivery.Refused, Status: 400},
		{Name: "422", Fault: fakehelpdesk.Refuse(422), Failure: delivery.Refused, Status: 422},
		{Name: "410", Fault: fakehelpdesk.Refuse(410), Failure: delivery.Refused, Status: 410},
		{Name: "401", Fault: fakehelpdesk.Refuse(401), Failure: delivery.Misconfigured, Status: 401},
		{Name: "403", Fault: fakehelpdesk.Refuse(403), Failure: delivery.Misconfigured, Status: 403},
		{Name: "404 on the create URL", Fault: fakehelpdesk.Refuse(404), Failure: delivery.Misconfigured, Status: 404},
	})
}

// TestHelpdeskRefusals: the endpoint's own answers, unscripted: another
// body under a held key is 422, a refusal; a wrong secret 401, a
// misconfiguration; a create racing one in progress is 409, Unknown.
func TestHelpdeskRefusals(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, false, 0)
	edited := ticket
	edited.Title = "edited"
	if se := helpdesktest.SendAfter(t, c, ticket, edited); se.Failure != delivery.Refused || se.Status != 422 {
		t.Fatalf("another body: %v", se)
	}
	bad, err := webhook.New(webhook.Config{URL: s.WebhookURL(), Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Send(context.Background(), ticket)
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Misconfigured || se.Status != 401 {
		t.Fatalf("bad secret: %v", se)
	}

	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Fault: fakehelpdesk.CommitThenSlow(time.Second)})
	other := ticket
	other.ID = "other"
	done := make(chan error)
	go func() { _, err := c.Send(context.Background(), other); done <- err }()
	for s.InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	_, err = c.Send(context.Background(), other)
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Unknown || se.Status != 409 {
		t.Fatalf("in progress: %v", se)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.Held("other") != 1 {
		t.Fatalf("held %d", s.Held("other"))
	}
}

func TestUnreachableIsNotCreated(t *testing.T) {
	c, err := webhook.New(webhook.Config{URL: "http://" + helpdesktest.ClosedAddr(t) + "/hook", Secret: testSecret, Lookup: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(context.Background(), ticket)
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.NotCreated {
		t.Fatalf("got %v", se)
	}
	if _, _, err := c.Lookup(context.Background(), ticket.ID); err == nil || errors.Is(err, delivery.ErrNoLookup) {
		t.Fatalf("lookup: %v", err)
	}
}

// TestNoAutoResend: the endpoint commits the second ticket and closes the
// connection it had kept alive without answering; the adapter reports
// Unknown and nothing was sent twice.
func TestNoAutoResend(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	helpdesktest.NoAutoResend(t, s, newClient(t, s, true, 0), fakehelpdesk.WebhookCreate, "second", "WH-2")
}

func TestLookup(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c, err := webhook.New(webhook.Config{URL: s.WebhookURL() + "?team=a%20b&x=1", Secret: s.Config().Secret, Lookup: true, Now: stepClock(s)})
	if err != nil {
		t.Fatal(err)
	}
	helpdesktest.LookupFindsSent(t, c)
	got := s.Received()
	post, look := got[1], got[2]
	if post.RawQuery != "team=a%20b&x=1" {
		t.Fatalf("the POST went to ?%s", post.RawQuery)
	}
	param := "idempotency_key=" + ticket.ID
	if look.Method != http.MethodGet || look.Path != fakehelpdesk.DefaultWebhookPath ||
		look.RawQuery != "team=a%20b&x=1&"+param || len(look.Body) != 0 ||
		look.Header.Get("webhook-id") != ticket.ID || verify(t, look.Header, []byte(param)) != nil {
		t.Fatalf("lookup request %s %s?%s %v", look.Method, look.Path, look.RawQuery, look.Header)
	}
}

func TestLookupNotConfigured(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	_, found, err := newClient(t, s, false, 0).Lookup(context.Background(), ticket.ID)
	if !errors.Is(err, delivery.ErrNoLookup) || found || len(s.Received()) != 0 {
		t.Fatalf("%v %v, %d requests", found, err, len(s.Received()))
	}
}

func TestLookupLag(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	s.SetLookupLag(0, 30*time.Second)
	c := newClient(t, s, true, 0)
	if _, err := c.Send(context.Background(), ticket); err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.Lookup(context.Background(), ticket.ID); err != nil || found {
		t.Fatalf("lagging lookup: %v %v", found, err)
	}
	s.Advance(30 * time.Second)
	if _, found, err := c.Lookup(context.Background(), ticket.ID); err != nil || !found {
		t.Fatalf("later lookup: %v %v", found, err)
	}
}

func TestLookupFailures(t *testing.T) {
	for name, f := range map[string]fakehelpdesk.Fault{
		"500":  fakehelpdesk.CommitThenStatus(500),
		"503":  fakehelpdesk.Unavailable("5"),
		"401":  fakehelpdesk.Refuse(401),
		"410":  fakehelpdesk.Refuse(410),
		"drop": fakehelpdesk.Drop(),
		"slow": {Delay: 5 * time.Second},
	} {
		s := fakehelpdesk.New(t, fakehelpdesk.Config{})
		s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookLookup, Fault: f})
		r, found, err := newClient(t, s, true, 300*time.Millisecond).Lookup(context.Background(), ticket.ID)
		if err == nil || found || r != (delivery.Receipt{}) || errors.Is(err, delivery.ErrNoLookup) {
			t.Errorf("%s: %+v %v %v; want a failed lookup", name, r, found, err)
		}
		helpdesktest.SendError(t, err) // the engine reads Outcome and RetryAfter from it
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	cases := map[string]webhook.Config{
		"must be https":          {URL: "http://hooks.example/x", Secret: testSecret},
		"user info":              {URL: "https://u:p@hooks.example/x", Secret: testSecret},
		"secret: required":       {URL: "https://hooks.example/x"},
		"secret: not whsec_":     {URL: "https://hooks.example/x", Secret: "plain-shared-secret"},
		"secret: whsec_ is":      {URL: "https://hooks.example/x", Secret: "whsec_"},
		"negative":               {URL: "https://hooks.example/x", Secret: testSecret, Timeout: -1},
		"no host":                {URL: "/x", Secret: testSecret},
		"must not carry idempot": {URL: "https://hooks.example/x?idempotency_key=1", Secret: testSecret},
	}
	for want, cfg := range cases {
		if _, err := webhook.New(cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v", want, err)
		}
	}
	c, err := webhook.New(webhook.Config{URL: "https://hooks.example/x?team=1", Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(context.Background(), delivery.HelpdeskTicket{Title: "no id"})
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Refused {
		t.Fatalf("ticket without id: %v", se)
	}
}
