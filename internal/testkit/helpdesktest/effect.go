package helpdesktest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// The delivery keys of the follow-ups the adapters' tests send.
const (
	CommentID = "0b7c5e1a-4d2f-4a8b-9c3e-2f1a0b9c8d71"
	CloseID   = "5d2e8f40-1c3b-4e6a-8f7d-9a0b1c2d3e42"
)

// Comment is the effect add_comment makes for ticket (its delivery key)
// held by the helpdesk as externalID, with the payload the design gives
// it: a body JSON must escape.
func Comment(ticket, externalID, commentID, body string) delivery.Effect {
	p, _ := json.Marshal(map[string]string{"type": "comment.created", "comment_id": commentID,
		"ticket_id": ticket, "tenant_id": "tenant-1", "user_id": "user-1", "body": body,
		"created_at": "2026-11-30T09:20:00.123456789Z"})
	return delivery.Effect{Kind: "comment", ID: commentID, TicketID: ticket, TicketExternalID: externalID, Payload: p}
}

// Close is the effect close_ticket makes, resolution "" for none.
func Close(ticket, externalID, closeID, resolution string) delivery.Effect {
	p, _ := json.Marshal(map[string]string{"type": "ticket.closed", "close_id": closeID,
		"ticket_id": ticket, "tenant_id": "tenant-1", "user_id": "user-1", "resolution": resolution,
		"closed_at": "2026-11-30T10:00:00Z"})
	return delivery.Effect{Kind: "close", ID: closeID, TicketID: ticket, TicketExternalID: externalID, Payload: p}
}

// Note is an effect of a kind no helpdesk adapter knows by name.
func Note(ticket, externalID string) delivery.Effect {
	return delivery.Effect{Kind: "note", ID: "3c9d2b1a-0f4e-4d5c-8b6a-7e8f9a0b1c23", TicketID: ticket, TicketExternalID: externalID,
		Payload: []byte(`{"type":"note.added","note_id":"3c9d2b1a-0f4e-4d5c-8b6a-7e8f9a0b1c23","ticket_id":"` + ticket + `"}`)}
}

// SendEffectOnce sends e through d, which must succeed, and returns the
// receipt.
func SendEffectOnce(tb testing.TB, d delivery.EffectSender, e delivery.Effect) delivery.Receipt {
	tb.Helper()
	r, err := d.SendEffect(context.Background(), e)
	if err != nil {
		tb.Fatalf("%s %s: %v", e.Kind, e.ID, err)
	}
	return r
}

// CommitThenDrop checks an effect whose send the helpdesk s commits and
// then answers by closing the connection: the send of e through d over
// the request kind send reports Unknown after exactly one such request,
// d's lookup then finds e, with the receipt want when it is not zero, and
// the helpdesk holds e once.
func CommitThenDrop(t *testing.T, s *fakehelpdesk.Server, d delivery.EffectSender, e delivery.Effect, send fakehelpdesk.Kind, want delivery.Receipt) {
	t.Helper()
	before := s.Requests(send)
	s.Script(fakehelpdesk.Rule{Kind: send, Key: e.ID, Fault: fakehelpdesk.CommitThenDrop()})
	_, err := d.SendEffect(context.Background(), e)
	if se := SendError(t, err); se.Failure != delivery.Unknown {
		t.Fatalf("send: %v; want unknown", se)
	}
	if n := s.Requests(send) - before; n != 1 {
		t.Fatalf("the helpdesk received %d %s requests; want 1 (no resend of its own)", n, send)
	}
	r, found, err := d.LookupEffect(context.Background(), e)
	if err != nil || !found || (want != delivery.Receipt{} && r != want) || r.ExternalID == "" {
		t.Fatalf("lookup: %+v %v %v; want found %+v", r, found, err, want)
	}
	if n := s.Held(e.ID); n != 1 {
		t.Fatalf("the helpdesk holds %s %d times; want once", e.ID, n)
	}
}

// Refuses checks that d refuses e for good (Refused), with a text holding
// want, before anything reaches the helpdesk s.
func Refuses(t *testing.T, s *fakehelpdesk.Server, d delivery.EffectSender, e delivery.Effect, want string) {
	t.Helper()
	before := len(s.Received())
	_, err := d.SendEffect(context.Background(), e)
	if se := SendError(t, err); se.Failure != delivery.Refused || !strings.Contains(se.Error(), want) {
		t.Fatalf("%s effect: %v; want refused, saying %q", e.Kind, err, want)
	}
	if n := len(s.Received()) - before; n != 0 {
		t.Fatalf("%s effect: the helpdesk received %d requests; want none", e.Kind, n)
	}
}

// FailEachEffect scripts each fault in turn on the helpdesk s for every
// request kind in kinds, sends each effect through d and looks it up, and
// writes each error to out, as fmt prints it and as slog's text handler
// logs it, for a test to look for credentials in.
func FailEachEffect(out io.Writer, s *fakehelpdesk.Server, d delivery.EffectSender, effects []delivery.Effect, kinds []fakehelpdesk.Kind, faults []fakehelpdesk.Fault) {
	log := slog.New(slog.NewTextHandler(out, nil))
	for _, f := range faults {
		for _, e := range effects {
			for _, k := range kinds {
				s.Script(fakehelpdesk.Rule{Kind: k, Fault: f})
			}
			_, err := d.SendEffect(context.Background(), e)
			fmt.Fprintln(out, err)
			log.Info("send failed", "err", err)
			_, _, err = d.LookupEffect(context.Background(), e)
			fmt.Fprintln(out, err)
			log.Info("lookup failed", "err", err)
		}
	}
}
