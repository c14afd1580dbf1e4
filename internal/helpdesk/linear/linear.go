package linear

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
)

// DefaultURL is Linear's API; the GraphQL endpoint is {url}/graphql.
const DefaultURL = "https://api.linear.app"

// OAuthPrefix starts a Linear OAuth access token, sent as a Bearer token.
const OAuthPrefix = "lin_oauth_"

// Config is a Linear destination.
type Config struct {
	URL    string // DefaultURL when empty; http only for loopback (tests)
	TeamID string // the team the issues are created in
	// APIKey is a personal API key (lin_api_...), sent as it is, or an
	// OAuth access token (lin_oauth_..., or "Bearer ..."), sent as a
	// Bearer token. Never printed.
	APIKey  string
	Timeout time.Duration // per call; 0 means httpsend.DefaultTimeout
	// Now is the clock the rate-limit resets and Retry-After dates are read
	// against; nil: time.Now.
	Now func() time.Time
}

// settings is how the configuration is shown: the key and the URL
// redacted.
func (c Config) settings() httpsend.Settings {
	return httpsend.Settings{Kind: "linear", URL: c.url(), Timeout: c.Timeout,
		Attrs: []slog.Attr{slog.String("team_id", c.TeamID), httpsend.Secret("api_key", c.APIKey)}}
}

// String shows the configuration without the key.
func (c Config) String() string { return c.settings().String() }

// GoString is String, so that %#v does not print the key either.
func (c Config) GoString() string { return c.String() }

// LogValue logs the configuration without the key.
func (c Config) LogValue() slog.Value { return c.settings().LogValue() }

func (c Config) url() string {
	if c.URL == "" {
		return DefaultURL
	}
	return c.URL
}

// Client is a delivery.Destination for Linear.
type Client struct {
	cfg      Config
	endpoint *url.URL
	auth     string
	http     *httpsend.Client

	stateMu sync.Mutex
	doneID  string // the team's completed state, once read (see completedState)
}

var (
	_ delivery.Destination  = (*Client)(nil)
	_ delivery.EffectSender = (*Client)(nil)
	_ delivery.KeyedCreator = (*Client)(nil)
	_ delivery.Checker      = (*Client)(nil)
)

// New checks c and returns a Client; a refused URL, team or key is an
// *httpsend.SettingError.
func New(c Config) (*Client, error) {
	u, err := httpsend.CheckBaseURL(c.url())
	if err != nil {
		return nil, fmt.Errorf("linear: %w", err)
	}
	if strings.TrimSpace(c.TeamID) == "" || strings.ContainsAny(c.TeamID, " \t\r\n") {
		return nil, fmt.Errorf("linear: %w", httpsend.Refused("team_id", "team_id is required: the id of the Linear team the issues are created in"))
	}
	key := strings.TrimSpace(c.APIKey)
	if key == "" || key == "Bearer" || strings.ContainsAny(key, "\r\n") {
		return nil, fmt.Errorf("linear: %w", httpsend.Refused("api_key", "api_key is required: a Linear personal API key (lin_api_...) or OAuth token (value not shown)"))
	}
	auth := key
	switch {
	case strings.HasPrefix(key, "Bearer "):
	case strings.HasPrefix(key, OAuthPrefix):
		auth = "Bearer " + key
	}
	hc, err := httpsend.NewChecked(httpsend.Options{Timeout: c.Timeout, Now: c.Now})
	if err != nil {
		return nil, fmt.Errorf("linear: %w", err)
	}
	ep, _ := url.Parse(strings.TrimRight(u.String(), "/") + "/graphql") // u parsed above
	return &Client{cfg: c, endpoint: ep, auth: auth, http: hc}, nil
}

// String shows the client without the key.
func (c *Client) String() string { return c.cfg.String() }

// GoString is String, so that %#v does not print the key either.
func (c *Client) GoString() string { return c.cfg.String() }

// LogValue logs the client without the key.
func (c *Client) LogValue() slog.Value { return c.cfg.LogValue() }

// CreatesKeyedByID: the issue is created with id = the ticket id, and a
// follow-up's comment with id = its delivery key, so Linear holds at most
// one record per key; a close's state change can be made again with no
// effect (see the package documentation).
func (c *Client) CreatesKeyedByID() bool { return true }

// The GraphQL documents. Only the fields read are selected.
const (
	createMutation = `mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id identifier url } } }`
	lookupQuery    = `query Issue($id: String!) { issue(id: $id) { id identifier url } }`
	checkQuery     = `query Check($teamId: String!) { viewer { id } team(id: $teamId) { id key name } }`
)

// request is a GraphQL request body.
type request struct {
	Query     string         `json:"query"`
	Variables map[string]any `json:"variables"`
}

// issueInput is IssueCreateInput as sent, fields in this order.
type issueInput struct {
	ID          string `json:"id"`
	TeamID      string `json:"teamId"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Priority    int    `json:"priority"`
}

// Priority is Linear's number for a ticket's priority: "0 = No priority,
// 1 = Urgent, 2 = High, 3 = Medium, 4 = Low" (IssueCreateInput.priority in
// Linear's schema); the ticket's normal is Linear's Medium.
func Priority(p string) int {
	switch p {
	case "urgent":
		return 1
	case "high":
		return 2
	case "normal":
		return 3
	case "low":
		return 4
	}
	return 0
}

// Description is the issue's description (markdown): the ticket's
// description, or its title when it has none, then which agent call
// created it. It carries the ticket's own fields only, never the call's
// other arguments.
func Description(t delivery.HelpdeskTicket) string {
	var b strings.Builder
	if t.Description != "" {
		b.WriteString(t.Description)
	} else {
		b.WriteString(t.Title)
	}
	b.WriteString("\n\n---\nCreated by an agent's create_ticket call.\n\n")
	fmt.Fprintf(&b, "- ticket_id: `%s`\n", t.ID)
	fmt.Fprintf(&b, "- operation_key: `%s`\n", t.OperationKey)
	fmt.Fprintf(&b, "- tenant_id: `%s`\n", t.TenantID)
	fmt.Fprintf(&b, "- user_id: `%s`\n", t.UserID)
	if !t.CreatedAt.IsZero() {
		fmt.Fprintf(&b, "- created_at: %s\n", t.CreatedAt.UTC().Format(time.RFC3339Nano))
	}
	return b.String()
}

// Body is the exact request body Send sends for t under team: the same
// bytes on every resend.
func Body(team string, t delivery.HelpdeskTicket) ([]byte, error) {
	return json.Marshal(request{Query: createMutation, Variables: map[string]any{"input": issueInput{
		ID: t.ID, TeamID: team, Title: t.Title, Description: Description(t), Priority: Priority(t.Priority)}}})
}

// issue is what we read of a Linear issue.
type issue struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	URL        string `json:"url"`
	State      *struct {
		Type string `json:"type"`
	} `json:"state"` // asked for by a close's lookup only
}

func (i *issue) receipt() (delivery.Receipt, error) {
	if i == nil || i.Identifier == "" {
		return delivery.Receipt{}, errors.New("issue without an identifier")
	}
	return delivery.Receipt{ExternalID: i.Identifier, ExternalURL: i.URL}, nil
}

// ours reports whether the issue carries the ticket's id: exactly once
// rests on it, since the lookup before a resend asks for that id.
func (i *issue) ours(ticketID string) bool { return i != nil && i.ID == ticketID }

// mutationResult is what we read of a mutation's payload (IssuePayload,
// CommentPayload).
type mutationResult struct {
	Success bool     `json:"success"`
	Issue   *issue   `json:"issue"`
	Comment *comment `json:"comment"`
}

// keyedCreate is a create whose record takes our id as its primary key
// (issueCreate, commentCreate): Linear can hold at most one record under
// it, so an answer that leaves the outcome open is settled by reading
// the id, and a resend is always safe.
type keyedCreate struct {
	field string // the mutation's root field: "issueCreate"
	noun  string // what it creates: "issue"
	owner string // whose id it carries: "ticket"
	id    string
	body  []byte
	// read takes the record from a successful payload: its receipt and
	// the id Linear gave it.
	read func(*mutationResult) (delivery.Receipt, string, error)
	// lookup reads the record under id.
	lookup func(context.Context) (delivery.Receipt, bool, error)
}

// create sends k once and classifies the answer (see the package
// documentation): a refusal, or an error saying the id exists, is looked
// up before anything is decided.
func (c *Client) create(ctx context.Context, k keyedCreate) (delivery.Receipt, error) {
	req := c.request(k.body)
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return delivery.Receipt{}, err
	}
	res, errs, readable := readMutation(resp, k.field)
	if readable && len(errs) == 0 && resp.Status/100 == 2 && res != nil {
		if res.Success {
			r, got, err := k.read(res)
			switch {
			case err == nil && got == k.id:
				return r, nil
			case err == nil:
				// Linear created the record under another id: a lookup of
				// our id would never find it, so a resend would make a
				// second one. It ends refused, naming it.
				return delivery.Receipt{}, c.fail(req, resp, delivery.Refused,
					fmt.Sprintf("Linear created %s with id %q, not the %s's id", r.ExternalID, got, k.owner))
			}
		}
		return delivery.Receipt{}, c.fail(req, resp, delivery.Unknown, k.field+" answered without success and "+article(k.noun))
	}
	switch cl := classify(resp, errs, true); cl {
	case classRefused, classExists:
		// The id may already be a record's: a refusal of the input is
		// what Linear may answer for a duplicate id (its answer is not
		// published), so the id is looked up before anything is decided.
		r, found, lerr := k.lookup(ctx)
		switch {
		case lerr == nil && found:
			return r, nil
		case lerr == nil && cl == classRefused:
			return delivery.Receipt{}, c.fail(req, resp, delivery.Refused, fmt.Sprintf("refused, and no %s has the %s's id", k.noun, k.owner))
		case lerr == nil:
			return delivery.Receipt{}, c.fail(req, resp, delivery.Unknown, "the id is said to exist, but the lookup did not find it")
		}
		return delivery.Receipt{}, c.fail(req, resp, delivery.Unknown, fmt.Sprintf("refused, and the lookup of the %s's id failed: %v", k.owner, lerr))
	case classMisconfigured:
		return delivery.Receipt{}, c.fail(req, resp, delivery.Misconfigured, "")
	case classRateLimited:
		return delivery.Receipt{}, c.fail(req, resp, delivery.NotCreated, "")
	}
	return delivery.Receipt{}, c.fail(req, resp, delivery.Unknown, "")
}

func article(noun string) string {
	if strings.ContainsAny(noun[:1], "aeiou") {
		return "an " + noun
	}
	return "a " + noun
}

// readMutation reads a mutation's answer: the payload under field (nil
// when absent or null), the GraphQL errors, and whether the body was JSON.
func readMutation(resp *httpsend.Response, field string) (*mutationResult, []gqlError, bool) {
	var out struct {
		Data   map[string]*mutationResult `json:"data"`
		Errors []gqlError                 `json:"errors"`
	}
	if json.Unmarshal(resp.Body, &out) != nil {
		return nil, nil, false
	}
	return out.Data[field], out.Errors, true
}

// Send creates the issue with id = t.ID once.
func (c *Client) Send(ctx context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	body, err := httpsend.TicketBody("linear", t, func(t delivery.HelpdeskTicket) ([]byte, error) { return Body(c.cfg.TeamID, t) })
	if err != nil {
		return delivery.Receipt{}, err
	}
	return c.create(ctx, keyedCreate{field: "issueCreate", noun: "issue", owner: "ticket", id: t.ID, body: body,
		read: func(m *mutationResult) (delivery.Receipt, string, error) {
			r, err := m.Issue.receipt()
			if err != nil {
				return r, "", err
			}
			return r, m.Issue.ID, nil
		},
		lookup: func(ctx context.Context) (delivery.Receipt, bool, error) { return c.Lookup(ctx, t.ID) }})
}

// fetch runs a query and decodes the answer's data[field] into into. It
// reports whether that field came, non-null and without errors; when it
// did not, the caller reads the outcome with absence.
func (c *Client) fetch(ctx context.Context, body []byte, field string, into any) (bool, answered, error) {
	req := c.request(body)
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return false, answered{}, err
	}
	var out struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []gqlError                 `json:"errors"`
	}
	a := answered{req: req, resp: resp}
	if json.Unmarshal(resp.Body, &out) != nil {
		return false, a, nil
	}
	a.errs = out.Errors
	raw, ok := out.Data[field]
	if len(out.Errors) == 0 && resp.Status/100 == 2 && ok && string(raw) != "null" && json.Unmarshal(raw, into) == nil {
		return true, a, nil
	}
	return false, a, nil
}

// answered is a query's request and answer, for the error made of it.
type answered struct {
	req  httpsend.Request
	resp *httpsend.Response
	errs []gqlError
}

// absence reads a query's answer that did not bring the record: nil when
// it says the record does not exist, else the lookup's error
// (Misconfigured for a refused key, Unknown otherwise).
func (c *Client) absence(a answered) error {
	cl := classify(a.resp, a.errs, false)
	switch {
	case cl == classMisconfigured:
		return c.fail(a.req, a.resp, delivery.Misconfigured, "")
	case cl != classRateLimited && a.resp.Status < 500 && notFound(a.errs):
		return nil
	}
	return c.fail(a.req, a.resp, delivery.Unknown, "neither the record nor an error saying it was not found")
}

// Lookup reads the issue whose id is id.
func (c *Client) Lookup(ctx context.Context, id string) (delivery.Receipt, bool, error) {
	if err := httpsend.CheckLookupID("linear", id); err != nil {
		return delivery.Receipt{}, false, err
	}
	i, found, err := c.readIssue(ctx, lookupQuery, id)
	if err != nil || !found {
		return delivery.Receipt{}, false, err
	}
	r, _ := i.receipt() // readIssue checked it
	return r, true, nil
}

// readIssue reads the issue whose id is id with query (lookupQuery, or
// closeLookupQuery for its state too): (issue, true, nil) when it is the
// ticket's, (nil, false, nil) when Linear says there is none, else an
// error.
func (c *Client) readIssue(ctx context.Context, query, id string) (*issue, bool, error) {
	body, err := json.Marshal(request{Query: query, Variables: map[string]any{"id": id}})
	if err != nil {
		return nil, false, fmt.Errorf("linear lookup: %w", err)
	}
	var i issue
	found, a, err := c.fetch(ctx, body, "issue", &i)
	if err != nil {
		return nil, false, fmt.Errorf("linear lookup: %w", err)
	}
	if found {
		r, err := i.receipt()
		if err == nil && i.ours(id) {
			return &i, true, nil
		}
		if err == nil {
			// issue(id:) also resolves an identifier (ENG-123): an issue
			// with another id is not the ticket's, and not proof of absence.
			return nil, false, fmt.Errorf("linear lookup: %w", c.fail(a.req, a.resp, delivery.Unknown,
				fmt.Sprintf("the lookup of %q answered %s, whose id is %q", id, r.ExternalID, i.ID)))
		}
	}
	if err := c.absence(a); err != nil {
		return nil, false, fmt.Errorf("linear lookup: %w", err)
	}
	return nil, false, nil
}

// CheckDestination verifies the key and the team with one query (viewer
// and team(id:)), creating nothing, and says in one line what it found.
func (c *Client) CheckDestination(ctx context.Context) (string, bool) {
	body, err := json.Marshal(request{Query: checkQuery, Variables: map[string]any{"teamId": c.cfg.TeamID}})
	if err != nil {
		return fmt.Sprintf("delivery check: %v", err), false
	}
	req := c.request(body)
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return fmt.Sprintf("delivery check: the query failed: %v", err), false
	}
	var out struct {
		Data *struct {
			Viewer *struct {
				ID string `json:"id"`
			} `json:"viewer"`
			Team *struct {
				ID   string `json:"id"`
				Key  string `json:"key"`
				Name string `json:"name"`
			} `json:"team"`
		} `json:"data"`
		Errors []gqlError `json:"errors"`
	}
	readable := json.Unmarshal(resp.Body, &out) == nil
	if readable && len(out.Errors) == 0 && resp.Status/100 == 2 && out.Data != nil && out.Data.Viewer != nil && out.Data.Team != nil {
		return fmt.Sprintf("delivery check: Linear accepts the key, and team %s (%s, %q) exists: issues are created there as %s-<number>",
			out.Data.Team.ID, out.Data.Team.Key, out.Data.Team.Name, out.Data.Team.Key), true
	}
	var errs []gqlError
	if readable {
		errs = out.Errors
	}
	switch cl := classify(resp, errs, false); {
	case cl == classMisconfigured:
		return fmt.Sprintf("delivery check: REFUSED: Linear refused the key (HTTP %d%s): make a personal API key under Settings > Security & access and store it as api_key", resp.Status, summary(errs)), false
	case resp.Status < 500 && cl != classRateLimited && notFound(errs):
		return fmt.Sprintf("delivery check: REFUSED: Linear accepts the key but has no team %q visible to it (HTTP %d%s): set the team's id (not its key)", c.cfg.TeamID, resp.Status, summary(errs)), false
	}
	return fmt.Sprintf("delivery check: the query failed: %v", c.fail(req, resp, delivery.Unknown, "")), false
}

func (c *Client) request(body []byte) httpsend.Request {
	h := http.Header{}
	h.Set("Authorization", c.auth)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	return httpsend.Request{Method: http.MethodPost, URL: c.endpoint, Header: h, Body: body}
}

// fail is the *delivery.SendError of an answer, with what we made of it.
// A rate-limited answer is due no earlier than the reset its headers give.
func (c *Client) fail(req httpsend.Request, resp *httpsend.Response, o delivery.Failure, why string) *delivery.SendError {
	se := httpsend.StatusError(req, resp, o)
	se.RetryAfter = max(se.RetryAfter, ResetAfter(resp.Header, c.http.Now()))
	if why != "" {
		se.Err = fmt.Errorf("linear: %s: %w", why, se.Err)
	}
	return se
}

// gqlError is one entry of a GraphQL answer's errors.
type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code                   string `json:"code"`
		Type                   string `json:"type"`
		UserPresentableMessage string `json:"userPresentableMessage"`
	} `json:"extensions"`
}

// code is the error's name as Linear's docs spell it: extensions.code, or
// else the SDK's extensions.type upper-cased with underscores ("invalid
// input" is INVALID_INPUT).
func (e gqlError) code() string {
	s := e.Extensions.Code
	if s == "" {
		s = e.Extensions.Type
	}
	return strings.ToUpper(strings.NewReplacer(" ", "_", "-", "_").Replace(strings.TrimSpace(s)))
}

func (e gqlError) text() string {
	return strings.ToLower(e.Message + " " + e.Extensions.UserPresentableMessage)
}

// class is what an answer that is not a success says.
type class int

const (
	classUnknown       class = iota // may have been created: look up
	classMisconfigured              // the key, its rights, the URL or the plan
	classRateLimited                // refused before running: nothing created
	classRefused                    // the input was refused (or the id exists)
	classExists                     // the id is said to exist
)

// refusedCodes are the codes of a refusal of the request itself.
var refusedCodes = map[string]bool{"INVALID_INPUT": true, "USER_ERROR": true, "GRAPHQL_ERROR": true,
	"FEATURE_NOT_ACCESSIBLE": true, "BAD_USER_INPUT": true, "GRAPHQL_VALIDATION_FAILED": true}

// classify reads an answer that is not a success; create says whether it
// answered a create (a 404 there is a wrong URL).
func classify(resp *httpsend.Response, errs []gqlError, create bool) class {
	codes := map[string]bool{}
	exists := false
	for _, e := range errs {
		codes[e.code()] = true
		t := e.text()
		if strings.Contains(t, "already exists") || strings.Contains(t, "duplicate") ||
			strings.Contains(t, "unique constraint") || strings.Contains(t, "conflict") {
			exists = true
		}
	}
	s := resp.Status
	switch {
	case s == http.StatusUnauthorized || s == http.StatusForbidden || codes["AUTHENTICATION_ERROR"] || codes["FORBIDDEN"] ||
		codes["USAGE_LIMIT_EXCEEDED"] || (create && s == http.StatusNotFound):
		return classMisconfigured
	case s == http.StatusTooManyRequests || codes["RATELIMITED"]:
		return classRateLimited
	case s >= 500:
		return classUnknown
	case exists || codes["CONFLICT"] || s == http.StatusConflict:
		return classExists
	}
	for c := range codes {
		if refusedCodes[c] {
			return classRefused
		}
	}
	if len(errs) == 0 && (s == http.StatusBadRequest || s == http.StatusUnprocessableEntity) {
		return classRefused
	}
	return classUnknown
}

// notFound reports whether errs say the entity asked for does not exist.
func notFound(errs []gqlError) bool {
	for _, e := range errs {
		if c := e.code(); c == "NOT_FOUND" || c == "ENTITY_NOT_FOUND" || strings.Contains(e.text(), "not found") {
			return true
		}
	}
	return false
}

// summary is errs' first message, for a person; "" for none.
func summary(errs []gqlError) string {
	if len(errs) == 0 {
		return ""
	}
	m := errs[0].Extensions.UserPresentableMessage
	if m == "" {
		m = errs[0].Message
	}
	return ": " + httpsend.Excerpt([]byte(m))[2:]
}

// The rate-limit headers: for each budget, what is left and when it
// resets (the SDK's RatelimitedLinearError reads the same names).
var budgets = [][2]string{
	{"X-RateLimit-Requests-Remaining", "X-RateLimit-Requests-Reset"},
	{"X-RateLimit-Complexity-Remaining", "X-RateLimit-Complexity-Reset"},
	{"X-RateLimit-Endpoint-Requests-Remaining", "X-RateLimit-Endpoint-Requests-Reset"},
}

// ResetAfter is how long from now until the rate limits in h reset: the
// latest reset of a spent budget (remaining 0 or less), or of any budget
// when none says it is spent; 0 when no reset is in the future. A reset is
// a Unix timestamp, read as milliseconds above 10^11 and as seconds
// otherwise.
func ResetAfter(h http.Header, now time.Time) time.Duration {
	var spent, any time.Duration
	for _, b := range budgets {
		at, ok := resetAt(h.Get(b[1]))
		if !ok {
			continue
		}
		d := at.Sub(now)
		any = max(any, d)
		if rem, err := strconv.ParseFloat(strings.TrimSpace(h.Get(b[0])), 64); err == nil && rem <= 0 {
			spent = max(spent, d)
		}
	}
	if spent > 0 {
		return spent
	}
	return max(any, 0)
}

func resetAt(v string) (time.Time, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	if n > 1e11 {
		return time.UnixMilli(n), true
	}
	return time.Unix(n, 0), true
}
