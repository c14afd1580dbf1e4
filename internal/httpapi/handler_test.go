package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/lambdaurl"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

const hookKey = "httpapi-test-hook-key"

var (
	nonceOnce sync.Once
	goodNonce string // a real BCrypt nonce of hookKey at cost 4, for speed
	nonceErr  error
)

func testNonce(t testing.TB) string {
	t.Helper()
	nonceOnce.Do(func() { goodNonce, nonceErr = nonce.Generate(hookKey, 4) })
	if nonceErr != nil {
		t.Fatal(nonceErr)
	}
	return goodNonce
}

func testVerifier(t testing.TB) *nonce.Verifier {
	t.Helper()
	v, err := nonce.New(hookKey, nonce.DefaultMinCost, nonce.DefaultMaxCost)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var users = callbacktest.Users

type env struct {
	h     *httpapi.Handler
	store *memtest.Store
	logs  *testenv.Buffer
}

// newHandler is the handler the tests build on store: the test users, the
// arguments policy, retention, random ticket IDs, authentication auth and
// the request's line to logger.
func newHandler(store core.Store, auth httpapi.Authenticator, retention time.Duration, logger *slog.Logger) *httpapi.Handler {
	return &httpapi.Handler{
		Service: &core.Service{Store: store, Users: users, Policy: idem.PolicyArguments,
			Retention: retention, NewID: uuid.NewString},
		Auth:   auth,
		Logger: logger,
	}
}

func newEnv(t testing.TB, auth httpapi.Authenticator) *env {
	t.Helper()
	st := memtest.New()
	logs := &testenv.Buffer{}
	var n atomic.Int64
	h := newHandler(st, auth, 24*time.Hour, slog.New(slog.NewJSONHandler(logs, nil)))
	h.Service.NewID = func() string { return fmt.Sprintf("ticket-%d", n.Add(1)) }
	return &env{store: st, logs: logs, h: h}
}

func (e *env) serve(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

func (e *env) post(body, nonceHeader string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if nonceHeader != "" {
		r.Header.Set(httpapi.NonceHeader, nonceHeader)
	}
	return e.serve(r)
}

func (e *env) count() [2]int {
	ops, tickets := e.store.Count()
	return [2]int{ops, tickets}
}

func callBody(fn, user, requestID, content string) string {
	return callbacktest.Body(fn, content, callbacktest.Context(user, requestID))
}

func createBody(user, requestID, title string) string {
	return callbacktest.Create(user, requestID, callbacktest.Title(title))
}

// decode returns the body as a generic map and its sorted key list.
func decode(t *testing.T, w *httptest.ResponseRecorder) (map[string]any, []string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", w.Body.String(), err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return m, keys
}

func checkHeaders(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q; want application/json", ct)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q; want no-store", cc)
	}
}

// shortBody: the 4xx/5xx bodies the model never sees are a fixed word,
// with no detail.
func shortBody(word string) string { return `{"error":"` + word + `"}` + "\n" }

// faultStore wraps memstore with injected failures.
type faultStore struct {
	*memtest.Store
	createErr error
	panicMsg  atomic.Pointer[string]
}

func (s *faultStore) Claims() idem.Store[core.Writes] { return core.ClaimFunc(s.claim) }

func (s *faultStore) claim(ctx context.Context, op idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	if p := s.panicMsg.Load(); p != nil {
		panic(*p)
	}
	if s.createErr != nil {
		return nil, s.createErr
	}
	return s.Store.Claims().Claim(ctx, op, w, now)
}

// TestResponses: every row of docs/contract.md, Responses, status and
// exact body shape.
func TestResponses(t *testing.T) {
	n := testNonce(t)
	e := newEnv(t, testVerifier(t))

	created := e.post(createBody("user-a", "r-1", "Cannot sign in"), n)
	t.Run("created", func(t *testing.T) {
		const want = `{"status":"created","ticket_id":"ticket-1","deduplicated":false}` + "\n"
		if created.Code != 200 || created.Body.String() != want {
			t.Fatalf("%d %s; want 200 %s", created.Code, created.Body, want)
		}
		checkHeaders(t, created)
	})
	t.Run("completed duplicate", func(t *testing.T) {
		// Byte for byte the first answer, but for deduplicated.
		w := e.post(createBody("user-a", "r-1", "Cannot sign in"), n)
		const want = `{"status":"created","ticket_id":"ticket-1","deduplicated":true}` + "\n"
		if w.Code != 200 || w.Body.String() != want {
			t.Fatalf("%d %s; want 200 %s", w.Code, w.Body, want)
		}
		checkHeaders(t, w)
	})
	t.Run("found", func(t *testing.T) {
		w := e.post(callBody(core.GetTicket, "user-b", "", `{"ticket_id":"ticket-1"}`), n)
		var b struct {
			Status string                     `json:"status"`
			Ticket map[string]json.RawMessage `json:"ticket"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || w.Code != 200 || b.Status != "found" {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		for _, k := range []string{"ticket_id", "title", "description", "priority", "status", "created_at", "comments"} {
			if _, ok := b.Ticket[k]; !ok {
				t.Fatalf("ticket lacks %s: %s", k, w.Body)
			}
		}
		if len(b.Ticket) != 7 || string(b.Ticket["status"]) != `"open"` || string(b.Ticket["comments"]) != `[]` || string(b.Ticket["priority"]) != `"normal"` || string(b.Ticket["title"]) != `"Cannot sign in"` {
			t.Fatalf("ticket %s", w.Body)
		}
	})
	t.Run("pending operation", func(t *testing.T) {
		canonical, _ := idem.Canonical([]byte(`{"title":"p"}`))
		key, fp := idem.Key(idem.PolicyArguments, "tenant-a", "r-pending", core.CreateTicket, canonical)
		e.store.Put(idem.Record{Key: key, State: idem.StatePending, Tenant: "tenant-a", Owner: "alice",
			Fingerprint: fp, ExpiresAt: time.Now().Add(time.Hour)})
		before := e.count()
		w := e.post(createBody("user-a", "r-pending", "p"), n)
		m, keys := decode(t, w)
		if w.Code != 200 || !reflect.DeepEqual(keys, []string{"message", "retryable", "status"}) ||
			m["status"] != "in_progress" || m["retryable"] != true || m["message"] == "" {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if e.count() != before {
			t.Fatal("a pending operation was re-executed")
		}
	})
	t.Run("busy", func(t *testing.T) {
		b := newEnv(t, testVerifier(t))
		b.h.Service.Store = &faultStore{Store: b.store, createErr: fmt.Errorf("throttled: %w", core.ErrBusy)}
		w := b.post(createBody("user-a", "r-1", "t"), n)
		m, keys := decode(t, w)
		if w.Code != 200 || !reflect.DeepEqual(keys, []string{"message", "retryable", "status"}) ||
			m["status"] != "busy" || m["retryable"] != true || m["message"] == "" {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
	rejection := func(t *testing.T, w *httptest.ResponseRecorder, status int, code string) {
		t.Helper()
		var b map[string]json.RawMessage
		var er map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || len(b) != 2 || string(b["status"]) != `"rejected"` {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if err := json.Unmarshal(b["error"], &er); err != nil || len(er) != 2 || er["code"] != code || er["message"] == "" {
			t.Fatalf("%d %s; want code %s", w.Code, w.Body, code)
		}
		if w.Code != status {
			t.Fatalf("status %d; want %d", w.Code, status)
		}
		checkHeaders(t, w)
	}
	t.Run("correctable input error", func(t *testing.T) {
		rejection(t, e.post(createBody("user-a", "r-2", ""), n), 200, core.CodeInvalidArguments)
	})
	t.Run("request_id used by another user", func(t *testing.T) {
		before := e.count()
		rejection(t, e.post(createBody("user-b", "r-1", "Cannot sign in"), n), 403, core.CodeRequestIDConflict)
		if e.count() != before {
			t.Fatal("conflict wrote")
		}
	})
	for _, tc := range []struct {
		name   string
		w      func() *httptest.ResponseRecorder
		status int
		body   string
	}{
		{"authentication failure", func() *httptest.ResponseRecorder { return e.post(createBody("user-a", "r-3", "t"), "bad") }, 401, shortBody("unauthenticated")},
		{"unknown user", func() *httptest.ResponseRecorder { return e.post(createBody("user-x", "r-3", "t"), n) }, 403, shortBody("forbidden")},
		{"disabled user", func() *httptest.ResponseRecorder { return e.post(createBody("user-d", "r-3", "t"), n) }, 403, shortBody("forbidden")},
		{"malformed body", func() *httptest.ResponseRecorder { return e.post(`{"function":`, n) }, 400, shortBody("bad_request")},
		{"too large", func() *httptest.ResponseRecorder {
			return e.post(createBody("user-a", "r-3", strings.Repeat("t", httpapi.DefaultMaxBody)), n)
		}, 413, shortBody("too_large")},
		{"internal failure", func() *httptest.ResponseRecorder {
			// On e itself, so that the store the row checks is the one
			// posted to: a service like e's over a failing store (a
			// service builds its Guard once, over the store it starts on).
			real := e.h.Service
			defer func() { e.h.Service = real }()
			e.h.Service = &core.Service{Store: &faultStore{Store: e.store, createErr: errors.New("SECRET-INTERNAL disk on fire")},
				Users: real.Users, Policy: real.Policy, Retention: real.Retention, NewID: real.NewID}
			return e.post(createBody("user-a", "r-4", "t"), n)
		}, 500, shortBody("internal")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.count()
			w := tc.w()
			if w.Code != tc.status || w.Body.String() != tc.body {
				t.Fatalf("%d %q; want %d %q", w.Code, w.Body, tc.status, tc.body)
			}
			checkHeaders(t, w)
			if e.count() != before {
				t.Fatal("store changed")
			}
		})
	}
}

// TestOrderOfChecks: the checks of docs/contract.md, Order of checks, run
// in order; each row combines two faults and expects the earlier step's
// answer. Nothing is written.
func TestOrderOfChecks(t *testing.T) {
	n := testNonce(t)
	big := createBody("user-a", "r-1", strings.Repeat("t", 2000))
	const limit = 1024
	for _, tc := range []struct {
		name     string
		body     string
		nonce    string
		auth     httpapi.Authenticator
		unknown  bool // ContentLength not known in advance
		status   int
		wantBody string // "" when the body is checked elsewhere
	}{
		{"too large with bad nonce -> 413 not 401", big, "bad", nil, false, 413, shortBody("too_large")},
		{"too large without nonce and bad JSON -> 413", strings.Repeat("{", 2000), "", nil, false, 413, shortBody("too_large")},
		{"too large, length unknown -> 413", big, "bad", nil, true, 413, shortBody("too_large")},
		{"limit+1 bytes -> 413", createBody("user-a", "r-1", "t") + strings.Repeat(" ", limit+1-len(createBody("user-a", "r-1", "t"))), n, nil, true, 413, shortBody("too_large")},
		{"bad nonce with bad JSON -> 401 not 400", `{"function":`, "bad", nil, false, 401, shortBody("unauthenticated")},
		{"missing nonce with valid call -> 401", createBody("user-a", "r-1", "t"), "", nil, false, 401, shortBody("unauthenticated")},
		{"nonce of another key -> 401", createBody("user-a", "r-1", "t"), otherKeyNonce(t), nil, false, 401, shortBody("unauthenticated")},
		{"cost-31 nonce -> 401 without hashing", createBody("user-a", "r-1", "t"), n[:4] + "31" + n[6:], nil, false, 401, shortBody("unauthenticated")},
		{"no hook key refuses a valid nonce -> 401", createBody("user-a", "r-1", "t"), n, nonce.Refuse{}, false, 401, shortBody("unauthenticated")},
		{"bad JSON -> 400", `{"function":`, n, nil, false, 400, shortBody("bad_request")},
		{"empty body -> 400", ``, n, nil, false, 400, shortBody("bad_request")},
		{"bad shape with unknown user -> 400 not 403", `{"function":{"name":"create_ticket"},"context":{"externalUserId":"user-x"}}`, n, nil, false, 400, shortBody("bad_request")},
		{"unknown function with unknown user -> 200 unknown_function", callBody("nope", "user-x", "", `{}`), n, nil, false, 200, ""},
		{"unknown user with missing request_id -> 403", callBody(core.CreateTicket, "user-x", "", `{"title":"t"}`), n, nil, false, 403, shortBody("forbidden")},
		{"exactly the limit -> 200", createBody("user-a", "r-1", "t") + strings.Repeat(" ", limit-len(createBody("user-a", "r-1", "t"))), n, nil, true, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth := tc.auth
			if auth == nil {
				auth = testVerifier(t)
			}
			e := newEnv(t, auth)
			e.h.MaxBody = limit
			r := httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(tc.body))
			if tc.unknown {
				r = httptest.NewRequest(http.MethodPost, "/callback", io.NopCloser(strings.NewReader(tc.body)))
				r.ContentLength = -1
			}
			if tc.nonce != "" {
				r.Header.Set(httpapi.NonceHeader, tc.nonce)
			}
			w := e.serve(r)
			if w.Code != tc.status || (tc.wantBody != "" && w.Body.String() != tc.wantBody) {
				t.Fatalf("%d %q; want %d %q", w.Code, w.Body, tc.status, tc.wantBody)
			}
			if tc.status != 200 && e.count() != [2]int{0, 0} {
				t.Fatal("a refused request wrote")
			}
		})
	}
}

var otherNonceOnce = sync.OnceValues(func() (string, error) { return nonce.Generate("another-hook-key", 4) })

func otherKeyNonce(t *testing.T) string {
	h, err := otherNonceOnce()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestBadShape: bodies that are JSON but not the shape of docs/contract.md,
// Request, answer 400 and write nothing.
func TestBadShape(t *testing.T) {
	n := testNonce(t)
	for _, b := range []string{
		`[]`, `"x"`, `null`, `1`, `{}`,
		`{"function":null}`,
		`{"function":"create_ticket"}`,
		`{"function":{"content":{"title":"t"}}}`,
		`{"function":{"name":null,"content":{"title":"t"}}}`,
		`{"function":{"name":1,"content":{"title":"t"}}}`,
		`{"function":{"name":"create_ticket"}}`,
		`{"type":"other","function":{"name":"create_ticket","content":{"title":"t"}}}`,
		`{"type":1,"function":{"name":"create_ticket","content":{"title":"t"}}}`,
		`{"function":{"name":"create_ticket","content":{"title":"t"}},"context":"user-a"}`,
		`{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":1}}`,
		`{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":"user-a","metadata":"r-1"}}`,
		`{"function":{"name":"create_ticket","content":{"title":"t"}}} x`,
		`{"function":{"name":"create_ticket","content":{"title":"t"}}}{}`,
		"{\"function\":{\"name\":\"create_ticket\",\"content\":{\"title\":\"\xff\"}}}x",
	} {
		e := newEnv(t, testVerifier(t))
		w := e.post(b, n)
		if w.Code != 400 || w.Body.String() != shortBody("bad_request") || e.count() != [2]int{0, 0} {
			t.Errorf("%s: %d %s; want 400", b, w.Code, w.Body)
		}
	}
}

func lambdaRequest(body string, b64 bool, nonceHeader string) *http.Request {
	if b64 {
		body = base64.StdEncoding.EncodeToString([]byte(body))
	}
	return lambdaRaw(body, b64, nonceHeader)
}

func lambdaRaw(body string, b64 bool, nonceHeader string) *http.Request {
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/callback", Body: body, IsBase64Encoded: b64,
		Headers: map[string]string{"content-type": "application/json", "host": "abc.lambda-url.eu-west-1.on.aws"},
		RequestContext: events.LambdaFunctionURLRequestContext{
			DomainName: "abc.lambda-url.eu-west-1.on.aws",
			HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodPost, Path: "/callback"},
		},
	}
	if nonceHeader != "" {
		ev.Headers["x-request-nonce"] = nonceHeader // function URL events carry lower-case names
	}
	return lambdaurl.Request(context.Background(), ev)
}

// TestBase64Body: a function URL event's base64 body is decoded before the
// size check (413 applies to the decoded size) and a body that does not
// decode is 400 at step 1, before the nonce.
func TestBase64Body(t *testing.T) {
	n := testNonce(t)
	const limit = 1024
	sized := func(size int) string { // a valid call of exactly size bytes
		b := createBody("user-a", "r-1", "t")
		return b + strings.Repeat(" ", size-len(b))
	}
	if enc := base64.StdEncoding.EncodedLen(1000); enc <= limit {
		t.Fatalf("test needs an encoding longer than the limit, got %d", enc)
	}
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		body   string
	}{
		{"valid base64 -> created", lambdaRequest(createBody("user-a", "r-1", "t"), true, n), 200, ""},
		{"plain body through lambdaurl -> created", lambdaRequest(createBody("user-a", "r-1", "t"), false, n), 200, ""},
		{"decoded 1000 bytes, encoded 1336 -> created", lambdaRequest(sized(1000), true, n), 200, ""},
		{"decoded exactly the limit -> created", lambdaRequest(sized(limit), true, n), 200, ""},
		{"decoded limit+1 -> 413", lambdaRequest(sized(limit+1), true, n), 413, shortBody("too_large")},
		{"decoded too large with bad nonce -> 413", lambdaRequest(sized(2*limit), true, "bad"), 413, shortBody("too_large")},
		{"corrupt base64 -> 400", lambdaRaw("!!!not base64!!!", true, n), 400, shortBody("bad_request")},
		{"corrupt base64 without nonce -> 400 (step 1)", lambdaRaw("!!!not base64!!!", true, ""), 400, shortBody("bad_request")},
		{"truncated base64 -> 400", lambdaRaw(base64.StdEncoding.EncodeToString([]byte(createBody("user-a", "r-1", "t")))[:41], true, n), 400, shortBody("bad_request")},
		{"corrupt tail after valid prefix -> 400", lambdaRaw(base64.StdEncoding.EncodeToString([]byte(createBody("user-a", "r-1", "t")))+"*", true, n), 400, shortBody("bad_request")},
		{"valid base64 of bad JSON -> 400", lambdaRequest(`{"function":`, true, n), 400, shortBody("bad_request")},
		{"valid base64 with bad nonce -> 401", lambdaRequest(createBody("user-a", "r-1", "t"), true, "bad"), 401, shortBody("unauthenticated")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, testVerifier(t))
			e.h.MaxBody = limit
			w := e.serve(tc.req)
			if w.Code != tc.status || (tc.body != "" && w.Body.String() != tc.body) {
				t.Fatalf("%d %q; want %d %q", w.Code, w.Body, tc.status, tc.body)
			}
			want := [2]int{0, 0}
			if tc.status == 200 {
				want = [2]int{1, 1}
				if m, _ := decode(t, w); m["status"] != "created" {
					t.Fatalf("body %s", w.Body)
				}
			}
			if e.count() != want {
				t.Fatalf("store %v; want %v", e.count(), want)
			}
		})
	}
}

// TestPanicIsContained: a panic in the store answers 500 without detail,
// is logged without the panic value, and the server goes on serving.
func TestPanicIsContained(t *testing.T) {
	n := testNonce(t)
	e := newEnv(t, testVerifier(t))
	fs := &faultStore{Store: e.store}
	e.h.Service.Store = fs
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	post := func(body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/callback", strings.NewReader(body))
		req.Header.Set(httpapi.NonceHeader, n)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("request failed: %v", err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	msg := "SECRET-PANIC-VALUE"
	fs.panicMsg.Store(&msg)
	if code, body := post(createBody("user-a", "r-1", "t")); code != 500 || body != shortBody("internal") {
		t.Fatalf("panic: %d %q; want 500 with no detail", code, body)
	}
	fs.panicMsg.Store(nil)
	if code, body := post(createBody("user-a", "r-2", "t")); code != 200 || !strings.Contains(body, `"created"`) {
		t.Fatalf("after the panic: %d %q; want the server still serving", code, body)
	}
	logs := e.logs.String()
	if strings.Contains(logs, msg) {
		t.Fatalf("log carries the panic value: %s", logs)
	}
	if !strings.Contains(logs, `"http_status":500`) || strings.Count(logs, "\n") != 2 {
		t.Fatalf("want two log lines, one with status 500:\n%s", logs)
	}
}

// TestCatalogue: GET /functions needs the nonce and answers the catalogue
// of docs/contract.md, Catalogue.
func TestCatalogue(t *testing.T) {
	n := testNonce(t)
	get := func(url string) func() *http.Request {
		return func() *http.Request { return httptest.NewRequest(http.MethodGet, url, nil) }
	}
	forwarded := func(proto string) func() *http.Request {
		return func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "http://tickets.example.org/functions", nil)
			r.Header.Set("X-Forwarded-Proto", proto)
			return r
		}
	}
	for _, tc := range []struct {
		name      string
		publicURL string
		req       func() *http.Request
		want      string
	}{
		{"derived from host", "", get("http://tickets.example.org/functions"), "http://tickets.example.org/callback"},
		{"derived from host with port", "", get("http://127.0.0.1:3210/functions"), "http://127.0.0.1:3210/callback"},
		{"derived, TLS", "", get("https://tickets.example.org/functions"), "https://tickets.example.org/callback"},
		{"derived, forwarded https", "", forwarded("https"), "https://tickets.example.org/callback"},
		{"derived, forwarded junk ignored", "", forwarded("javascript"), "http://tickets.example.org/callback"},
		{"function URL event", "", func() *http.Request {
			return lambdaurl.Request(context.Background(), events.LambdaFunctionURLRequest{
				RawPath: "/functions", Headers: map[string]string{"host": "abc.lambda-url.eu-west-1.on.aws"},
				RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "GET"}},
			})
		}, "https://abc.lambda-url.eu-west-1.on.aws/callback"},
		{"configured", "https://public.example.org", get("http://internal:8080/functions"), "https://public.example.org/callback"},
		{"configured with slash and path", "https://public.example.org/tickets/", get("http://internal:8080/functions"),
			"https://public.example.org/tickets/callback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, testVerifier(t))
			e.h.PublicURL = tc.publicURL
			r := tc.req()
			r.Header.Set(httpapi.NonceHeader, n)
			w := e.serve(r)
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			checkHeaders(t, w)
			var cat struct {
				Functions []map[string]json.RawMessage `json:"functions"`
			}
			dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&cat); err != nil {
				t.Fatalf("catalogue %s: %v", w.Body, err)
			}
			fns := core.Functions()
			if len(cat.Functions) != len(fns) {
				t.Fatalf("%d functions; want %d", len(cat.Functions), len(fns))
			}
			for i, f := range cat.Functions {
				fn := &fns[i]
				if len(f) != 4 {
					t.Fatalf("entry %d has %d members; want name, description, callbackUrl, contentFormat", i, len(f))
				}
				var name, desc, url string
				_ = json.Unmarshal(f["name"], &name)
				_ = json.Unmarshal(f["description"], &desc)
				_ = json.Unmarshal(f["callbackUrl"], &url)
				if name != fn.Name || desc != fn.Description || desc == "" || url != tc.want {
					t.Fatalf("entry %d: %q %q %q; want %q, its description, %q", i, name, desc, url, fn.Name, tc.want)
				}
				wantSchema, _ := json.Marshal(fn.Schema())
				var got, want any
				_ = json.Unmarshal(f["contentFormat"], &got)
				_ = json.Unmarshal(wantSchema, &want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("contentFormat of %s:\n got %s\nwant %s", name, f["contentFormat"], wantSchema)
				}
			}
		})
	}
	t.Run("needs the nonce", func(t *testing.T) {
		e := newEnv(t, testVerifier(t))
		for _, h := range []string{"", "bad", otherKeyNonce(t)} {
			r := httptest.NewRequest(http.MethodGet, "/functions", nil)
			if h != "" {
				r.Header.Set(httpapi.NonceHeader, h)
			}
			if w := e.serve(r); w.Code != 401 || w.Body.String() != shortBody("unauthenticated") {
				t.Fatalf("nonce %q: %d %s; want 401", h, w.Code, w.Body)
			}
		}
		r := httptest.NewRequest(http.MethodGet, "/functions", nil)
		r.Header.Set(httpapi.NonceHeader, n)
		if w := newEnv(t, nonce.Refuse{}).serve(r); w.Code != 401 {
			t.Fatalf("no hook key: %d; want 401", w.Code)
		}
	})
}

func TestRoutes(t *testing.T) {
	n := testNonce(t)
	e := newEnv(t, testVerifier(t))
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
		body         string
	}{
		{http.MethodGet, "/callback", 405, "POST", shortBody("method_not_allowed")},
		{http.MethodPut, "/callback", 405, "POST", shortBody("method_not_allowed")},
		{http.MethodDelete, "/callback", 405, "POST", shortBody("method_not_allowed")},
		{http.MethodPost, "/functions", 405, "GET", shortBody("method_not_allowed")},
		{http.MethodGet, "/", 404, "", shortBody("not_found")},
		{http.MethodPost, "/callback/", 404, "", shortBody("not_found")},
		{http.MethodPost, "/Callback", 404, "", shortBody("not_found")},
		{http.MethodGet, "/functions/x", 404, "", shortBody("not_found")},
	} {
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(createBody("user-a", "r-1", "t")))
		r.Header.Set(httpapi.NonceHeader, n)
		w := e.serve(r)
		if w.Code != tc.status || w.Header().Get("Allow") != tc.allow || w.Body.String() != tc.body {
			t.Errorf("%s %s: %d Allow=%q %q; want %d Allow=%q", tc.method, tc.path, w.Code, w.Header().Get("Allow"), w.Body, tc.status, tc.allow)
		}
	}
	if e.count() != [2]int{0, 0} {
		t.Fatal("a refused route wrote")
	}
}

// TestLogLines: one JSON line per request with the fields of
// docs/contract.md, Logs and metrics, and never the arguments, the nonce,
// the hook key or the body.
func TestLogLines(t *testing.T) {
	n := testNonce(t)
	e := newEnv(t, testVerifier(t))
	const (
		title = "TITLE-SECRET-4471"
		desc  = "DESC-SECRET-9902"
		conv  = "CONV-SECRET-1234"
	)
	args := func(i int) string {
		return `{"title":` + callbacktest.Quote(fmt.Sprintf("%s %d", title, i)) + `,"description":` + callbacktest.Quote(desc) + `}`
	}
	withConv := func(b string) string { return strings.Replace(b, "conv-123", conv, 1) }
	type req struct {
		r      func() *http.Request
		status int
		fields map[string]any // expected values of some fields; nil: absent
	}
	postReq := func(body, nonceHeader string) func() *http.Request {
		return func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(body))
			if nonceHeader != "" {
				r.Header.Set(httpapi.NonceHeader, nonceHeader)
			}
			return r
		}
	}
	var reqs []req
	var lastTicket string // set by each create, read by the get_ticket after it
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("r-%d", i)
		reqs = append(reqs,
			req{postReq(withConv(callBody(core.CreateTicket, "user-a", id, args(i))), n), 200,
				map[string]any{"function": "create_ticket", "tenant": "tenant-a", "outcome": "created"}},
			req{postReq(withConv(callBody(core.CreateTicket, "user-a", id, args(i))), n), 200,
				map[string]any{"outcome": "deduplicated"}},
			req{postReq(withConv(callBody(core.CreateTicket, "user-b", id, args(i))), n), 403,
				map[string]any{"outcome": "rejected", "code": "request_id_conflict"}},
			req{postReq(withConv(callBody(core.CreateTicket, "user-a", id, `{"title":`+callbacktest.Quote(title+"\n")+`}`)), n), 200,
				map[string]any{"outcome": "rejected", "code": "invalid_arguments", "operation_key": nil}},
			req{func() *http.Request {
				return postReq(withConv(callBody(core.GetTicket, "user-a", "", `{"ticket_id":`+callbacktest.Quote(lastTicket)+`}`)), n)()
			}, 200, map[string]any{"function": "get_ticket", "outcome": "found", "operation_key": nil}},
			req{postReq(withConv(callBody(core.CreateTicket, "user-a", id, args(i))), "$2a$04$"+strings.Repeat("x", 53)), 401,
				map[string]any{"outcome": "unauthenticated", "function": "", "tenant": ""}},
			req{postReq(withConv(callBody(core.CreateTicket, "user-x", id, args(i))), n), 403,
				map[string]any{"outcome": "forbidden"}},
			req{postReq(`{"title":`+callbacktest.Quote(title)+`,`, n), 400, map[string]any{"outcome": "bad_request"}},
			req{postReq(withConv(callBody(core.CreateTicket, "user-a", id, `{"title":`+callbacktest.Quote(strings.Repeat(title, 5000))+`}`)), n), 413,
				map[string]any{"outcome": "too_large"}},
		)
	}
	reqs = append(reqs,
		req{func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/functions", nil)
			r.Header.Set(httpapi.NonceHeader, n)
			return r
		}, 200, map[string]any{"outcome": "catalogue"}},
		req{func() *http.Request { return httptest.NewRequest(http.MethodGet, "/nope", nil) }, 404, map[string]any{"outcome": "not_found"}})

	for _, rq := range reqs {
		r := rq.r()
		w := e.serve(r)
		if w.Code != rq.status {
			t.Fatalf("setup: %s %s: %d %s; want %d", r.Method, r.URL.Path, w.Code, w.Body, rq.status)
		}
		if rq.fields["outcome"] == "created" {
			m, _ := decode(t, w)
			lastTicket, _ = m["ticket_id"].(string)
		}
	}
	// And a concurrent burst: lines must not interleave or go missing.
	const burst = 20
	var wg sync.WaitGroup
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.serve(postReq(withConv(callBody(core.CreateTicket, "user-c", fmt.Sprintf("b-%d", i), args(i))), n)())
		}()
	}
	wg.Wait()

	logs := e.logs.String()
	lines := strings.Split(strings.TrimSuffix(logs, "\n"), "\n")
	if len(lines) != len(reqs)+burst {
		t.Fatalf("%d log lines for %d requests", len(lines), len(reqs)+burst)
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not JSON: %q", i, line)
		}
		for _, f := range []string{"function", "tenant", "outcome", "http_status", "duration_ms"} {
			if _, ok := m[f]; !ok {
				t.Fatalf("line %d lacks %s: %s", i, f, line)
			}
		}
		if d, ok := m["duration_ms"].(float64); !ok || d < 0 {
			t.Fatalf("line %d duration_ms %v", i, m["duration_ms"])
		}
		if i >= len(reqs) {
			if m["outcome"] != "created" || m["tenant"] != "tenant-b" {
				t.Fatalf("burst line %d: %s", i, line)
			}
			continue
		}
		if m["http_status"] != float64(reqs[i].status) {
			t.Fatalf("line %d http_status %v; want %d", i, m["http_status"], reqs[i].status)
		}
		for k, v := range reqs[i].fields {
			if got, ok := m[k]; got != v || (v == nil && ok) {
				t.Fatalf("line %d: %s = %v; want %v\n%s", i, k, m[k], v, line)
			}
		}
		switch m["outcome"] {
		case "created", "deduplicated":
			if k, _ := m["operation_key"].(string); len(k) != 64 {
				t.Fatalf("line %d: operation_key %v; want the hex key", i, m["operation_key"])
			}
		}
	}
	for _, secret := range []string{title, desc, conv, n, n[7:29], n[29:], hookKey} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log contains %q", secret)
		}
	}
}

// TestHandlerWithoutLogger falls back to slog.Default and still answers.
func TestHandlerWithoutLogger(t *testing.T) {
	e := newEnv(t, nonce.Off{})
	e.h.Logger = nil
	prev := slog.Default()
	var buf testenv.Buffer
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	if w := e.post(createBody("user-a", "r-1", "t"), ""); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("default logger got %q", buf.String())
	}
}
