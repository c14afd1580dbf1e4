package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/helpdesktest"
)

// TestEffectsDelivered: the ticket, a comment and a close (with and
// without a resolution) are each their own signed POST: the effect's key
// as webhook-id and Idempotency-Key, its payload byte for byte as the
// body; the helpdesk received them in order, and each lookup finds its
// own.
func TestEffectsDelivered(t *testing.T) {
	for _, resolution := range []string{"Fixed by a restart <3>", ""} {
		s := fakehelpdesk.New(t, fakehelpdesk.Config{})
		c := newClient(t, s, true, 0)
		if _, err := c.Send(context.Background(), ticket); err != nil {
			t.Fatal(err)
		}
		comment := helpdesktest.Comment(ticket.ID, "WH-1", helpdesktest.CommentID, "It fails on mobile too & \"often\"")
		closing := helpdesktest.Close(ticket.ID, "WH-1", helpdesktest.CloseID, resolution)
		for i, e := range []delivery.Effect{comment, closing} {
			r := helpdesktest.SendEffectOnce(t, c, e)
			id := fmt.Sprintf("WH-%d", i+2)
			want := delivery.Receipt{ExternalID: id, ExternalURL: s.URL() + "/tickets/" + id}
			if r != want {
				t.Errorf("%s: receipt %+v; want %+v", e.Kind, r, want)
			}
			got := s.Received()
			req := got[len(got)-1]
			if req.Method != http.MethodPost || req.Path != fakehelpdesk.DefaultWebhookPath || !bytes.Equal(req.Body, e.Payload) ||
				req.Header.Get("Idempotency-Key") != e.ID || req.Header.Get("webhook-id") != e.ID ||
				req.Header.Get("Content-Type") != "application/json" || verify(t, req.Header, req.Body) != nil {
				t.Fatalf("%s: request %s %s %v %s", e.Kind, req.Method, req.Path, req.Header, req.Body)
			}
			if lr, found, err := c.LookupEffect(context.Background(), e); err != nil || !found || lr != r {
				t.Errorf("%s: lookup %+v %v %v; want %+v", e.Kind, lr, found, err, r)
			}
		}
		want := []string{"create", "comment:" + helpdesktest.CommentID, "close:" + helpdesktest.CloseID}
		if got := s.Order(ticket.ID); !slices.Equal(got, want) {
			t.Errorf("order %q; want %q", got, want)
		}
	}
}

// TestTicketBodyType: the ticket's own body says what it is, as the
// follow-ups' do.
func TestTicketBodyType(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	_, req := helpdesktest.SendOnce(t, s, newClient(t, s, false, 0), ticket)
	if !bytes.HasPrefix(req.Body, []byte(`{"type":"ticket.created","ticket_id":`)) {
		t.Fatalf("body %s", req.Body)
	}
}

// TestEffectCommitThenDrop: a comment the endpoint commits before it drops
// the connection is Unknown, found by its lookup, and held once.
func TestEffectCommitThenDrop(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, true, 0)
	if _, err := c.Send(context.Background(), ticket); err != nil {
		t.Fatal(err)
	}
	e := helpdesktest.Comment(ticket.ID, "WH-1", helpdesktest.CommentID, "again")
	helpdesktest.CommitThenDrop(t, s, c, e, fakehelpdesk.WebhookCreate, delivery.Receipt{ExternalID: "WH-2", ExternalURL: s.URL() + "/tickets/WH-2"})
	// A resend after the lookup would be answered from the key's record.
	if r := helpdesktest.SendEffectOnce(t, c, e); r.ExternalID != "WH-2" || s.Held(e.ID) != 1 {
		t.Fatalf("resend %+v, held %d", r, s.Held(e.ID))
	}
}

// TestEffectAnyKind: the webhook takes every kind, its own included, and
// classifies the answers as a ticket's; it refuses an effect without a
// key or whose payload is not a JSON object, sending nothing.
func TestEffectAnyKind(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, false, 300*time.Millisecond)
	note := helpdesktest.Note(ticket.ID, "WH-1")
	if r := helpdesktest.SendEffectOnce(t, c, note); r.ExternalID != "WH-1" {
		t.Fatalf("note: %+v", r)
	}
	if _, _, err := c.LookupEffect(context.Background(), note); !errors.Is(err, delivery.ErrNoLookup) {
		t.Fatalf("lookup without lookup configured: %v", err)
	}
	noID := note
	noID.ID = ""
	helpdesktest.Refuses(t, s, c, noID, "no id")
	text := note
	text.Payload = []byte("not json")
	helpdesktest.Refuses(t, s, c, text, "not a JSON object")
	for _, tc := range []struct {
		fault fakehelpdesk.Fault
		want  delivery.Failure
	}{
		{fakehelpdesk.TooManyRequests("30"), delivery.NotCreated},
		{fakehelpdesk.InProgress(), delivery.Unknown},
		{fakehelpdesk.Refuse(422), delivery.Refused},
		{fakehelpdesk.Refuse(401), delivery.Misconfigured},
		{fakehelpdesk.Drop(), delivery.Unknown},
	} {
		s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Fault: tc.fault})
		_, err := c.SendEffect(context.Background(), helpdesktest.Comment(ticket.ID, "WH-1", helpdesktest.CommentID, "x"))
		if se := helpdesktest.SendError(t, err); se.Failure != tc.want {
			t.Errorf("%+v: %v; want %s", tc.fault, se, tc.want)
		}
	}
}

// TestEffectSecretNeverShown: no error of a follow-up's send or lookup
// shows the secret or its key.
func TestEffectSecretNeverShown(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := newClient(t, s, true, 300*time.Millisecond)
	var out bytes.Buffer
	effects := []delivery.Effect{helpdesktest.Comment(ticket.ID, "WH-1", helpdesktest.CommentID, "x"),
		helpdesktest.Close(ticket.ID, "WH-1", helpdesktest.CloseID, "done")}
	helpdesktest.FailEachEffect(&out, s, c, effects, []fakehelpdesk.Kind{fakehelpdesk.WebhookCreate, fakehelpdesk.WebhookLookup},
		[]fakehelpdesk.Fault{fakehelpdesk.CommitThenDrop(), fakehelpdesk.CommitThenStatus(500), fakehelpdesk.Refuse(422),
			fakehelpdesk.Refuse(401), fakehelpdesk.CommitThenSlow(time.Second)})
	secret := s.Config().Secret
	if text := out.String(); strings.Contains(text, secret) || strings.Contains(text, strings.TrimPrefix(secret, "whsec_")) ||
		!strings.Contains(text, "answered 422") {
		t.Fatalf("a credential leaked, or the output is not what the test means to check:\n%s", text)
	}
}
