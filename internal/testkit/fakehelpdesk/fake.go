package fakehelpdesk

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Kind names a request the fake serves.
type Kind string

// The kinds of requests.
const (
	ZendeskCreate Kind = "zendesk_create" // POST /api/v2/tickets
	ZendeskLookup Kind = "zendesk_lookup" // GET /api/v2/tickets?external_id=
	WebhookCreate Kind = "webhook_create" // POST {webhook}
	WebhookLookup Kind = "webhook_lookup" // GET {webhook}?idempotency_key=
	LinearCreate  Kind = "linear_create"  // POST /graphql, issueCreate
	LinearLookup  Kind = "linear_lookup"  // POST /graphql, issue(id:)
	LinearQuery   Kind = "linear_query"   // POST /graphql, viewer and team(id:)
	// The follow-ups' requests.
	ZendeskUpdate        Kind = "zendesk_update"         // PUT /api/v2/tickets/{id}
	ZendeskShow          Kind = "zendesk_show"           // GET /api/v2/tickets/{id}
	ZendeskAudits        Kind = "zendesk_audits"         // GET /api/v2/tickets/{id}/audits
	LinearCommentCreate  Kind = "linear_comment_create"  // POST /graphql, commentCreate
	LinearCommentLookup  Kind = "linear_comment_lookup"  // POST /graphql, comment(id:)
	LinearIssueUpdate    Kind = "linear_issue_update"    // POST /graphql, issueUpdate
	LinearWorkflowStates Kind = "linear_workflow_states" // POST /graphql, team(id:) { states }
	Other                Kind = "other"                  // anything else (answered 404)
)

// Defaults of Config.
const (
	DefaultEmail       = "agent@example.test"
	DefaultToken       = "zendesk-test-token"
	DefaultSecret      = "whsec_ZmFrZWhlbHBkZXNrLXdlYmhvb2stdGVzdC1rZXktMzI=" //nolint:gosec // a test fixture, not a credential
	DefaultKeyTTL      = 2 * time.Hour
	DefaultWebhookPath = "/hook"
	// DefaultAuditPageSize is the most audits a page of the Zendesk
	// listing holds: small, so that every lookup of a follow-up pages
	// (Zendesk's own limit is 100).
	DefaultAuditPageSize = 2
)

// Config configures a Server; zero fields take the defaults above.
type Config struct {
	Email, Token string        // Zendesk Basic credentials it accepts
	Secret       string        // the webhook's Standard Webhooks secret (whsec_ and base64)
	KeyTTL       time.Duration // how long an idempotency key is remembered
	WebhookPath  string        // path of the webhook endpoint
	// LinearKey is the Linear API key it accepts (the Authorization
	// header's whole value), LinearTeamID and LinearTeamKey its one team.
	LinearKey, LinearTeamID, LinearTeamKey string
	// RejectReplays answers 409 to an exact replay of a webhook request
	// (the same id, timestamp and signature seen before); without it a
	// replay is only counted (Replays). Off by default because signatures
	// are per second: a test that drives the engine on a virtual clock
	// sends many requests for one ticket within one real second.
	RejectReplays bool
	// AuditPageSize caps the audits of one page of the Zendesk audits
	// listing, whatever page[size] asks (DefaultAuditPageSize when zero).
	AuditPageSize int
}

// Fault is what the fake does instead of (or after) its normal handling.
type Fault struct {
	// Commit stores the ticket first, as the normal handling would, then
	// fails as below. Without it nothing is stored.
	Commit bool
	// Delay waits this long (real time) before answering, or before
	// dropping; alone, it delays the normal handling. The wait ends early
	// when the client goes away.
	Delay time.Duration
	// Drop closes the connection without answering.
	Drop bool
	// Status answers this status instead of the normal answer (0: the
	// normal answer), with RetryAfter as Retry-After when set and Body.
	Status     int
	RetryAfter string
	Body       string
	// CommitAfter holds a create and stores it this long (real time)
	// after the request arrived, whether or not the client is still
	// waiting; a client still waiting then gets the normal answer. Until
	// then lookups do not see it and another create under the same key
	// answers 409. On a lookup it only delays the answer. It overrides the
	// fields above.
	CommitAfter time.Duration
	// CommitUnlockedAfter holds a create and stores it once the fake's
	// clock (Advance included) has moved this long past its arrival,
	// whether or not its client is still waiting (a client that waits
	// gets no answer). It takes no lock on the key: the key is checked on
	// arrival only, so a create under the same key before the commit is
	// handled as if this one had not arrived (no 409), and this one still
	// stores its own ticket when it commits. It overrides the fields above.
	CommitUnlockedAfter time.Duration
	// RateLimit, with Status, answers Linear's RATELIMITED error with its
	// X-RateLimit-* headers instead of Body (see LinearRateLimited).
	RateLimit *RateLimit
}

// LateCommit holds a create and commits it d after it arrived, even when
// the client has given up by then: the helpdesk that finishes a create its
// client timed out on.
func LateCommit(d time.Duration) Fault { return Fault{CommitAfter: d} }

// LateCommitUnlocked is a receiver that checks the key when a create
// arrives and commits it d later on the fake's clock, with no lock on keys
// in flight: it never answers 409 while the create is committing, and a
// second create under the key meanwhile makes a second ticket.
func LateCommitUnlocked(d time.Duration) Fault { return Fault{CommitUnlockedAfter: d} }

// Forbidden answers 403, storing nothing: a token without the right to
// make this request.
func Forbidden() Fault {
	return Fault{Status: http.StatusForbidden, Body: `{"error":"Forbidden","description":"You do not have access to this page"}`}
}

// CommitThenDrop stores the ticket, then closes the connection unanswered.
func CommitThenDrop() Fault { return Fault{Commit: true, Drop: true} }

// Drop closes the connection unanswered, storing nothing.
func Drop() Fault { return Fault{Drop: true} }

// CommitThenStatus stores the ticket, then answers status (a 5xx, say).
func CommitThenStatus(status int) Fault {
	return Fault{Commit: true, Status: status, Body: `{"error":"InternalError"}`}
}

// CommitThenSlow stores the ticket, then answers normally after d.
func CommitThenSlow(d time.Duration) Fault { return Fault{Commit: true, Delay: d} }

// TooManyRequests answers 429 with Retry-After, storing nothing.
func TooManyRequests(retryAfter string) Fault {
	return Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfter, Body: `{"error":"TooManyRequests"}`}
}

// Unavailable answers 503 with Retry-After, storing nothing.
func Unavailable(retryAfter string) Fault {
	return Fault{Status: http.StatusServiceUnavailable, RetryAfter: retryAfter, Body: `{"error":"Unavailable"}`}
}

// InProgress answers 409, storing nothing.
func InProgress() Fault {
	return Fault{Status: http.StatusConflict, Body: `{"error":"InProgress"}`}
}

// Refuse answers status (400, 422, ...) as a permanent refusal.
func Refuse(status int) Fault {
	return Fault{Status: status, Body: `{"error":"RecordInvalid","description":"Record validation errors"}`}
}

// IdempotentRequestError answers Zendesk's 400 for a reused key.
func IdempotentRequestError() Fault {
	return Fault{Status: http.StatusBadRequest, Body: idempotentRequestError}
}

const idempotentRequestError = `{"error":"IdempotentRequestError","description":"Request with the same idempotency key and different body was received"}`

// Rule says which requests a Fault applies to.
type Rule struct {
	Kind  Kind
	N     int    // the N-th request of Kind (from 1); 0 for any
	Key   string // only requests under this key; "" for any
	Times int    // how many matching requests it applies to; 0 means 1
	Fault Fault
}

type rule struct {
	Rule
	left int
}

// heldCreate is a create held by CommitUnlockedAfter until the fake's
// clock reaches at.
type heldCreate struct {
	kind       Kind
	ctype, key string
	body       []byte
	at         time.Time
}

// Received is one request as the fake received it.
type Received struct {
	Kind     Kind
	N        int // its number among requests of its Kind, from 1
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
}

type zTicket struct {
	id         int64
	status     string // new, open, pending, hold, solved or closed
	externalID string
	subject    string
	body       string
	priority   string
	createdAt  time.Time
	committed  time.Time // on the fake clock, for lookup lag
	hidden     int       // lookups still to answer without it
}

type idem struct {
	sum    [32]byte
	at     time.Time
	status int
	answer []byte
}

// Server is a running fake helpdesk.
type Server struct {
	srv *httptest.Server
	cfg Config

	verifier *standardwebhooks.Webhook
	closing  chan struct{} // closed by Close: held creates stop waiting
	once     sync.Once

	mu       sync.Mutex
	offset   time.Duration // the fake's clock minus the real one
	revoked  bool
	seen     map[string]time.Time // webhook id, timestamp and signature -> timestamp
	replays  int
	late     []*time.Timer
	reply    Reply
	lagN     int
	lagDelay time.Duration
	rules    []*rule
	counts   map[Kind]int
	conns    int
	received []Received
	inflight map[string]bool // kind-prefixed key -> being processed
	unlocked []heldCreate    // creates held by CommitUnlockedAfter, by commit time
	zNextID  int64
	zTickets []*zTicket
	zKeys    map[string]*idem
	wNextID  int
	wTickets []*wTicket
	wKeys    map[string]*idem
	lNextNum int
	lIssues  []*lIssue
	lDup     Duplicate
	// The follow-ups' state.
	zAuditID  int64
	zAudits   []*zAudit
	zListings int // audits listings begun, numbering them
	lComments []*lComment
	order     map[string][]string // ticket id -> what the helpdesk committed of it, in order
}

// New starts a fake helpdesk on a loopback port; it is closed when tb
// ends. With a nil tb (in an example, say) the caller closes it.
func New(tb testing.TB, cfg Config) *Server {
	if tb != nil {
		tb.Helper()
	}
	cfg.Email = cmp.Or(cfg.Email, DefaultEmail)
	cfg.Token = cmp.Or(cfg.Token, DefaultToken)
	cfg.Secret = cmp.Or(cfg.Secret, DefaultSecret)
	if cfg.KeyTTL <= 0 {
		cfg.KeyTTL = DefaultKeyTTL
	}
	cfg.WebhookPath = cmp.Or(cfg.WebhookPath, DefaultWebhookPath)
	if cfg.AuditPageSize <= 0 {
		cfg.AuditPageSize = DefaultAuditPageSize
	}
	cfg.LinearKey = cmp.Or(cfg.LinearKey, DefaultLinearKey)
	cfg.LinearTeamID = cmp.Or(cfg.LinearTeamID, DefaultLinearTeamID)
	cfg.LinearTeamKey = cmp.Or(cfg.LinearTeamKey, DefaultLinearTeamKey)
	verifier, err := standardwebhooks.NewWebhook(cfg.Secret)
	if err != nil {
		panic(fmt.Sprintf("fakehelpdesk: Config.Secret is not whsec_ followed by base64: %v", err))
	}
	s := &Server{cfg: cfg, verifier: verifier, closing: make(chan struct{}), counts: map[Kind]int{},
		inflight: map[string]bool{}, seen: map[string]time.Time{},
		zNextID: 1000, zKeys: map[string]*idem{}, wKeys: map[string]*idem{}, order: map[string][]string{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.srv.Start()
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

// Close shuts the server down; it waits for pending answers. Creates held
// by LateCommit and not yet committed are dropped.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		for _, t := range s.late {
			t.Stop()
		}
		s.mu.Unlock()
		close(s.closing)
	})
	s.srv.Close()
}

// URL is the server's base URL: the Zendesk "url".
func (s *Server) URL() string { return s.srv.URL }

// WebhookURL is the webhook endpoint's URL.
func (s *Server) WebhookURL() string { return s.srv.URL + s.cfg.WebhookPath }

// ZendeskAuthorization is the Authorization header the Zendesk side
// accepts: Basic over "{email}/token:{token}", Zendesk's API-token form,
// from Config's Email and Token.
func (s *Server) ZendeskAuthorization() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(s.cfg.Email+"/token:"+s.cfg.Token))
}

// Config is the configuration in force, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Now reads the fake's clock: the real clock plus every Advance so far.
// Key lifetimes, lookup lag and the webhook's timestamp tolerance are
// measured on it; a client that signs webhooks for a test that calls
// Advance takes it as its clock.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nowLocked()
}

func (s *Server) nowLocked() time.Time { return time.Now().Add(s.offset) }

// Advance moves the fake's clock forward by d.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	s.offset += d
	s.mu.Unlock()
	s.commitDue()
}

// commitDue stores the creates held by CommitUnlockedAfter whose time has
// come on the fake's clock, each as a ticket of its own.
func (s *Server) commitDue() {
	s.mu.Lock()
	now := s.nowLocked()
	var due []heldCreate
	kept := s.unlocked[:0]
	for _, h := range s.unlocked {
		if now.Before(h.at) {
			kept = append(kept, h)
		} else {
			due = append(due, h)
		}
	}
	s.unlocked = kept
	s.mu.Unlock()
	for _, h := range due {
		switch h.kind {
		case ZendeskCreate:
			s.zendeskCreate(h.ctype, h.key, h.body, true)
		case WebhookCreate:
			s.webhookCreate(h.key, h.body, true)
		case LinearCreate:
			s.linearCreate(h.body, true)
		}
	}
}

// holdUnlocked carries out CommitUnlockedAfter for a create: the key is
// checked on arrival (a known key is answered from its record), and the create
// is stored once the fake's clock has moved d on. The client is never
// answered: it waits until it gives up.
func (s *Server) holdUnlocked(w http.ResponseWriter, r *http.Request, kind Kind, key string, body []byte, d time.Duration) {
	ctype := r.Header.Get("Content-Type")
	s.mu.Lock()
	keys := s.zKeys
	if kind == WebhookCreate {
		keys = s.wKeys
	}
	_, known := s.liveKey(keys, key, s.nowLocked())
	if kind == LinearCreate {
		known = s.linearIssue(key) != nil
	}
	if !known {
		s.unlocked = append(s.unlocked, heldCreate{kind: kind, ctype: ctype, key: key, body: body, at: s.nowLocked().Add(d)})
	}
	s.mu.Unlock()
	if known {
		write(w, s.handle(kind, r, key, body))
		return
	}
	select {
	case <-r.Context().Done():
	case <-s.closing:
	}
}

// SetRevoked revokes the credentials the fake accepts (or restores them):
// while revoked, every Zendesk request answers 401 as for a bad token, and
// every webhook request 401 as for a bad signature.
func (s *Server) SetRevoked(revoked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = revoked
}

// Replays is the number of exact replays of webhook requests received
// (refused with 409 under Config.RejectReplays).
func (s *Server) Replays() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replays
}

// SetWebhookReply chooses the shape of the webhook's 2xx answers.
func (s *Server) SetWebhookReply(r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply = r
}

// SetLookupLag makes tickets committed from now on invisible to lookups
// for their first n lookups and until delay has passed on the fake's clock
// since their commit (both must be over).
func (s *Server) SetLookupLag(n int, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lagN, s.lagDelay = n, delay
}

// Script adds a failure rule. Rules are tried in the order added; the
// first that matches a request, with uses left, applies to it.
func (s *Server) Script(r Rule) {
	if r.Times <= 0 {
		r.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{Rule: r, left: r.Times})
}

// Held is the number of records held under key: Zendesk tickets whose
// external_id is key, webhook requests (tickets and effects) created under
// the key, Linear issues and comments whose id is key, and Zendesk audits
// whose custom metadata carries key as comment_id or close_id.
func (s *Server) Held(key string) int {
	s.commitDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.zTickets {
		if t.externalID == key {
			n++
		}
	}
	for _, t := range s.wTickets {
		if t.key == key {
			n++
		}
	}
	for _, i := range s.lIssues {
		if i.id == key {
			n++
		}
	}
	for _, a := range s.zAudits {
		if a.effectID() == key {
			n++
		}
	}
	for _, c := range s.lComments {
		if c.id == key {
			n++
		}
	}
	return n
}

// Total is the number of tickets held, both sides together.
func (s *Server) Total() int {
	s.commitDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.zTickets) + len(s.wTickets) + len(s.lIssues)
}

// Requests is the number of requests of kind received.
func (s *Server) Requests(kind Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[kind]
}

// InFlight is the number of creates being processed (a slow answer
// pending, for instance); a create under the same key meanwhile gets 409.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// Connections is the number of connections accepted.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Received lists the requests received, in order.
func (s *Server) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

// Order is what the helpdesk committed of the ticket whose delivery key is
// ticketID, in the order committed, each entry once per commit (so a
// duplicate shows twice): "create" for the ticket; "comment:<comment_id>"
// for a comment (Zendesk: an update carrying comment_id in its metadata;
// Linear: a commentCreate on the issue, a close's resolution included;
// webhook: a "comment.created" body); "close:<close_id>" for a close
// (Zendesk: an update carrying close_id; webhook: a "ticket.closed"
// body); "state:<type>" for a Linear issueUpdate that moved the issue to
// a workflow state of that type; and "<type>:<key>" for a webhook body of
// any other type.
func (s *Server) Order(ticketID string) []string {
	s.commitDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order[ticketID])
}

// record appends what was committed of ticketID to its order; s.mu is
// held.
func (s *Server) record(ticketID, what string) {
	if ticketID != "" {
		s.order[ticketID] = append(s.order[ticketID], what)
	}
}

func isZendesk(k Kind) bool {
	switch k {
	case ZendeskCreate, ZendeskLookup, ZendeskUpdate, ZendeskShow, ZendeskAudits:
		return true
	}
	return false
}

// AddZendeskTicket stores a Zendesk ticket under externalID with the given
// creation time, as if created earlier by someone else; it returns its id.
// Ids grow, so adding an older createdAt after a newer one gives a list
// whose id order and date order disagree.
func (s *Server) AddZendeskTicket(externalID string, createdAt time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zNextID++
	s.zTickets = append(s.zTickets, &zTicket{id: s.zNextID, status: "new", externalID: externalID,
		subject: "added by hand", body: "added by hand", priority: "normal", createdAt: createdAt.UTC(), committed: s.nowLocked()})
	return s.zNextID
}

func (s *Server) kindOf(r *http.Request, body []byte) Kind {
	switch {
	case r.URL.Path == "/graphql" && r.Method == http.MethodPost:
		return linearKind(body)
	case r.URL.Path == "/api/v2/tickets" && r.Method == http.MethodPost:
		return ZendeskCreate
	case r.URL.Path == "/api/v2/tickets" && r.Method == http.MethodGet:
		return ZendeskLookup
	case strings.HasPrefix(r.URL.Path, "/api/v2/tickets/"):
		return zendeskTicketKind(r)
	case r.URL.Path == s.cfg.WebhookPath && r.Method == http.MethodPost:
		return WebhookCreate
	case r.URL.Path == s.cfg.WebhookPath && r.Method == http.MethodGet:
		return WebhookLookup
	}
	return Other
}

func keyOf(kind Kind, r *http.Request, body []byte) string {
	switch kind {
	case LinearCreate, LinearLookup, LinearCommentCreate, LinearCommentLookup, LinearIssueUpdate:
		return linearKey(kind, body)
	case ZendeskUpdate:
		return zendeskUpdateKey(body)
	case ZendeskShow, ZendeskAudits:
		id, _ := zendeskTicketPath(r.URL.Path)
		return id
	case ZendeskCreate, WebhookCreate:
		return r.Header.Get("Idempotency-Key")
	case ZendeskLookup:
		return r.URL.Query().Get("external_id")
	case WebhookLookup:
		return r.URL.Query().Get("idempotency_key")
	}
	return ""
}

// answer is a prepared response.
type answer struct {
	status     int
	retryAfter string
	header     http.Header // more headers, nil for none
	ctype      string
	body       []byte
}

func jsonAnswer(status int, body string) answer {
	return answer{status: status, ctype: "application/json", body: []byte(body)}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away mid-request
	}
	kind := s.kindOf(r, body)
	key := keyOf(kind, r, body)

	s.mu.Lock()
	s.counts[kind]++
	n := s.counts[kind]
	s.received = append(s.received, Received{Kind: kind, N: n, Method: r.Method, Path: r.URL.Path,
		RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()

	if kind == Other {
		write(w, jsonAnswer(http.StatusNotFound, `{"error":"InvalidEndpoint"}`))
		return
	}
	if a, ok := s.authenticate(kind, r, body); !ok {
		write(w, a)
		return
	}

	s.commitDue()
	s.mu.Lock()
	fault, scripted := s.match(kind, n, key)
	if scripted && fault.CommitUnlockedAfter > 0 && key != "" && (kind == ZendeskCreate || kind == WebhookCreate || kind == LinearCreate) {
		s.mu.Unlock()
		s.holdUnlocked(w, r, kind, key, body, fault.CommitUnlockedAfter)
		return
	}
	// Only creates are exclusive per key; lookups run side by side.
	exclusive := key != "" && (kind == ZendeskCreate || kind == WebhookCreate || kind == LinearCreate)
	busy := exclusive && s.inflight[string(kind)+" "+key]
	if exclusive && !busy {
		s.inflight[string(kind)+" "+key] = true
	}
	s.mu.Unlock()
	// release frees the key once this request is done with it: before a
	// dropped connection closes (the client may resend at once), else when
	// the handler returns, before net/http sends the answer.
	release := func() {}
	if exclusive && !busy && !(scripted && fault.CommitAfter > 0) {
		release = sync.OnceFunc(func() { s.release(kind, key) })
		defer release()
	}

	if scripted && fault.CommitAfter > 0 {
		if exclusive && !busy {
			s.commitLate(w, r, kind, key, body, arrived.Add(fault.CommitAfter))
			return
		}
		// A lookup, or a create that will get 409: only delayed.
		fault = Fault{Delay: time.Until(arrived.Add(fault.CommitAfter))}
	}
	if scripted && !fault.Commit {
		if fault.Drop || fault.Status != 0 {
			s.fail(w, r, fault, answer{}, release)
			return
		}
		// Only a delay: wait, then handle the request as usual.
		if !wait(r, fault.Delay) {
			return
		}
		scripted = false
	}
	if busy {
		write(w, jsonAnswer(http.StatusConflict, `{"error":"InProgress","description":"a request with this idempotency key is being processed"}`))
		return
	}
	a := s.handle(kind, r, key, body)
	if scripted {
		s.fail(w, r, fault, a, release)
		return
	}
	write(w, a)
}

// handle is the normal handling of an authenticated request.
func (s *Server) handle(kind Kind, r *http.Request, key string, body []byte) answer {
	ctype, path, rawQuery := r.Header.Get("Content-Type"), r.URL.Path, r.URL.RawQuery
	switch kind {
	case ZendeskCreate:
		return s.zendeskCreate(ctype, key, body, false)
	case ZendeskLookup:
		return s.zendeskLookup(key)
	case WebhookCreate:
		return s.webhookCreate(key, body, false)
	case WebhookLookup:
		return s.webhookLookup(key)
	case LinearCreate:
		return s.linearCreate(body, false)
	case LinearLookup:
		return s.linearLookup(key)
	case LinearQuery:
		return s.linearQuery(body)
	case ZendeskUpdate, ZendeskShow, ZendeskAudits:
		return s.zendeskFollowup(kind, path, rawQuery, ctype, body)
	case LinearCommentCreate:
		return s.linearCommentCreate(body)
	case LinearCommentLookup:
		return s.linearComment(key)
	case LinearIssueUpdate:
		return s.linearIssueUpdate(body)
	case LinearWorkflowStates:
		return s.linearWorkflowStates(body)
	}
	return jsonAnswer(http.StatusNotFound, `{"error":"InvalidEndpoint"}`)
}

// release ends the processing of a create under key.
func (s *Server) release(kind Kind, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, string(kind)+" "+key)
}

// commitLate stores a held create at the given (real) time, whether or
// not its client is still there, and answers the client if it waited. The
// key stays in flight until the commit.
func (s *Server) commitLate(w http.ResponseWriter, r *http.Request, kind Kind, key string, body []byte, at time.Time) {
	done := make(chan answer, 1)
	s.mu.Lock()
	s.late = append(s.late, time.AfterFunc(time.Until(at), func() {
		a := s.handle(kind, r, key, body)
		s.release(kind, key)
		done <- a
	}))
	s.mu.Unlock()
	select {
	case a := <-done:
		write(w, a)
	case <-r.Context().Done():
	case <-s.closing:
	}
}

// match finds and consumes the first rule for a request; s.mu is held.
func (s *Server) match(kind Kind, n int, key string) (Fault, bool) {
	for _, ru := range s.rules {
		if ru.left > 0 && ru.Kind == kind && (ru.N == 0 || ru.N == n) && (ru.Key == "" || ru.Key == key) {
			ru.left--
			return ru.Fault, true
		}
	}
	return Fault{}, false
}

// fail carries out a fault; normal is the answer the request would have
// had, and release frees the request's key before a dropped connection
// closes.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, f Fault, normal answer, release func()) {
	if !wait(r, f.Delay) {
		return
	}
	if f.Drop {
		conn, _, err := http.NewResponseController(w).Hijack()
		release()
		if err == nil {
			conn.Close()
		}
		return
	}
	if f.Status != 0 {
		a := jsonAnswer(f.Status, f.Body)
		a.retryAfter = f.RetryAfter
		if f.RateLimit != nil {
			a = s.rateLimited(f.Status, *f.RateLimit)
		}
		write(w, a)
		return
	}
	write(w, normal)
}

// wait sleeps d, or until the client goes away (then it reports false).
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func write(w http.ResponseWriter, a answer) {
	if a.ctype != "" && len(a.body) > 0 {
		w.Header().Set("Content-Type", a.ctype)
	}
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body) // a client that left is the client's problem
}

// authenticate checks Basic auth (Zendesk) or the signature (webhook).
func (s *Server) authenticate(kind Kind, r *http.Request, body []byte) (answer, bool) {
	s.mu.Lock()
	revoked := s.revoked
	s.mu.Unlock()
	switch {
	case revoked && isZendesk(kind):
		return jsonAnswer(http.StatusUnauthorized, `{"error":"Couldn't authenticate you"}`), false
	case revoked && isLinear(kind):
		return linearUnauthenticated(), false
	case revoked:
		return jsonAnswer(http.StatusUnauthorized, `{"error":"bad signature"}`), false
	}
	switch kind {
	case ZendeskCreate, ZendeskLookup, ZendeskUpdate, ZendeskShow, ZendeskAudits:
		if !hmac.Equal([]byte(r.Header.Get("Authorization")), []byte(s.ZendeskAuthorization())) {
			return jsonAnswer(http.StatusUnauthorized, `{"error":"Couldn't authenticate you"}`), false
		}
	case WebhookCreate:
		if a, ok := s.signed(r, body); !ok {
			return a, false
		}
		if k := r.Header.Get("Idempotency-Key"); k != "" && k != r.Header.Get("webhook-id") {
			return jsonAnswer(http.StatusBadRequest, `{"error":"Idempotency-Key differs from the signed webhook-id"}`), false
		}
	case LinearCreate, LinearLookup, LinearQuery, LinearCommentCreate, LinearCommentLookup, LinearIssueUpdate, LinearWorkflowStates:
		if !hmac.Equal([]byte(r.Header.Get("Authorization")), []byte(s.cfg.LinearKey)) {
			return linearUnauthenticated(), false
		}
	case WebhookLookup:
		keys := r.URL.Query()["idempotency_key"]
		if len(keys) == 0 {
			return jsonAnswer(http.StatusBadRequest, `{"error":"idempotency_key missing"}`), false
		}
		key := keys[len(keys)-1]
		if a, ok := s.signed(r, []byte("idempotency_key="+key)); !ok {
			return a, false
		}
		if key != r.Header.Get("webhook-id") {
			return jsonAnswer(http.StatusBadRequest, `{"error":"idempotency_key differs from the signed webhook-id"}`), false
		}
	}
	return answer{}, true
}

// --- Zendesk ---

type zCreate struct {
	Ticket *struct {
		Subject string `json:"subject"`
		Comment struct {
			Body string `json:"body"`
		} `json:"comment"`
		Priority   string `json:"priority"`
		ExternalID string `json:"external_id"`
	} `json:"ticket"`
}

// zendeskCreate creates a Zendesk ticket, answered from the key's record
// when the key is known, unless unlocked (a create whose key was checked
// on arrival, by CommitUnlockedAfter): that one stores its ticket anyway.
func (s *Server) zendeskCreate(ctype, key string, body []byte, unlocked bool) answer {
	var req zCreate
	if err := json.Unmarshal(body, &req); err != nil || req.Ticket == nil ||
		!strings.HasPrefix(ctype, "application/json") {
		return jsonAnswer(http.StatusBadRequest, `{"error":"InvalidJSON"}`)
	}
	if req.Ticket.Comment.Body == "" {
		return jsonAnswer(http.StatusUnprocessableEntity, `{"error":"RecordInvalid","details":{"base":[{"description":"Description: cannot be blank"}]}}`)
	}
	sum := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	if key != "" && !unlocked {
		if e, ok := s.liveKey(s.zKeys, key, now); ok {
			if e.sum != sum {
				return jsonAnswer(http.StatusBadRequest, idempotentRequestError)
			}
			return answer{status: e.status, ctype: "application/json", body: e.answer}
		}
	}
	s.zNextID++
	t := &zTicket{id: s.zNextID, status: "new", externalID: req.Ticket.ExternalID, subject: req.Ticket.Subject,
		body: req.Ticket.Comment.Body, priority: req.Ticket.Priority, createdAt: now.UTC(),
		committed: now, hidden: s.lagN}
	s.zTickets = append(s.zTickets, t)
	s.addAudit(t, nil)
	s.record(t.externalID, "create")
	out, _ := json.Marshal(map[string]any{"ticket": s.zJSON(t)})
	if _, ok := s.zKeys[key]; key != "" && !(unlocked && ok) {
		s.zKeys[key] = &idem{sum: sum, at: now, status: http.StatusCreated, answer: out}
	}
	return answer{status: http.StatusCreated, ctype: "application/json", body: out}
}

func (s *Server) zJSON(t *zTicket) map[string]any {
	return map[string]any{
		"id": t.id, "url": fmt.Sprintf("%s/api/v2/tickets/%d.json", s.srv.URL, t.id),
		"external_id": t.externalID, "subject": t.subject, "description": t.body,
		"priority": t.priority, "status": t.status,
		"created_at": t.createdAt.Format(time.RFC3339), "updated_at": t.createdAt.Format(time.RFC3339),
	}
}

// visible applies the lookup lag to one ticket; s.mu is held.
func (s *Server) visible(committed time.Time, hidden *int) bool {
	if *hidden > 0 {
		*hidden--
		return false
	}
	return !s.nowLocked().Before(committed.Add(s.lagDelay))
}

func (s *Server) zendeskLookup(externalID string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := []map[string]any{}
	for i := len(s.zTickets) - 1; i >= 0; i-- { // newest first
		t := s.zTickets[i]
		if t.externalID == externalID && s.visible(t.committed, &t.hidden) {
			list = append(list, s.zJSON(t))
		}
	}
	out, _ := json.Marshal(map[string]any{"tickets": list, "count": len(list), "next_page": nil, "previous_page": nil})
	return answer{status: http.StatusOK, ctype: "application/json", body: out}
}

// liveKey is key's record in keys, if the helpdesk still remembers it at
// now (within KeyTTL of its first use). The caller holds s.mu.
func (s *Server) liveKey(keys map[string]*idem, key string, now time.Time) (*idem, bool) {
	e, ok := keys[key]
	if !ok || !now.Before(e.at.Add(s.cfg.KeyTTL)) {
		return nil, false
	}
	return e, true
}
