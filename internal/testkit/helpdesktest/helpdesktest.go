// Package helpdesktest holds the fixture and the checks the tests of the
// helpdesk client packages (httpsend, zendesk, webhook, linear) share.
package helpdesktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// Ticket is the ticket the adapters' tests send: a title and a
// description that JSON must escape, a whole-second created_at (the
// webhook's test shifts it by sub-second digits that must change no byte).
func Ticket() delivery.HelpdeskTicket {
	return delivery.HelpdeskTicket{
		ID:           "6f1c2a0e-8d3b-4c5e-9a7f-1b2c3d4e5f60",
		OperationKey: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		TenantID:     "tenant-1",
		UserID:       "user-1",
		Title:        `Printer <on fire> & "smoking"`,
		Description:  "Third floor, since 9:00.\nPlease hurry — é",
		Priority:     "urgent",
		CreatedAt:    time.Date(2026, 11, 30, 9, 15, 0, 0, time.UTC),
	}
}

// SendError is err as a *delivery.SendError; the test stops when it is
// not one.
func SendError(tb testing.TB, err error) *delivery.SendError {
	tb.Helper()
	var se *delivery.SendError
	if !errors.As(err, &se) {
		tb.Fatalf("error %v (%T) is not a *delivery.SendError", err, err)
	}
	return se
}

// SendOnce sends t through d, which must succeed, and returns the receipt
// and the request: the test stops unless the helpdesk s received exactly
// that one request.
func SendOnce(tb testing.TB, s *fakehelpdesk.Server, d delivery.Destination, t delivery.HelpdeskTicket) (delivery.Receipt, fakehelpdesk.Received) {
	tb.Helper()
	r, err := d.Send(context.Background(), t)
	if err != nil {
		tb.Fatal(err)
	}
	got := s.Received()
	if len(got) != 1 {
		tb.Fatalf("the helpdesk received %d requests, want 1", len(got))
	}
	return r, got[0]
}

// Answering starts a server that reads each request whole and answers it
// status and body, whatever it asks: a helpdesk reduced to one answer. It
// is closed when tb ends.
func Answering(tb testing.TB, status int, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// SendAfter sends first through d, which must succeed, then second, and
// returns the second send's error as a *delivery.SendError; the test stops
// when the first send fails or the second does not fail so.
func SendAfter(tb testing.TB, d delivery.Destination, first, second delivery.HelpdeskTicket) *delivery.SendError {
	tb.Helper()
	if _, err := d.Send(context.Background(), first); err != nil {
		tb.Fatal(err)
	}
	_, err := d.Send(context.Background(), second)
	return SendError(tb, err)
}

// ClosedAddr is a loopback host:port nothing listens on: a call to it
// fails to dial, so nothing is sent.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// SendFailure is one scripted answer to a create and what the adapter
// must make of it.
type SendFailure struct {
	Name    string
	Fault   fakehelpdesk.Fault
	Failure delivery.Failure
	Status  int
	// RetryAfter is the wait the error must carry; negative: an HTTP-date
	// an hour ahead, so between 59 minutes and an hour.
	RetryAfter time.Duration
	Held       int // tickets the helpdesk holds afterwards
}

// RunSendFailures sends Ticket once per case through the destination
// newDest builds on a fresh fake helpdesk that answers the create of kind
// with the case's fault, and checks the error's outcome, status and wait,
// the tickets held and that exactly one create was made.
func RunSendFailures(t *testing.T, kind fakehelpdesk.Kind, newDest func(*testing.T, *fakehelpdesk.Server) delivery.Destination, cases []SendFailure) {
	t.Helper()
	ticket := Ticket()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			s := fakehelpdesk.New(t, fakehelpdesk.Config{})
			s.Script(fakehelpdesk.Rule{Kind: kind, Fault: tc.Fault})
			_, err := newDest(t, s).Send(context.Background(), ticket)
			se := SendError(t, err)
			retryOK := se.RetryAfter == tc.RetryAfter
			if tc.RetryAfter < 0 {
				retryOK = se.RetryAfter > 59*time.Minute && se.RetryAfter <= time.Hour
			}
			if se.Failure != tc.Failure || se.Status != tc.Status || !retryOK {
				t.Fatalf("got %s status %d retry %v (%v); want %s %d %v",
					se.Failure, se.Status, se.RetryAfter, se, tc.Failure, tc.Status, tc.RetryAfter)
			}
			if s.Held(ticket.ID) != tc.Held || s.Requests(kind) != 1 {
				t.Fatalf("held %d after %d requests; want %d after 1", s.Held(ticket.ID), s.Requests(kind), tc.Held)
			}
		})
	}
}

// NoAutoResend checks that the adapter never resends on its own: the
// helpdesk s commits the second create of kind create and closes the
// connection it had kept alive after the first without answering. Sending
// Ticket and then a copy under secondID through d must report Unknown
// after exactly two creates, and d's lookup must then find the copy as
// wantID, so the engine need not resend.
func NoAutoResend(t *testing.T, s *fakehelpdesk.Server, d delivery.Destination, create fakehelpdesk.Kind, secondID, wantID string) {
	t.Helper()
	s.Script(fakehelpdesk.Rule{Kind: create, N: 2, Fault: fakehelpdesk.CommitThenDrop()})
	second := Ticket()
	second.ID = secondID
	if se := SendAfter(t, d, Ticket(), second); se.Failure != delivery.Unknown {
		t.Fatalf("got %v", se)
	}
	if n := s.Requests(create); n != 2 {
		t.Fatalf("the helpdesk received %d creates; want 2", n)
	}
	r, found, err := d.Lookup(context.Background(), secondID)
	if err != nil || !found || r.ExternalID != wantID {
		t.Fatalf("lookup: %+v %v %v; want %s", r, found, err, wantID)
	}
}

// LookupFindsSent checks d's lookup of Ticket: absent (no receipt, no
// error) before Ticket is sent, then the very receipt the send returned.
// The helpdesk sees a lookup, a create and a lookup, in that order.
func LookupFindsSent(t *testing.T, d delivery.Destination) {
	t.Helper()
	ctx := context.Background()
	id := Ticket().ID
	if r, found, err := d.Lookup(ctx, id); err != nil || found || r != (delivery.Receipt{}) {
		t.Fatalf("before: %+v %v %v", r, found, err)
	}
	sent, err := d.Send(ctx, Ticket())
	if err != nil {
		t.Fatal(err)
	}
	r, found, err := d.Lookup(ctx, id)
	if err != nil || !found || r != sent {
		t.Fatalf("after: %+v %v %v; want %+v", r, found, err, sent)
	}
}

// Shown writes to out every printed and logged form of a destination's
// configuration and client, for a test to look for credentials in: fmt's
// %v, %+v, %#v and %s of the configuration and %v, %+v and %s of the
// client, then a line of both through slog's JSON and text handlers, the
// configuration also by pointer.
func Shown[C any](out io.Writer, cfg C, client any) {
	fmt.Fprintf(out, "%v %+v %#v %s %v %+v %s\n", []any{cfg, cfg, cfg, cfg, client, client, client}...)
	for _, h := range []slog.Handler{slog.NewJSONHandler(out, nil), slog.NewTextHandler(out, nil)} {
		log := slog.New(h)
		log.Info("destination", "config", cfg, "client", client)
		log.Info("destination", slog.Any("config", &cfg))
	}
}

// FailEach scripts each fault in turn on the helpdesk s, for the create of
// kind create and the lookup of kind lookup, sends Ticket through d and
// looks it up, and writes each error to out, as fmt prints it and as
// slog's text handler logs it, for a test to look for credentials in.
func FailEach(out io.Writer, s *fakehelpdesk.Server, d delivery.Destination, create, lookup fakehelpdesk.Kind, faults []fakehelpdesk.Fault) {
	log := slog.New(slog.NewTextHandler(out, nil))
	for _, f := range faults {
		s.Script(fakehelpdesk.Rule{Kind: create, Fault: f})
		s.Script(fakehelpdesk.Rule{Kind: lookup, Fault: f})
		_, err := d.Send(context.Background(), Ticket())
		fmt.Fprintln(out, err)
		log.Info("send failed", "err", err)
		_, _, err = d.Lookup(context.Background(), Ticket().ID)
		fmt.Fprintln(out, err)
	}
}
