package zendesk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/golden"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/helpdesktest"
)

var ticket = helpdesktest.Ticket()

// defaultAuthorization is Zendesk's API-token form, Basic with the base64
// of "{email}/token:{token}", for the fake's default agent@example.test
// and zendesk-test-token: written out, so the test pins the form
// independently of the fake that checks it.
const defaultAuthorization = "Basic YWdlbnRAZXhhbXBsZS50ZXN0L3Rva2VuOnplbmRlc2stdGVzdC10b2tlbg=="

func newClient(t *testing.T, s *fakehelpdesk.Server, timeout time.Duration) *zendesk.Client {
	t.Helper()
	cfg := s.Config()
	c, err := zendesk.New(zendesk.Config{URL: s.URL(), Email: cfg.Email, Token: cfg.Token, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSendAsSent checks the request byte for byte and the receipt.
func TestSendAsSent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ticket delivery.HelpdeskTicket
	}{
		{"create.golden.json", ticket},
		{"create_no_description.golden.json", func() delivery.HelpdeskTicket { t := ticket; t.Description = ""; return t }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakehelpdesk.New(t, fakehelpdesk.Config{})
			r, req := helpdesktest.SendOnce(t, s, newClient(t, s, 0), tc.ticket)
			golden.Check(t, tc.name, req.Body)
			if req.Method != http.MethodPost || req.Path != "/api/v2/tickets" || req.RawQuery != "" ||
				req.Header.Get("Authorization") != defaultAuthorization ||
				req.Header.Get("Idempotency-Key") != tc.ticket.ID ||
				req.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("request %s %s?%s %v", req.Method, req.Path, req.RawQuery, req.Header)
			}
			if r.ExternalID != "1001" || r.ExternalURL != s.URL()+"/agent/tickets/1001" {
				t.Fatalf("receipt %+v", r)
			}
		})
	}
}

// TestResendIsIdentical: the same ticket gives the same bytes, so the
// helpdesk replays its first answer instead of refusing the key.
func TestResendIsIdentical(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 0)
	r1, err1 := c.Send(context.Background(), ticket)
	r2, err2 := c.Send(context.Background(), ticket)
	if err1 != nil || err2 != nil || r1 != r2 {
		t.Fatalf("%+v %v / %+v %v", r1, err1, r2, err2)
	}
	got := s.Received()
	if !bytes.Equal(got[0].Body, got[1].Body) || s.Held(ticket.ID) != 1 {
		t.Fatalf("bodies differ or %d tickets held", s.Held(ticket.ID))
	}
}

func TestSendFailures(t *testing.T) {
	helpdesktest.RunSendFailures(t, fakehelpdesk.ZendeskCreate, func(t *testing.T, s *fakehelpdesk.Server) delivery.Destination {
		return newClient(t, s, 300*time.Millisecond)
	}, []helpdesktest.SendFailure{
		{Name: "commit then drop", Fault: fakehelpdesk.CommitThenDrop(), Failure: delivery.Unknown, Held: 1},
		{Name: "drop after reading", Fault: fakehelpdesk.Drop(), Failure: delivery.Unknown},
		{Name: "commit then 500", Fault: fakehelpdesk.CommitThenStatus(500), Failure: delivery.Unknown, Status: 500, Held: 1},
		{Name: "commit then slow", Fault: fakehelpdesk.CommitThenSlow(5 * time.Second), Failure: delivery.Unknown, Held: 1},
		{Name: "503 Retry-After", Fault: fakehelpdesk.Unavailable("120"), Failure: delivery.Unknown, Status: 503, RetryAfter: 120 * time.Second},
		{Name: "429 Retry-After", Fault: fakehelpdesk.TooManyRequests("30"), Failure: delivery.NotCreated, Status: 429, RetryAfter: 30 * time.Second},
		{Name: "408", Fault: fakehelpdesk.Fault{Status: 408}, Failure: delivery.NotCreated, Status: 408},
		{Name: "409", Fault: fakehelpdesk.InProgress(), Failure: delivery.Unknown, Status: 409},
		{Name: "400 IdempotentRequestError", Fault: fakehelpdesk.IdempotentRequestError(), Failure: delivery.Unknown, Status: 400},
		{Name: "400 other", Fault: fakehelpdesk.Refuse(400), Failure: delivery.Refused, Status: 400},
		{Name: "422", Fault: fakehelpdesk.Refuse(422), Failure: delivery.Refused, Status: 422},
		{Name: "201 without a ticket", Fault: fakehelpdesk.Fault{Commit: true, Status: 201, Body: `{"ok":true}`}, Failure: delivery.Unknown, Status: 201, Held: 1},
		{Name: "200 with a bad id", Fault: fakehelpdesk.Fault{Commit: true, Status: 200, Body: `{"ticket":{"id":"x1"}}`}, Failure: delivery.Unknown, Status: 200, Held: 1},
	})
}

// TestReusedKeyWithAnotherBody: Zendesk's own 400 IdempotentRequestError
// (the key is held with another body) is Unknown, not a refusal.
func TestReusedKeyWithAnotherBody(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 0)
	other := ticket
	other.Title = "edited"
	if se := helpdesktest.SendAfter(t, c, ticket, other); se.Failure != delivery.Unknown || se.Status != 400 ||
		!strings.Contains(se.Error(), "IdempotentRequestError") {
		t.Fatalf("got %v", se)
	}
}

// TestUnauthorizedIsMisconfigured: a token Zendesk refuses is about the
// destination, not the ticket: Misconfigured on a send and on a lookup
// alike, never Refused (which would fail the ticket for good).
func TestUnauthorizedIsMisconfigured(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c, err := zendesk.New(zendesk.Config{URL: s.URL(), Email: s.Config().Email, Token: "wrong-token-42"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(context.Background(), ticket)
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Misconfigured || se.Status != 401 || strings.Contains(se.Error(), "wrong-token-42") {
		t.Fatalf("send: %v", se)
	}
	_, found, err := c.Lookup(context.Background(), ticket.ID)
	if se := helpdesktest.SendError(t, err); found || se.Failure != delivery.Misconfigured || se.Status != 401 {
		t.Fatalf("lookup: %v %v", found, se)
	}
}

// TestRevokedToken: the right token, revoked at the helpdesk, then
// restored: Misconfigured while revoked, and nothing created.
func TestRevokedToken(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 0)
	s.SetRevoked(true)
	_, err := c.Send(context.Background(), ticket)
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Misconfigured || se.Status != 401 {
		t.Fatalf("send: %v", se)
	}
	_, _, err = c.Lookup(context.Background(), ticket.ID)
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Misconfigured {
		t.Fatalf("lookup: %v", se)
	}
	s.SetRevoked(false)
	if _, err := c.Send(context.Background(), ticket); err != nil || s.Held(ticket.ID) != 1 {
		t.Fatalf("restored: %v, held %d", err, s.Held(ticket.ID))
	}
}

// TestSendStatuses: 403 and a 404 on the create URL are Misconfigured;
// 400 and 422 refuse the ticket; 429 creates nothing.
func TestSendStatuses(t *testing.T) {
	for status, want := range map[int]delivery.Failure{
		403: delivery.Misconfigured, 404: delivery.Misconfigured,
		400: delivery.Refused, 422: delivery.Refused, 429: delivery.NotCreated, 500: delivery.Unknown,
	} {
		s := fakehelpdesk.New(t, fakehelpdesk.Config{})
		s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, Fault: fakehelpdesk.Fault{Status: status, Body: `{"error":"x"}`}})
		_, err := newClient(t, s, 0).Send(context.Background(), ticket)
		if se := helpdesktest.SendError(t, err); se.Failure != want || se.Status != status {
			t.Errorf("%d: %v; want %s", status, se, want)
		}
	}
}

func TestUnreachableIsNotCreated(t *testing.T) {
	c, err := zendesk.New(zendesk.Config{URL: "http://" + helpdesktest.ClosedAddr(t), Email: "a@b.c", Token: "tok-secret-1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(context.Background(), ticket)
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.NotCreated || strings.Contains(se.Error(), "tok-secret-1") {
		t.Fatalf("got %v", se)
	}
	if _, _, err := c.Lookup(context.Background(), ticket.ID); err == nil {
		t.Fatal("lookup on an unreachable helpdesk succeeded")
	}
}

// TestNoAutoResend: the helpdesk commits the second ticket and closes the
// connection (which it had kept alive after the first) without answering.
// The adapter reports Unknown and the helpdesk saw each request once; the
// lookup then finds the ticket, so the engine need not resend.
func TestNoAutoResend(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	helpdesktest.NoAutoResend(t, s, newClient(t, s, 0), fakehelpdesk.ZendeskCreate, "second-ticket", "1002")
	if s.Held("second-ticket") != 1 || s.Total() != 2 {
		t.Fatalf("held %d, total %d", s.Held("second-ticket"), s.Total())
	}
}

func TestLookup(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	helpdesktest.LookupFindsSent(t, newClient(t, s, 0))
	got := s.Received()[2]
	if got.Method != http.MethodGet || got.Path != "/api/v2/tickets" || got.RawQuery != "external_id="+ticket.ID ||
		got.Header.Get("Authorization") == "" || len(got.Body) != 0 {
		t.Fatalf("lookup request %+v", got)
	}
}

// TestLookupTakesTheOldest: several tickets under one external id (a key
// that expired, a ticket made by hand): the oldest by created_at wins, and
// on equal dates the lower id.
func TestLookupTakesTheOldest(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, 0)
	ctx := context.Background()
	start := s.Now()
	if _, err := c.Send(ctx, ticket); err != nil { // id 1001 at start
		t.Fatal(err)
	}
	s.Advance(3 * time.Hour) // the key has expired: a resend makes a second ticket
	if r, err := c.Send(ctx, ticket); err != nil || r.ExternalID != "1002" {
		t.Fatalf("resend %+v %v", r, err)
	}
	r, found, err := c.Lookup(ctx, ticket.ID)
	if err != nil || !found || r.ExternalID != "1001" {
		t.Fatalf("got %+v %v %v; want 1001", r, found, err)
	}
	older := s.AddZendeskTicket(ticket.ID, start.Add(-time.Minute)) // higher id, older date
	r, _, _ = c.Lookup(ctx, ticket.ID)
	if r.ExternalID != fmt.Sprint(older) {
		t.Fatalf("got %s; want the oldest by date, %d", r.ExternalID, older)
	}
	s.AddZendeskTicket("tie", start)
	s.AddZendeskTicket("tie", start)
	r, _, _ = c.Lookup(ctx, "tie")
	if r.ExternalID != fmt.Sprint(older+1) {
		t.Fatalf("tie: got %s; want the lower id %d", r.ExternalID, older+1)
	}
}

func TestLookupLag(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	s.SetLookupLag(1, 0)
	c := newClient(t, s, 0)
	if _, err := c.Send(context.Background(), ticket); err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.Lookup(context.Background(), ticket.ID); err != nil || found {
		t.Fatalf("first lookup: %v %v; want absent (the index lags)", found, err)
	}
	if _, found, err := c.Lookup(context.Background(), ticket.ID); err != nil || !found {
		t.Fatalf("second lookup: %v %v", found, err)
	}
}

func TestLookupFailures(t *testing.T) {
	cases := []struct {
		name  string
		fault fakehelpdesk.Fault
		check func(*testing.T, error)
	}{
		{"503", fakehelpdesk.Unavailable("9"), func(t *testing.T, err error) {
			if se := helpdesktest.SendError(t, err); se.Status != 503 || se.RetryAfter != 9*time.Second {
				t.Fatalf("got %v", se)
			}
		}},
		{"429", fakehelpdesk.TooManyRequests("7"), func(t *testing.T, err error) {
			if se := helpdesktest.SendError(t, err); se.Failure != delivery.Unknown || se.Status != 429 || se.RetryAfter != 7*time.Second {
				t.Fatalf("got %v", se)
			}
		}},
		{"500", fakehelpdesk.Fault{Status: 500, Body: `{"error":"InternalError"}`}, func(t *testing.T, err error) {
			if se := helpdesktest.SendError(t, err); se.Failure != delivery.Unknown || se.Status != 500 {
				t.Fatalf("got %v", se)
			}
		}},
		{"403", fakehelpdesk.Refuse(403), func(t *testing.T, err error) {
			if se := helpdesktest.SendError(t, err); se.Failure != delivery.Misconfigured || se.Status != 403 {
				t.Fatalf("got %v", se)
			}
		}},
		{"404", fakehelpdesk.Refuse(404), nil},
		{"drop", fakehelpdesk.Drop(), nil},
		{"not json", fakehelpdesk.Fault{Status: 200, Body: `<html>`}, nil},
		{"no list", fakehelpdesk.Fault{Status: 200, Body: `{"ticket":{"id":1}}`}, nil},
		{"bad id", fakehelpdesk.Fault{Status: 200, Body: `{"tickets":[{"id":-4,"created_at":"2026-01-01T00:00:00Z"}]}`}, nil},
		{"bad date", fakehelpdesk.Fault{Status: 200, Body: `{"tickets":[{"id":4,"created_at":"yesterday"}]}`}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fakehelpdesk.New(t, fakehelpdesk.Config{})
			s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskLookup, Fault: tc.fault})
			r, found, err := newClient(t, s, 0).Lookup(context.Background(), ticket.ID)
			if err == nil || found || r != (delivery.Receipt{}) || errors.Is(err, delivery.ErrNoLookup) {
				t.Fatalf("got %+v %v %v; want a failed lookup", r, found, err)
			}
			// Every failed lookup is a SendError, whether the helpdesk
			// answered or not: the engine reads its Outcome and RetryAfter.
			helpdesktest.SendError(t, err)
			if tc.check != nil {
				tc.check(t, err)
			}
		})
	}
}

// TestAnswer200: Zendesk may answer 200 rather than 201.
func TestAnswer200(t *testing.T) {
	srv := helpdesktest.Answering(t, http.StatusOK, `{"ticket":{"id":35436,"url":"https://x/api/v2/tickets/35436.json"}}`)
	c, err := zendesk.New(zendesk.Config{URL: srv.URL + "/", Email: "a@b.c", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Send(context.Background(), ticket)
	if err != nil || r.ExternalID != "35436" || r.ExternalURL != srv.URL+"/agent/tickets/35436" {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	const token = "very-secret-token-99"
	cases := map[string]zendesk.Config{
		"must be https":         {URL: "http://acme.zendesk.com", Email: "a@b.c", Token: token},
		"user info":             {URL: "https://a:" + token + "@acme.zendesk.com", Email: "a@b.c", Token: token},
		"must not have a query": {URL: "https://acme.zendesk.com?x=1", Email: "a@b.c", Token: token},
		"email is required":     {URL: "https://acme.zendesk.com", Token: token},
		"token is required":     {URL: "https://acme.zendesk.com", Email: "a@b.c"},
		"negative":              {URL: "https://acme.zendesk.com", Email: "a@b.c", Token: token, Timeout: -time.Second},
	}
	for want, cfg := range cases {
		_, err := zendesk.New(cfg)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), token) {
			t.Errorf("%q: got %v", want, err)
		}
	}
	if _, err := zendesk.New(zendesk.Config{URL: "https://acme.zendesk.com", Email: "a@b.c", Token: token}); err != nil {
		t.Fatal(err)
	}
	_, err := newClientNoID(t).Send(context.Background(), delivery.HelpdeskTicket{Title: "x"})
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Refused {
		t.Fatalf("ticket without id: %v", se)
	}
}

func newClientNoID(t *testing.T) *zendesk.Client {
	c, err := zendesk.New(zendesk.Config{URL: "http://127.0.0.1:1", Email: "a@b.c", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCredentialsNeverShown: the token and the Basic credential appear in
// no printed or logged form of the configuration or client, and in no error
// of any failure.
func TestCredentialsNeverShown(t *testing.T) {
	const token = "tok-4f8a9c2e71"
	s := fakehelpdesk.New(t, fakehelpdesk.Config{Token: token})
	cfg := zendesk.Config{URL: s.URL(), Email: s.Config().Email, Token: token, Timeout: 300 * time.Millisecond}
	c, err := zendesk.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	basic := strings.TrimPrefix(s.ZendeskAuthorization(), "Basic ")
	var out bytes.Buffer
	helpdesktest.Shown(&out, cfg, c)
	helpdesktest.FailEach(&out, s, c, fakehelpdesk.ZendeskCreate, fakehelpdesk.ZendeskLookup, []fakehelpdesk.Fault{
		fakehelpdesk.CommitThenDrop(), fakehelpdesk.CommitThenStatus(500),
		fakehelpdesk.Refuse(422), fakehelpdesk.CommitThenSlow(time.Second), fakehelpdesk.TooManyRequests("1")})
	text := out.String()
	if strings.Contains(text, token) || strings.Contains(text, basic) {
		t.Fatalf("a credential leaked:\n%s", text)
	}
	if !strings.Contains(text, "[redacted]") || !strings.Contains(text, "answered 422") {
		t.Fatalf("the output is not what the test means to check:\n%s", text)
	}
}
