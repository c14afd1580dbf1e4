package linear_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/linear"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/helpdesktest"
)

const ticketID = "3f1c1f0e-8a4b-4c1d-9e2f-5b6a7c8d9e0f"

func ticket() delivery.HelpdeskTicket {
	return delivery.HelpdeskTicket{ID: ticketID, OperationKey: "op-key-1", TenantID: "tenant-a", UserID: "alice",
		Title: "Printer on fire", Description: "Third floor", Priority: "urgent", CreatedAt: time.Now().UTC().Truncate(time.Second)}
}

func client(t *testing.T, f *fakehelpdesk.Server) *linear.Client {
	t.Helper()
	c, err := linear.New(linear.Config{URL: f.LinearURL(), TeamID: f.Config().LinearTeamID, APIKey: f.Config().LinearKey,
		Timeout: time.Second, Now: f.Now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSendCreatesTheIssue: one issueCreate, with id = the ticket id, the
// team, the title, a description naming the agent call, and Linear's
// priority; the receipt is the issue's identifier and url.
func TestSendCreatesTheIssue(t *testing.T) {
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	tk := ticket()
	r, req := helpdesktest.SendOnce(t, f, client(t, f), tk)
	issues := f.LinearIssues()
	if len(issues) != 1 {
		t.Fatalf("Linear holds %d issues, want 1", len(issues))
	}
	i := issues[0]
	if i.ID != tk.ID || i.TeamID != f.Config().LinearTeamID || i.Title != tk.Title || i.Priority != 1 {
		t.Errorf("issue %+v; want id %s, the team, the title and priority 1 (urgent)", i, tk.ID)
	}
	for _, want := range []string{"Third floor", tk.ID, "op-key-1", "tenant-a", "alice", tk.CreatedAt.Format(time.RFC3339)} {
		if !strings.Contains(i.Description, want) {
			t.Errorf("description %q lacks %q", i.Description, want)
		}
	}
	if r.ExternalID != i.Identifier || !strings.HasPrefix(r.ExternalID, "ENG-") || !strings.HasSuffix(r.ExternalURL, "/issue/"+i.Identifier) {
		t.Errorf("receipt %+v, issue %+v", r, i)
	}
	if got := req.Header.Get("Authorization"); got != f.Config().LinearKey {
		t.Errorf("Authorization %q, want the personal key as it is, without Bearer", got)
	}
}

func TestPriority(t *testing.T) {
	for p, want := range map[string]int{"urgent": 1, "high": 2, "normal": 3, "low": 4, "": 0, "whenever": 0} {
		if got := linear.Priority(p); got != want {
			t.Errorf("Priority(%q) = %d, want %d", p, got, want)
		}
	}
	tk := ticket()
	tk.Description = ""
	if d := linear.Description(tk); !strings.HasPrefix(d, tk.Title+"\n") {
		t.Errorf("a ticket without a description: %q, want its title first", d)
	}
}

// TestOAuthTokenIsBearer: an OAuth token goes as a Bearer token.
func TestOAuthTokenIsBearer(t *testing.T) {
	for _, key := range []string{"lin_oauth_abc123", "Bearer lin_oauth_abc123"} {
		f := fakehelpdesk.New(t, fakehelpdesk.Config{LinearKey: "Bearer lin_oauth_abc123"})
		c, err := linear.New(linear.Config{URL: f.LinearURL(), TeamID: f.Config().LinearTeamID, APIKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(context.Background(), ticket()); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
}

// TestSendFailures: each of Linear's answers, as the fake gives it, is
// classified as the package documentation says, and only a create that
// committed leaves an issue.
func TestSendFailures(t *testing.T) {
	tests := []struct {
		name       string
		fault      fakehelpdesk.Fault
		revoked    bool
		want       delivery.Failure
		retryAfter time.Duration // at least
		held       int
		lookups    int
	}{
		{name: "revoked key: 401 AUTHENTICATION_ERROR", revoked: true, want: delivery.Misconfigured},
		{name: "403", fault: fakehelpdesk.Forbidden(), want: delivery.Misconfigured},
		{name: "FORBIDDEN in a 200", fault: fakehelpdesk.LinearError(200, "forbidden", "You don't have access to this team"), want: delivery.Misconfigured},
		{name: "usage limit exceeded", fault: fakehelpdesk.LinearError(200, "usage limit exceeded", "Issue limit reached"), want: delivery.Misconfigured},
		{name: "RATELIMITED in a 400, requests", fault: fakehelpdesk.LinearRateLimited(400, "Requests", 90*time.Second), want: delivery.NotCreated, retryAfter: 89 * time.Second},
		{name: "RATELIMITED in a 429, complexity", fault: fakehelpdesk.LinearRateLimited(429, "Complexity", 40*time.Second), want: delivery.NotCreated, retryAfter: 39 * time.Second},
		{name: "wrong teamId in a 200", fault: fakehelpdesk.LinearError(200, "invalid input", "Entity not found: Team"), want: delivery.Refused, lookups: 1},
		{name: "invalid input in a 400", fault: fakehelpdesk.LinearError(400, "invalid input", "Argument Validation Error"), want: delivery.Refused, lookups: 1},
		{name: "internal error in a 200", fault: fakehelpdesk.LinearError(200, "internal error", "Something went wrong"), want: delivery.Unknown},
		{name: "lock timeout", fault: fakehelpdesk.LinearError(200, "lock timeout", "Lock timeout"), want: delivery.Unknown},
		{name: "503", fault: fakehelpdesk.Unavailable("2"), want: delivery.Unknown, retryAfter: 2 * time.Second},
		{name: "commit then 502", fault: fakehelpdesk.CommitThenStatus(502), want: delivery.Unknown, held: 1},
		{name: "commit then drop", fault: fakehelpdesk.CommitThenDrop(), want: delivery.Unknown, held: 1},
		{name: "drop", fault: fakehelpdesk.Drop(), want: delivery.Unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fakehelpdesk.New(t, fakehelpdesk.Config{})
			f.SetRevoked(tc.revoked)
			if !tc.revoked {
				f.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearCreate, Fault: tc.fault})
			}
			_, err := client(t, f).Send(context.Background(), ticket())
			var se *delivery.SendError
			if !errors.As(err, &se) || se.Failure != tc.want || se.RetryAfter < tc.retryAfter {
				t.Fatalf("Send: %v; want %s, retry after at least %s", err, tc.want, tc.retryAfter)
			}
			if f.Held(ticketID) != tc.held || f.Requests(fakehelpdesk.LinearLookup) != tc.lookups {
				t.Errorf("Linear holds %d issues after %d lookups, want %d and %d", f.Held(ticketID), f.Requests(fakehelpdesk.LinearLookup), tc.held, tc.lookups)
			}
			if strings.Contains(err.Error(), f.Config().LinearKey) {
				t.Errorf("error shows the key: %v", err)
			}
		})
	}
}

// TestDuplicateID: a create whose id is already an issue's is delivered
// with that issue, never a second one, whatever Linear answers for it.
func TestDuplicateID(t *testing.T) {
	for _, d := range fakehelpdesk.Duplicates {
		t.Run(d.String(), func(t *testing.T) {
			f := fakehelpdesk.New(t, fakehelpdesk.Config{})
			f.SetLinearDuplicate(d)
			c := client(t, f)
			first, err := c.Send(context.Background(), ticket())
			if err != nil {
				t.Fatal(err)
			}
			again, err := c.Send(context.Background(), ticket())
			if err != nil || again != first {
				t.Fatalf("resend: %+v, %v; want %+v", again, err, first)
			}
			if f.Held(ticketID) != 1 || f.Requests(fakehelpdesk.LinearCreate) != 2 {
				t.Errorf("Linear holds %d issues after %d creates, want 1 after 2", f.Held(ticketID), f.Requests(fakehelpdesk.LinearCreate))
			}
		})
	}
}

// TestIssueUnderAnotherID: exactly once rests on the issue carrying the
// ticket's id. An issueCreate that answers success with another id ends
// the ticket refused, naming the issue, rather than delivered (a later
// lookup of the ticket's id would not find it); a lookup answered with
// an issue of another id (issue(id:) also resolves identifiers) is an
// unknown answer, neither found nor proof of absence.
func TestIssueUnderAnotherID(t *testing.T) {
	const other = `{"id":"9b2d0c4e-0000-4000-8000-000000000000","identifier":"ENG-9","url":"https://linear.app/acme/issue/ENG-9"}`
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	f.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearCreate,
		Fault: fakehelpdesk.Fault{Status: 200, Body: `{"data":{"issueCreate":{"success":true,"issue":` + other + `}}}`}})
	f.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearLookup, Fault: fakehelpdesk.Fault{Status: 200, Body: `{"data":{"issue":` + other + `}}`}})
	c := client(t, f)
	var se *delivery.SendError
	r, err := c.Send(context.Background(), ticket())
	if !errors.As(err, &se) || se.Failure != delivery.Refused || !strings.Contains(err.Error(), "ENG-9") {
		t.Errorf("create under another id: receipt %+v, error %v; want refused, naming ENG-9", r, err)
	}
	r, found, err := c.Lookup(context.Background(), ticketID)
	if found || !errors.As(err, &se) || se.Failure != delivery.Unknown {
		t.Errorf("lookup answered another id: %+v found=%t error %v; want an unknown answer", r, found, err)
	}
}

func TestLookup(t *testing.T) {
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	c := client(t, f)
	ctx := context.Background()
	if _, found, err := c.Lookup(ctx, ticketID); err != nil || found {
		t.Fatalf("before the create: found=%t err=%v; want absent", found, err)
	}
	sent, err := c.Send(ctx, ticket())
	if err != nil {
		t.Fatal(err)
	}
	if r, found, err := c.Lookup(ctx, ticketID); err != nil || !found || r != sent {
		t.Fatalf("after the create: %+v found=%t err=%v; want %+v", r, found, err, sent)
	}
	f.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearLookup, Fault: fakehelpdesk.Unavailable("")})
	var se *delivery.SendError
	if _, _, err := c.Lookup(ctx, ticketID); !errors.As(err, &se) || se.Failure != delivery.Unknown {
		t.Errorf("503: %v, want an unknown answer", err)
	}
	f.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearLookup, Fault: fakehelpdesk.LinearRateLimited(400, "Requests", time.Minute)})
	if _, _, err := c.Lookup(ctx, ticketID); !errors.As(err, &se) || se.Failure != delivery.Unknown || se.RetryAfter < 59*time.Second {
		t.Errorf("RATELIMITED: %v, want an unknown answer due after the reset", err)
	}
	f.SetRevoked(true)
	if _, _, err := c.Lookup(ctx, ticketID); !errors.As(err, &se) || se.Failure != delivery.Misconfigured {
		t.Errorf("revoked: %v, want misconfigured", err)
	}
}

// TestCheck: deliveries check asks for the viewer and the team, creating
// nothing, and says which of the two is wrong.
func TestCheck(t *testing.T) {
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	ctx := context.Background()
	if line, ok := delivery.Check(ctx, client(t, f)); !ok || !strings.Contains(line, "ENG") {
		t.Errorf("good key and team: %q %t", line, ok)
	}
	bad, _ := linear.New(linear.Config{URL: f.LinearURL(), TeamID: f.Config().LinearTeamID, APIKey: "lin_api_wrong"})
	if line, ok := delivery.Check(ctx, bad); ok || !strings.Contains(line, "refused the key") || strings.Contains(line, "lin_api_wrong") {
		t.Errorf("wrong key: %q %t", line, ok)
	}
	team, _ := linear.New(linear.Config{URL: f.LinearURL(), TeamID: "not-a-team", APIKey: f.Config().LinearKey})
	if line, ok := delivery.Check(ctx, team); ok || !strings.Contains(line, `no team "not-a-team"`) {
		t.Errorf("wrong team: %q %t", line, ok)
	}
	if f.Requests(fakehelpdesk.LinearQuery) != 3 || f.Requests(fakehelpdesk.LinearCreate) != 0 || f.Total() != 0 {
		t.Errorf("%d queries, %d creates, %d issues; want 3, 0, 0", f.Requests(fakehelpdesk.LinearQuery), f.Requests(fakehelpdesk.LinearCreate), f.Total())
	}
}

func TestResetAfter(t *testing.T) {
	now := time.Now()
	h := http.Header{}
	h.Set("X-RateLimit-Requests-Remaining", "0")
	h.Set("X-RateLimit-Requests-Reset", strconv.FormatInt(now.Add(30*time.Second).UnixMilli(), 10))
	h.Set("X-RateLimit-Complexity-Remaining", "5000")
	h.Set("X-RateLimit-Complexity-Reset", strconv.FormatInt(now.Add(50*time.Second).UnixMilli(), 10))
	if d := linear.ResetAfter(h, now); d < 29*time.Second || d > 30*time.Second {
		t.Errorf("the spent budget resets in 30 s (milliseconds): got %s", d)
	}
	h.Set("X-RateLimit-Requests-Remaining", "10")
	if d := linear.ResetAfter(h, now); d < 49*time.Second || d > 50*time.Second {
		t.Errorf("no budget spent: the latest reset, 50 s: got %s", d)
	}
	s := http.Header{}
	s.Set("X-RateLimit-Requests-Reset", strconv.FormatInt(now.Add(20*time.Second).Unix(), 10))
	if d := linear.ResetAfter(s, now); d < 19*time.Second || d > 20*time.Second {
		t.Errorf("a reset in seconds: got %s", d)
	}
	if d := linear.ResetAfter(http.Header{}, now); d != 0 {
		t.Errorf("no headers: %s", d)
	}
}

// TestNewRefuses: a bad setting is an error naming it, never the key.
func TestNewRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  linear.Config
		want string
	}{
		{linear.Config{TeamID: "t"}, "api_key"},
		{linear.Config{APIKey: "lin_api_SECRET"}, "team_id"},
		{linear.Config{URL: "http://api.example", TeamID: "t", APIKey: "lin_api_SECRET"}, "https"},
		{linear.Config{URL: "https://api.example?x=1", TeamID: "t", APIKey: "lin_api_SECRET"}, "query"},
	} {
		_, err := linear.New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	c, err := linear.New(linear.Config{TeamID: "t", APIKey: "lin_api_SECRET"})
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%v %+v %#v", c, c, c); strings.Contains(s, "SECRET") || !strings.Contains(s, linear.DefaultURL) {
		t.Errorf("printed: %s", s)
	}
}
