package fakehelpdesk

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kind names a request the fake serves.
type Kind string

// The kinds of requests.
const (
	ZendeskCreate Kind = "zendesk_create" // POST /api/v2/tickets
	ZendeskLookup Kind = "zendesk_lookup" // GET /api/v2/tickets?external_id=
	WebhookCreate Kind = "webhook_create" // POST {webhook}
	WebhookLookup Kind = "webhook_lookup" // GET {webhook}?idempotency_key=
	Other         Kind = "other"          // anything else (answered 404)
)

// Defaults of Config.
const (
	DefaultEmail       = "agent@example.test"
	DefaultToken       = "zendesk-test-token"
	DefaultSecret      = "webhook-test-secret" //nolint:gosec // a test fixture, not a credential
	DefaultKeyTTL      = 2 * time.Hour
	DefaultWebhookPath = "/hook"
)

// DefaultStart is where the fake's clock starts.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Config configures a Server; zero fields take the defaults above.
type Config struct {
	Email, Token string        // Zendesk Basic credentials it accepts
	Secret       string        // the webhook's HMAC key
	KeyTTL       time.Duration // how long an idempotency key is remembered
	Start        time.Time     // the fake clock's start
	WebhookPath  string        // path of the webhook endpoint
}

// Reply is the shape of the webhook's 2xx answers.
type Reply int

// Webhook answer shapes.
const (
	ReplyStringID Reply = iota // 201 {"id":"WH-1","url":"{base}/tickets/WH-1"}
	ReplyNumberID              // 201 {"id":1,"url":"{base}/tickets/1"}
	ReplyNoURL                 // 201 {"id":"WH-1"}
	ReplyNoID                  // 201 {"status":"accepted"}
	ReplyEmpty                 // 204, no body
	ReplyText                  // 200 text/plain "ok"
)

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
	externalID string
	subject    string
	body       string
	priority   string
	createdAt  time.Time
	committed  time.Time // on the fake clock, for lookup lag
	hidden     int       // lookups still to answer without it
}

type wTicket struct {
	id        int
	key       string
	committed time.Time
	hidden    int
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

	mu       sync.Mutex
	now      time.Time
	reply    Reply
	lagN     int
	lagDelay time.Duration
	rules    []*rule
	counts   map[Kind]int
	conns    int
	received []Received
	inflight map[string]bool // kind-prefixed key -> being processed
	zNextID  int64
	zTickets []*zTicket
	zKeys    map[string]*idem
	wNextID  int
	wTickets []*wTicket
	wKeys    map[string]*idem
}

// New starts a fake helpdesk on a loopback port; it is closed when tb
// ends. With a nil tb (in an example, say) the caller closes it.
func New(tb testing.TB, cfg Config) *Server {
	if tb != nil {
		tb.Helper()
	}
	if cfg.Email == "" {
		cfg.Email = DefaultEmail
	}
	if cfg.Token == "" {
		cfg.Token = DefaultToken
	}
	if cfg.Secret == "" {
		cfg.Secret = DefaultSecret
	}
	if cfg.KeyTTL <= 0 {
		cfg.KeyTTL = DefaultKeyTTL
	}
	if cfg.Start.IsZero() {
		cfg.Start = DefaultStart
	}
	if cfg.WebhookPath == "" {
		cfg.WebhookPath = DefaultWebhookPath
	}
	s := &Server{cfg: cfg, now: cfg.Start, counts: map[Kind]int{}, inflight: map[string]bool{},
		zNextID: 1000, zKeys: map[string]*idem{}, wKeys: map[string]*idem{}}
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

// Close shuts the server down; it waits for pending answers.
func (s *Server) Close() { s.srv.Close() }

// URL is the server's base URL: the Zendesk "url".
func (s *Server) URL() string { return s.srv.URL }

// WebhookURL is the webhook endpoint's URL.
func (s *Server) WebhookURL() string { return s.srv.URL + s.cfg.WebhookPath }

// Config is the configuration in force, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Now reads the fake's clock.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the fake's clock forward.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
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

// Held is the number of tickets held under key: Zendesk tickets whose
// external_id is key plus webhook tickets created under the key.
func (s *Server) Held(key string) int {
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
	return n
}

// Total is the number of tickets held, both sides together.
func (s *Server) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.zTickets) + len(s.wTickets)
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

// AddZendeskTicket stores a Zendesk ticket under externalID with the given
// creation time, as if created earlier by someone else; it returns its id.
// Ids grow, so adding an older createdAt after a newer one gives a list
// whose id order and date order disagree.
func (s *Server) AddZendeskTicket(externalID string, createdAt time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zNextID++
	s.zTickets = append(s.zTickets, &zTicket{id: s.zNextID, externalID: externalID,
		subject: "added by hand", body: "added by hand", priority: "normal", createdAt: createdAt.UTC(), committed: s.now})
	return s.zNextID
}

func (s *Server) kindOf(r *http.Request) Kind {
	switch {
	case r.URL.Path == "/api/v2/tickets" && r.Method == http.MethodPost:
		return ZendeskCreate
	case r.URL.Path == "/api/v2/tickets" && r.Method == http.MethodGet:
		return ZendeskLookup
	case r.URL.Path == s.cfg.WebhookPath && r.Method == http.MethodPost:
		return WebhookCreate
	case r.URL.Path == s.cfg.WebhookPath && r.Method == http.MethodGet:
		return WebhookLookup
	}
	return Other
}

func keyOf(kind Kind, r *http.Request) string {
	switch kind {
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
	ctype      string
	body       []byte
}

func jsonAnswer(status int, body string) answer {
	return answer{status: status, ctype: "application/json", body: []byte(body)}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away mid-request
	}
	kind := s.kindOf(r)
	key := keyOf(kind, r)

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

	s.mu.Lock()
	fault, scripted := s.match(kind, n, key)
	// Only creates are exclusive per key; lookups run side by side.
	exclusive := key != "" && (kind == ZendeskCreate || kind == WebhookCreate)
	busy := exclusive && s.inflight[string(kind)+" "+key]
	if exclusive && !busy {
		s.inflight[string(kind)+" "+key] = true
	}
	s.mu.Unlock()
	if exclusive && !busy {
		defer func() {
			s.mu.Lock()
			delete(s.inflight, string(kind)+" "+key)
			s.mu.Unlock()
		}()
	}

	if scripted && !fault.Commit {
		if fault.Drop || fault.Status != 0 {
			s.fail(w, r, fault, answer{})
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
	var a answer
	switch kind {
	case ZendeskCreate:
		a = s.zendeskCreate(r, key, body)
	case ZendeskLookup:
		a = s.zendeskLookup(key)
	case WebhookCreate:
		a = s.webhookCreate(key, body)
	case WebhookLookup:
		a = s.webhookLookup(key)
	}
	if scripted {
		s.fail(w, r, fault, a)
		return
	}
	write(w, a)
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

// fail carries out a fault; normal is the answer the request would have had.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, f Fault, normal answer) {
	if !wait(r, f.Delay) {
		return
	}
	if f.Drop {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if f.Status != 0 {
		a := jsonAnswer(f.Status, f.Body)
		a.retryAfter = f.RetryAfter
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
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body) // a client that left is the client's problem
}

// authenticate checks Basic auth (Zendesk) or the signature (webhook).
func (s *Server) authenticate(kind Kind, r *http.Request, body []byte) (answer, bool) {
	switch kind {
	case ZendeskCreate, ZendeskLookup:
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(s.cfg.Email+"/token:"+s.cfg.Token))
		if !hmac.Equal([]byte(r.Header.Get("Authorization")), []byte(want)) {
			return jsonAnswer(http.StatusUnauthorized, `{"error":"Couldn't authenticate you"}`), false
		}
	case WebhookCreate:
		if !s.signed(r, body) {
			return jsonAnswer(http.StatusUnauthorized, `{"error":"bad signature"}`), false
		}
	case WebhookLookup:
		var param []byte
		for p := range strings.SplitSeq(r.URL.RawQuery, "&") {
			if strings.HasPrefix(p, "idempotency_key=") {
				param = []byte(p)
			}
		}
		if param == nil {
			return jsonAnswer(http.StatusBadRequest, `{"error":"idempotency_key missing"}`), false
		}
		if !s.signed(r, param) {
			return jsonAnswer(http.StatusUnauthorized, `{"error":"bad signature"}`), false
		}
	}
	return answer{}, true
}

func (s *Server) signed(r *http.Request, data []byte) bool {
	return hmac.Equal([]byte(r.Header.Get("X-Signature-256")), []byte(Sign(s.cfg.Secret, data)))
}

// Sign is the X-Signature-256 value of data under secret.
func Sign(secret string, data []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(data)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
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

func (s *Server) zendeskCreate(r *http.Request, key string, body []byte) answer {
	var req zCreate
	if err := json.Unmarshal(body, &req); err != nil || req.Ticket == nil ||
		!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return jsonAnswer(http.StatusBadRequest, `{"error":"InvalidJSON"}`)
	}
	if req.Ticket.Comment.Body == "" {
		return jsonAnswer(http.StatusUnprocessableEntity, `{"error":"RecordInvalid","details":{"base":[{"description":"Description: cannot be blank"}]}}`)
	}
	sum := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" {
		if e, ok := s.zKeys[key]; ok && s.now.Before(e.at.Add(s.cfg.KeyTTL)) {
			if e.sum != sum {
				return jsonAnswer(http.StatusBadRequest, idempotentRequestError)
			}
			return answer{status: e.status, ctype: "application/json", body: e.answer}
		}
	}
	s.zNextID++
	t := &zTicket{id: s.zNextID, externalID: req.Ticket.ExternalID, subject: req.Ticket.Subject,
		body: req.Ticket.Comment.Body, priority: req.Ticket.Priority, createdAt: s.now,
		committed: s.now, hidden: s.lagN}
	s.zTickets = append(s.zTickets, t)
	out, _ := json.Marshal(map[string]any{"ticket": s.zJSON(t)})
	if key != "" {
		s.zKeys[key] = &idem{sum: sum, at: s.now, status: http.StatusCreated, answer: out}
	}
	return answer{status: http.StatusCreated, ctype: "application/json", body: out}
}

func (s *Server) zJSON(t *zTicket) map[string]any {
	return map[string]any{
		"id": t.id, "url": fmt.Sprintf("%s/api/v2/tickets/%d.json", s.srv.URL, t.id),
		"external_id": t.externalID, "subject": t.subject, "description": t.body,
		"priority": t.priority, "status": "new",
		"created_at": t.createdAt.Format(time.RFC3339), "updated_at": t.createdAt.Format(time.RFC3339),
	}
}

// visible applies the lookup lag to one ticket; s.mu is held.
func (s *Server) visible(committed time.Time, hidden *int) bool {
	if *hidden > 0 {
		*hidden--
		return false
	}
	return !s.now.Before(committed.Add(s.lagDelay))
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

// --- Webhook ---

func (s *Server) webhookCreate(key string, body []byte) answer {
	if key == "" {
		return jsonAnswer(http.StatusBadRequest, `{"error":"Idempotency-Key missing"}`)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return jsonAnswer(http.StatusBadRequest, `{"error":"body is not a JSON object"}`)
	}
	sum := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.wKeys[key]; ok && s.now.Before(e.at.Add(s.cfg.KeyTTL)) {
		if e.sum != sum {
			return jsonAnswer(http.StatusUnprocessableEntity, `{"error":"idempotency key reused with another body"}`)
		}
		return answer{status: e.status, ctype: "application/json", body: e.answer}
	}
	s.wNextID++
	t := &wTicket{id: s.wNextID, key: key, committed: s.now, hidden: s.lagN}
	s.wTickets = append(s.wTickets, t)
	a := s.wAnswer(t, http.StatusCreated)
	s.wKeys[key] = &idem{sum: sum, at: s.now, status: a.status, answer: a.body}
	return a
}

// wAnswer is the webhook's answer for t in the current reply shape; s.mu
// is held.
func (s *Server) wAnswer(t *wTicket, status int) answer {
	id := "WH-" + strconv.Itoa(t.id)
	url := s.srv.URL + "/tickets/" + id
	switch s.reply {
	case ReplyNumberID:
		return jsonAnswer(status, fmt.Sprintf(`{"id":%d,"url":%q}`, t.id, s.srv.URL+"/tickets/"+strconv.Itoa(t.id)))
	case ReplyNoURL:
		return jsonAnswer(status, fmt.Sprintf(`{"id":%q}`, id))
	case ReplyNoID:
		return jsonAnswer(status, `{"status":"accepted"}`)
	case ReplyEmpty:
		return answer{status: http.StatusNoContent}
	case ReplyText:
		return answer{status: http.StatusOK, ctype: "text/plain", body: []byte("ok")}
	}
	return jsonAnswer(status, fmt.Sprintf(`{"id":%q,"url":%q}`, id, url))
}

func (s *Server) webhookLookup(key string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.wTickets {
		if t.key == key && s.visible(t.committed, &t.hidden) {
			return s.wAnswer(t, http.StatusOK)
		}
	}
	return jsonAnswer(http.StatusNotFound, `{"error":"not found"}`)
}
