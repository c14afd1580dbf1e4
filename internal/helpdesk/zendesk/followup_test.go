package zendesk_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/golden"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/helpdesktest"
)

// delivered creates the test ticket in the fake and returns the client and
// the ticket's Zendesk id.
func delivered(t *testing.T, s *fakehelpdesk.Server) (*zendesk.Client, string) {
	t.Helper()
	c := newClient(t, s, 300*time.Millisecond)
	r, err := c.Send(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	return c, r.ExternalID
}

// TestCommentAndCloseDelivered: a comment and a close are each one PUT of
// the ticket, byte for byte as the golden files, in the order sent; a
// comment's receipt is its audit, a close's the ticket, and the lookups
// find both.
func TestCommentAndCloseDelivered(t *testing.T) {
	for _, tc := range []struct{ resolution, golden string }{
		{"Fixed by a restart.\nThanks — é", "close.golden.json"},
		{"", "close_no_resolution.golden.json"},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			s := fakehelpdesk.New(t, fakehelpdesk.Config{})
			c, id := delivered(t, s)
			agent := s.URL() + "/agent/tickets/" + id
			comment := helpdesktest.Comment(ticket.ID, id, helpdesktest.CommentID, "It fails on mobile <too> & \"often\"")
			r := helpdesktest.SendEffectOnce(t, c, comment)
			req := s.Received()[len(s.Received())-1]
			golden.Check(t, "comment.golden.json", req.Body)
			if req.Method != http.MethodPut || req.Path != "/api/v2/tickets/"+id || req.Header.Get("Authorization") != defaultAuthorization ||
				req.Header.Get("Content-Type") != "application/json" || req.Header.Get("Idempotency-Key") != "" {
				t.Fatalf("comment request %s %s %v", req.Method, req.Path, req.Header)
			}
			if !strings.HasPrefix(r.ExternalID, "5") || r.ExternalID == id || r.ExternalURL != agent {
				t.Fatalf("comment receipt %+v; want the audit's id and the ticket's agent URL", r)
			}
			closing := helpdesktest.Close(ticket.ID, id, helpdesktest.CloseID, tc.resolution)
			cr := helpdesktest.SendEffectOnce(t, c, closing)
			golden.Check(t, tc.golden, s.Received()[len(s.Received())-1].Body)
			if cr != (delivery.Receipt{ExternalID: id, ExternalURL: agent}) {
				t.Fatalf("close receipt %+v; want the ticket's", cr)
			}
			want := []string{"create", "comment:" + helpdesktest.CommentID, "close:" + helpdesktest.CloseID}
			if got := s.Order(ticket.ID); !slices.Equal(got, want) {
				t.Fatalf("order %q; want %q", got, want)
			}
			for e, want := range map[*delivery.Effect]delivery.Receipt{&comment: r, &closing: cr} {
				if got, found, err := c.LookupEffect(context.Background(), *e); err != nil || !found || got != want {
					t.Errorf("%s lookup: %+v %v %v; want %+v", e.Kind, got, found, err, want)
				}
			}
		})
	}
}

// TestCommentCommitThenDrop: Zendesk applies the update and the
// connection drops: Unknown; the lookup, paging through the audits, finds
// the comment's audit, and the helpdesk holds it once.
func TestCommentCommitThenDrop(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c, id := delivered(t, s)
	for i := range 4 { // more audits than fit a page
		helpdesktest.SendEffectOnce(t, c, helpdesktest.Comment(ticket.ID, id, fmt.Sprintf("c%d", i), "earlier"))
	}
	e := helpdesktest.Comment(ticket.ID, id, helpdesktest.CommentID, "late")
	helpdesktest.CommitThenDrop(t, s, c, e, fakehelpdesk.ZendeskUpdate, delivery.Receipt{})
	if n := s.Requests(fakehelpdesk.ZendeskAudits); n != 3 {
		t.Errorf("the lookup read %d pages of 6 audits; want 3", n)
	}
}

// TestCloseCommitThenDrop: a close applied and then dropped is found by
// the ticket's status; once the ticket is reopened, by its audit.
func TestCloseCommitThenDrop(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c, id := delivered(t, s)
	e := helpdesktest.Close(ticket.ID, id, helpdesktest.CloseID, "")
	want := delivery.Receipt{ExternalID: id, ExternalURL: s.URL() + "/agent/tickets/" + id}
	helpdesktest.CommitThenDrop(t, s, c, e, fakehelpdesk.ZendeskUpdate, want)
	if s.Requests(fakehelpdesk.ZendeskShow) != 1 || s.Requests(fakehelpdesk.ZendeskAudits) != 0 {
		t.Errorf("found by %d reads of the ticket and %d of its audits; want by the ticket alone",
			s.Requests(fakehelpdesk.ZendeskShow), s.Requests(fakehelpdesk.ZendeskAudits))
	}
	s.SetZendeskStatus(id, "open")
	if r, found, err := c.LookupEffect(context.Background(), e); err != nil || !found || r != want {
		t.Fatalf("reopened: %+v %v %v", r, found, err)
	}
}

// TestLookupPages: a lookup reads every page of the audits, by cursor,
// and says absent only after the last; an audit listing that lags hides
// the update from a lookup until it catches up.
func TestLookupPages(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c, id := delivered(t, s)
	for i := range 5 {
		helpdesktest.SendEffectOnce(t, c, helpdesktest.Comment(ticket.ID, id, fmt.Sprintf("c%d", i), "body"))
	}
	ctx := context.Background()
	last := helpdesktest.Comment(ticket.ID, id, "c4", "body")
	if _, found, err := c.LookupEffect(ctx, last); err != nil || !found {
		t.Fatalf("last comment: %v %v", found, err)
	}
	pages := s.Requests(fakehelpdesk.ZendeskAudits)
	absent := helpdesktest.Comment(ticket.ID, id, "never-sent", "body")
	if _, found, err := c.LookupEffect(ctx, absent); err != nil || found {
		t.Fatalf("absent comment: %v %v", found, err)
	}
	if pages != 3 || s.Requests(fakehelpdesk.ZendeskAudits) != 6 {
		t.Errorf("%d then %d pages; want 3 of 6 audits each time", pages, s.Requests(fakehelpdesk.ZendeskAudits)-pages)
	}
	for _, req := range s.Received() {
		if req.Kind == fakehelpdesk.ZendeskAudits && !strings.Contains(req.RawQuery, "page%5Bsize%5D=100") {
			t.Errorf("audits read without cursor pagination: ?%s", req.RawQuery)
		}
	}

	s.SetLookupLag(1, 0)
	lagging := helpdesktest.Comment(ticket.ID, id, helpdesktest.CommentID, "lagging")
	helpdesktest.SendEffectOnce(t, c, lagging)
	if _, found, err := c.LookupEffect(ctx, lagging); err != nil || found {
		t.Fatalf("lagging index: %v %v; want absent", found, err)
	}
	if _, found, err := c.LookupEffect(ctx, lagging); err != nil || !found {
		t.Fatalf("index caught up: %v %v", found, err)
	}
}

// TestLookupOffsetPages: an offset listing (next_page) is followed as far
// as it goes, but only while it names the same listing: a next_page on
// another host fails the lookup rather than send the credentials there.
func TestLookupOffsetPages(t *testing.T) {
	var pages int
	var foreign bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pages++
		base := "http://" + r.Host + r.URL.Path
		if foreign {
			base = "https://elsewhere.example" + r.URL.Path
		}
		switch r.URL.Query().Get("page") {
		case "":
			fmt.Fprintf(w, `{"audits":[{"id":1,"metadata":{"custom":{}}}],"next_page":%q}`, base+".json?page=2")
		case "2":
			fmt.Fprintf(w, `{"audits":[{"id":2,"metadata":{"custom":{"comment_id":"other"}}}],"next_page":%q}`, base+"?page=3")
		default:
			fmt.Fprint(w, `{"audits":[{"id":3,"metadata":{"custom":{"comment_id":"`+helpdesktest.CommentID+`"}}}],"next_page":null}`)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := zendesk.New(zendesk.Config{URL: srv.URL, Email: "a@b.c", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	e := helpdesktest.Comment(ticket.ID, "77", helpdesktest.CommentID, "x")
	if r, found, err := c.LookupEffect(context.Background(), e); err != nil || !found || r.ExternalID != "3" || pages != 3 {
		t.Fatalf("%+v %v %v after %d pages; want audit 3 after 3", r, found, err, pages)
	}
	foreign = true
	if _, found, err := c.LookupEffect(context.Background(), e); found || err == nil {
		t.Fatalf("a next_page elsewhere: %v %v; want a failed lookup", found, err)
	}
}

// TestEffectRefusals: kinds other than comment and close, an effect
// without the ticket's Zendesk id, a closed ticket and a deleted one are
// refused; answers about our credentials are Misconfigured, 429 creates
// nothing, a 5xx may have applied the update.
func TestEffectRefusals(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c, id := delivered(t, s)
	helpdesktest.Refuses(t, s, c, helpdesktest.Note(ticket.ID, id), "zendesk takes no note effects")
	if _, _, err := c.LookupEffect(context.Background(), helpdesktest.Note(ticket.ID, id)); err == nil {
		t.Error("lookup of a note succeeded")
	}
	helpdesktest.Refuses(t, s, c, helpdesktest.Comment(ticket.ID, "", helpdesktest.CommentID, "x"), "not a positive integer")
	helpdesktest.Refuses(t, s, c, helpdesktest.Comment(ticket.ID, id, helpdesktest.CommentID, ""), "no body")
	for name, tc := range map[string]struct {
		fault  fakehelpdesk.Fault
		want   delivery.Failure
		status int
	}{
		"429":    {fakehelpdesk.TooManyRequests("30"), delivery.NotCreated, 429},
		"503":    {fakehelpdesk.Unavailable("5"), delivery.Unknown, 503},
		"401":    {fakehelpdesk.Refuse(401), delivery.Misconfigured, 401},
		"403":    {fakehelpdesk.Forbidden(), delivery.Misconfigured, 403},
		"404":    {fakehelpdesk.Fault{Status: 404, Body: `<html>not here</html>`}, delivery.Misconfigured, 404},
		"422":    {fakehelpdesk.Refuse(422), delivery.Refused, 422},
		"commit": {fakehelpdesk.CommitThenStatus(500), delivery.Unknown, 500},
	} {
		s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskUpdate, Fault: tc.fault})
		_, err := c.SendEffect(context.Background(), helpdesktest.Comment(ticket.ID, id, "c-"+name, "x"))
		if se := helpdesktest.SendError(t, err); se.Failure != tc.want || se.Status != tc.status {
			t.Errorf("%s: %v; want %s", name, se, tc.want)
		}
	}
	_, err := c.SendEffect(context.Background(), helpdesktest.Comment(ticket.ID, "999999", helpdesktest.CommentID, "x"))
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Refused || se.Status != 404 {
		t.Errorf("a deleted ticket: %v; want refused", se)
	}
	s.SetZendeskStatus(id, "closed")
	_, err = c.SendEffect(context.Background(), helpdesktest.Comment(ticket.ID, id, helpdesktest.CommentID, "x"))
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Refused || se.Status != 422 {
		t.Errorf("a closed ticket: %v; want refused", se)
	}
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskAudits, Fault: fakehelpdesk.Forbidden()})
	_, _, err = c.LookupEffect(context.Background(), helpdesktest.Comment(ticket.ID, id, helpdesktest.CommentID, "x"))
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Misconfigured {
		t.Errorf("audits 403: %v; want misconfigured", se)
	}
}

// TestCloseOfSolvedTicket: Zendesk makes no audit of an update that
// changes nothing, so a close of a ticket already solved keeps no
// close_id; it is delivered, and found by the ticket's status.
func TestCloseOfSolvedTicket(t *testing.T) {
	s := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c, id := delivered(t, s)
	s.SetZendeskStatus(id, "solved")
	e := helpdesktest.Close(ticket.ID, id, helpdesktest.CloseID, "")
	audits := s.ZendeskAuditCount(id)
	helpdesktest.SendEffectOnce(t, c, e)
	if s.ZendeskAuditCount(id) != audits {
		t.Fatal("an update that changed nothing made an audit")
	}
	if _, found, err := c.LookupEffect(context.Background(), e); err != nil || !found {
		t.Fatalf("lookup: %v %v", found, err)
	}
}

// TestEffectCredentialsNeverShown: no error of a follow-up's send or
// lookup shows the token or the Basic credential.
func TestEffectCredentialsNeverShown(t *testing.T) {
	const token = "tok-77c1e9a4b2"
	s := fakehelpdesk.New(t, fakehelpdesk.Config{Token: token})
	c, err := zendesk.New(zendesk.Config{URL: s.URL(), Email: s.Config().Email, Token: token, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Send(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	effects := []delivery.Effect{helpdesktest.Comment(ticket.ID, r.ExternalID, helpdesktest.CommentID, "x"),
		helpdesktest.Close(ticket.ID, r.ExternalID, helpdesktest.CloseID, "done"), helpdesktest.Note(ticket.ID, r.ExternalID)}
	helpdesktest.FailEachEffect(&out, s, c, effects,
		[]fakehelpdesk.Kind{fakehelpdesk.ZendeskUpdate, fakehelpdesk.ZendeskAudits, fakehelpdesk.ZendeskShow},
		[]fakehelpdesk.Fault{fakehelpdesk.CommitThenDrop(), fakehelpdesk.CommitThenStatus(500), fakehelpdesk.Refuse(422),
			fakehelpdesk.Refuse(401), fakehelpdesk.CommitThenSlow(time.Second), fakehelpdesk.TooManyRequests("1")})
	text := out.String()
	basic := strings.TrimPrefix(s.ZendeskAuthorization(), "Basic ")
	if strings.Contains(text, token) || strings.Contains(text, basic) || !strings.Contains(text, "answered 422") {
		t.Fatalf("a credential leaked, or the output is not what the test means to check:\n%s", text)
	}
}
