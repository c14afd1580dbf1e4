package linear_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/helpdesktest"
)

// issued creates the test ticket's issue in the fake and returns its
// identifier.
func issued(t *testing.T, f *fakehelpdesk.Server, d delivery.Destination) string {
	t.Helper()
	r, err := d.Send(context.Background(), ticket())
	if err != nil {
		t.Fatal(err)
	}
	return r.ExternalID
}

// TestCommentAndClose: a comment is a commentCreate under its comment_id
// on the ticket's issue; a close creates its resolution (when it has one)
// as a comment under its close_id, then moves the issue to Done, the
// first completed state by position (Released, also completed, is listed
// first). The team's states are read once; the lookups find both.
func TestCommentAndClose(t *testing.T) {
	for _, resolution := range []string{"Fixed by a restart", ""} {
		f := fakehelpdesk.New(t, fakehelpdesk.Config{})
		c := client(t, f)
		ident := issued(t, f, c)
		comment := helpdesktest.Comment(ticketID, ident, helpdesktest.CommentID, "It fails on mobile too")
		r := helpdesktest.SendEffectOnce(t, c, comment)
		if r.ExternalID != helpdesktest.CommentID || !strings.Contains(r.ExternalURL, "/issue/"+ident) {
			t.Fatalf("comment receipt %+v", r)
		}
		closing := helpdesktest.Close(ticketID, ident, helpdesktest.CloseID, resolution)
		if _, found, err := c.LookupEffect(context.Background(), closing); err != nil || found {
			t.Fatalf("close before it was sent: %v %v; want absent", found, err)
		}
		cr := helpdesktest.SendEffectOnce(t, c, closing)
		if cr.ExternalID != ident || f.LinearIssueState(ticketID).ID != fakehelpdesk.LinearDoneStateID {
			t.Fatalf("close receipt %+v, state %+v; want the issue in Done", cr, f.LinearIssueState(ticketID))
		}
		want := []string{"create", "comment:" + helpdesktest.CommentID}
		if resolution != "" {
			want = append(want, "comment:"+helpdesktest.CloseID)
		}
		want = append(want, "state:completed")
		if got := f.Order(ticketID); !slices.Equal(got, want) {
			t.Errorf("order %q; want %q", got, want)
		}
		if cs := f.LinearComments(); cs[0].IssueID != ticketID || cs[0].Body != "It fails on mobile too" ||
			resolution != "" && (cs[1].ID != helpdesktest.CloseID || cs[1].Body != resolution) {
			t.Errorf("comments %+v", cs)
		}
		for e, want := range map[*delivery.Effect]delivery.Receipt{&comment: r, &closing: cr} {
			if got, found, err := c.LookupEffect(context.Background(), *e); err != nil || !found || got != want {
				t.Errorf("%s lookup: %+v %v %v; want %+v", e.Kind, got, found, err, want)
			}
		}
		// Another close (of the same issue, say resent) reads no states.
		helpdesktest.SendEffectOnce(t, c, closing)
		if n := f.Requests(fakehelpdesk.LinearWorkflowStates); n != 1 {
			t.Errorf("the team's states were read %d times; want once per client", n)
		}
	}
}

// TestCommentCommitThenDrop: Linear creates the comment and the
// connection drops: Unknown; the lookup finds it; a resend, whatever
// Linear answers for the id already taken, is delivered with it, and the
// comment exists once.
func TestCommentCommitThenDrop(t *testing.T) {
	for _, d := range fakehelpdesk.Duplicates {
		t.Run(d.String(), func(t *testing.T) {
			f := fakehelpdesk.New(t, fakehelpdesk.Config{})
			f.SetLinearDuplicate(d)
			c := client(t, f)
			ident := issued(t, f, c)
			e := helpdesktest.Comment(ticketID, ident, helpdesktest.CommentID, "again")
			helpdesktest.CommitThenDrop(t, f, c, e, fakehelpdesk.LinearCommentCreate, delivery.Receipt{})
			r, err := c.SendEffect(context.Background(), e)
			if err != nil || r.ExternalID != helpdesktest.CommentID || f.Held(helpdesktest.CommentID) != 1 {
				t.Fatalf("resend: %+v %v, held %d", r, err, f.Held(helpdesktest.CommentID))
			}
		})
	}
}

// TestCloseCommitThenDrop: the issueUpdate is applied and the connection
// drops: Unknown; the lookup finds the issue completed with the
// resolution's comment.
func TestCloseCommitThenDrop(t *testing.T) {
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := client(t, f)
	ident := issued(t, f, c)
	e := helpdesktest.Close(ticketID, ident, helpdesktest.CloseID, "done")
	f.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearIssueUpdate, Fault: fakehelpdesk.CommitThenDrop()})
	_, err := c.SendEffect(context.Background(), e)
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Unknown {
		t.Fatalf("send: %v", se)
	}
	if r, found, err := c.LookupEffect(context.Background(), e); err != nil || !found || r.ExternalID != ident {
		t.Fatalf("lookup: %+v %v %v", r, found, err)
	}
}

// TestCloseLookupNeedsResolution: an issue completed without the close's
// resolution comment is not that close.
func TestCloseLookupNeedsResolution(t *testing.T) {
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := client(t, f)
	ident := issued(t, f, c)
	helpdesktest.SendEffectOnce(t, c, helpdesktest.Close(ticketID, ident, "other-close", ""))
	e := helpdesktest.Close(ticketID, ident, helpdesktest.CloseID, "with a resolution")
	if _, found, err := c.LookupEffect(context.Background(), e); err != nil || found {
		t.Fatalf("lookup: %v %v; want absent", found, err)
	}
}

// TestEffectFailures: kinds other than comment and close are refused;
// the close's failures are classified as the create's, and a failed read
// of the team's states says nothing was made, and is read again next time.
func TestEffectFailures(t *testing.T) {
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := client(t, f)
	ident := issued(t, f, c)
	helpdesktest.Refuses(t, f, c, helpdesktest.Note(ticketID, ident), "linear takes no note effects")
	helpdesktest.Refuses(t, f, c, helpdesktest.Comment("", ident, helpdesktest.CommentID, "x"), "follows no ticket")
	closing := helpdesktest.Close(ticketID, ident, helpdesktest.CloseID, "")
	for _, tc := range []struct {
		kind  fakehelpdesk.Kind
		fault fakehelpdesk.Fault
		want  delivery.Failure
	}{
		{fakehelpdesk.LinearWorkflowStates, fakehelpdesk.Unavailable("3"), delivery.NotCreated},
		{fakehelpdesk.LinearWorkflowStates, fakehelpdesk.Drop(), delivery.NotCreated},
		{fakehelpdesk.LinearWorkflowStates, fakehelpdesk.Forbidden(), delivery.Misconfigured},
		{fakehelpdesk.LinearIssueUpdate, fakehelpdesk.LinearRateLimited(400, "Requests", time.Minute), delivery.NotCreated},
		{fakehelpdesk.LinearIssueUpdate, fakehelpdesk.LinearError(200, "invalid input", "Entity not found: Issue"), delivery.Refused},
		{fakehelpdesk.LinearIssueUpdate, fakehelpdesk.LinearError(200, "internal error", "boom"), delivery.Unknown},
		{fakehelpdesk.LinearCommentCreate, fakehelpdesk.LinearError(200, "authentication error", "no"), delivery.Misconfigured},
	} {
		e := closing
		if tc.kind == fakehelpdesk.LinearCommentCreate {
			e = helpdesktest.Comment(ticketID, ident, helpdesktest.CommentID, "x")
		}
		f.Script(fakehelpdesk.Rule{Kind: tc.kind, Fault: tc.fault})
		_, err := c.SendEffect(context.Background(), e)
		if se := helpdesktest.SendError(t, err); se.Failure != tc.want {
			t.Errorf("%s %+v: %v; want %s", tc.kind, tc.fault, se, tc.want)
		}
	}
	bad := helpdesktest.Close("9b2d0c4e-0000-4000-8000-00000000dead", "ENG-404", helpdesktest.CloseID, "")
	_, err := c.SendEffect(context.Background(), bad)
	if se := helpdesktest.SendError(t, err); se.Failure != delivery.Refused {
		t.Errorf("close of an issue Linear does not have: %v; want refused", se)
	}
}

// TestEffectKeyNeverShown: no error of a follow-up's send or lookup shows
// the API key.
func TestEffectKeyNeverShown(t *testing.T) {
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := client(t, f)
	ident := issued(t, f, c)
	var out bytes.Buffer
	effects := []delivery.Effect{helpdesktest.Comment(ticketID, ident, helpdesktest.CommentID, "x"),
		helpdesktest.Close(ticketID, ident, helpdesktest.CloseID, "done"), helpdesktest.Note(ticketID, ident)}
	helpdesktest.FailEachEffect(&out, f, c, effects,
		[]fakehelpdesk.Kind{fakehelpdesk.LinearCommentCreate, fakehelpdesk.LinearCommentLookup, fakehelpdesk.LinearIssueUpdate,
			fakehelpdesk.LinearLookup, fakehelpdesk.LinearWorkflowStates},
		[]fakehelpdesk.Fault{fakehelpdesk.CommitThenDrop(), fakehelpdesk.CommitThenStatus(500), fakehelpdesk.Refuse(422),
			fakehelpdesk.Forbidden(), fakehelpdesk.LinearRateLimited(429, "Requests", time.Second)})
	f.SetRevoked(true)
	helpdesktest.FailEachEffect(&out, f, c, effects, nil, []fakehelpdesk.Fault{{}})
	text := out.String()
	if strings.Contains(text, f.Config().LinearKey) || !strings.Contains(text, "answered 401") {
		t.Fatalf("the key leaked, or the output is not what the test means to check:\n%s", text)
	}
}
