package mcpdoor_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
	"github.com/aivax-examples/idempotent-callback/internal/mcpdoor"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The protocol revisions the door serves.
var revisions = []string{"2026-07-28", "2025-11-25"}

const hookKey = "test-hook-key"

// issuer is a test OAuth issuer on loopback: OpenID discovery and a JWK
// Set with an RSA and an EC key; it counts the fetches of its set.
type issuer struct {
	srv     *httptest.Server
	rsa     *rsa.PrivateKey
	ec      *ecdsa.PrivateKey
	mu      sync.Mutex
	extra   map[string]*rsa.PrivateKey // keys added by rotation
	fetches atomic.Int32
}

func newIssuer(t testing.TB) *issuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{rsa: rk, ec: ek, extra: map[string]*rsa.PrivateKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks.json"})
	})
	mux.HandleFunc("/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		store := jwkset.NewMemoryStorage()
		add := func(kid string, key any, alg jwkset.ALG) {
			j, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: alg, USE: jwkset.UseSig}})
			if err != nil {
				t.Error(err)
				return
			}
			_ = store.KeyWrite(r.Context(), j)
		}
		add("rsa1", &rk.PublicKey, jwkset.AlgRS256)
		add("ec1", &ek.PublicKey, jwkset.AlgES256)
		is.mu.Lock()
		for kid, k := range is.extra {
			add(kid, &k.PublicKey, jwkset.AlgRS256)
		}
		is.mu.Unlock()
		b, err := store.JSONPublic(r.Context())
		if err != nil {
			t.Error(err)
		}
		_, _ = w.Write(b)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) rotate(kid string, k *rsa.PrivateKey) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.extra[kid] = k
}

// env is the door and the callback on one test server, on a store.
type env struct {
	t        testing.TB
	iss      *issuer
	url      string // base URL
	audience string
	store    *countingStore
	users    *countingUsers
	keys     *jwtauth.Keys
	logs     *testenv.Buffer
	clock    *testenv.Clock
	handler  http.Handler // the test server's: the door and the callback
}

type envOptions struct {
	scopes  []string
	maxBody int64
	rec     metrics.Recorder
	tools   *core.Tools   // the service's tools; nil: the product's
	keys    *jwtauth.Keys // the door's keys; nil: the test issuer's, discovered
}

var testUsers = memstore.Users{
	"user-a": {ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"},
	"user-b": {ExternalID: "user-b", TenantID: "tenant-b", UserID: "bob"},
	"user-c": {ExternalID: "user-c", TenantID: "tenant-a", UserID: "carol"},
	"user-d": {ExternalID: "user-d", TenantID: "tenant-a", UserID: "dave", Disabled: true},
}

func newEnv(t testing.TB, store core.Store, opt envOptions) *env {
	t.Helper()
	iss := newIssuer(t)
	clock := testenv.NewClock(time.Now())
	e := &env{t: t, iss: iss, store: &countingStore{Store: store}, users: &countingUsers{Users: testUsers},
		logs: &testenv.Buffer{}, clock: clock}
	e.keys = &jwtauth.Keys{Issuer: iss.srv.URL, Now: clock.Now}
	if opt.keys != nil {
		e.keys = opt.keys
	}
	// The listener exists before the server starts: the door's audience
	// names it, and the handler is in place before any request.
	srv := httptest.NewUnstartedServer(nil)
	e.url = "http://" + srv.Listener.Addr().String()
	e.audience = e.url + "/mcp"
	logger := slog.New(slog.NewJSONHandler(e.logs, nil))
	svc := newService(e.store, e.users, opt.tools)
	door, err := mcpdoor.New(mcpdoor.Config{
		Service: svc, Users: e.users,
		Verifier: &jwtauth.Verifier{Issuer: iss.srv.URL, Audience: e.audience, UserClaim: "sub", Keys: e.keys, Now: clock.Now},
		Issuer:   iss.srv.URL, Audience: e.audience, Scopes: opt.scopes, MaxBody: opt.maxBody, Logger: logger,
		Metrics: opt.rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := nonce.New(hookKey, nonce.MinCost, nonce.CapCost)
	if err != nil {
		t.Fatal(err)
	}
	callback := &httpapi.Handler{Service: svc, Auth: verifier, MaxBody: opt.maxBody, Logger: logger, Metrics: opt.rec}
	e.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mcpdoor.Handles(r.URL.Path) {
			door.ServeHTTP(w, r)
			return
		}
		callback.ServeHTTP(w, r)
	})
	srv.Config.Handler = e.handler
	srv.Start()
	t.Cleanup(srv.Close)
	return e
}

// newService is the service behind the tests' doors: store and users,
// the arguments policy, an hour's retention, random ticket IDs, and
// tools (nil: the product's).
func newService(store core.Store, users core.Users, tools *core.Tools) *core.Service {
	return &core.Service{Store: store, Users: users, Policy: idem.PolicyArguments, Retention: time.Hour, NewID: uuid.NewString, Tools: tools}
}

// fixedToken is a TokenVerifier that accepts one token without JWT work:
// the benchmark's door "without JWT", as the callback's is without
// BCrypt.
type fixedToken struct{ user string }

func (f fixedToken) Verify(_ context.Context, raw string) (jwtauth.Token, error) {
	if raw != "bench" {
		return jwtauth.Token{}, jwtauth.ErrInvalid
	}
	return jwtauth.Token{User: f.user}, nil
}

// benchDoor is the door on store, with the token check replaced by
// fixedToken and its JSON log lines discarded: what the door adds to a
// call besides JWT verification and I/O. Its tickets get random IDs
// (uuid), as in the callback's BenchmarkHandlerOverhead.
func benchDoor(b testing.TB, store core.Store, users core.Users) http.Handler {
	svc := newService(store, users, nil)
	d, err := mcpdoor.New(mcpdoor.Config{Service: svc, Users: users, Verifier: fixedToken{"user-a"},
		Issuer: "https://issuer.example", Audience: "https://tickets.example/mcp",
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// claims are a valid token's claims for user, at the env's clock.
func (e *env) claims(user string) jwt.MapClaims {
	now := e.clock.Now()
	return jwt.MapClaims{"iss": e.iss.srv.URL, "aud": e.audience, "sub": user,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

func (e *env) sign(method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	e.t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// token is a valid RS256 token for user.
func (e *env) token(user string) string {
	return e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, e.claims(user))
}

// client connects the Go SDK's client with token, on revision.
func (e *env) client(ctx context.Context, token, revision string) *mcp.ClientSession {
	e.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "go-test", Version: "1"}, nil)
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.audience, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		e.t.Fatalf("connect on %s: %v", revision, err)
	}
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// post sends body to /mcp as a 2025-11-25 client would, with the token
// when not empty.
func (e *env) post(token string, body string) (*http.Response, []byte) {
	e.t.Helper()
	return e.do(http.MethodPost, e.audience, token, body)
}

func (e *env) do(method, url, token, body string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	callbacktest.SetMCPHeaders(req, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// toolsCall is a tools/call body; meta is the raw JSON of the request_id
// member ("" for none).
func toolsCall(tool, args, meta string) string {
	m := ""
	if meta != "" {
		m = `,"_meta":{"` + mcpdoor.RequestIDMeta + `":` + meta + `}`
	}
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + m + `}}`
}

// rpcResult decodes a JSON-RPC answer to tools/call.
type rpcResult struct {
	Result *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeRPC(t *testing.T, b []byte) rpcResult {
	t.Helper()
	var r rpcResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return r
}

// answer is the structured content of a tool result, decoded.
type answer struct {
	Status       string `json:"status"`
	TicketID     string `json:"ticket_id"`
	Deduplicated bool   `json:"deduplicated"`
	Error        struct {
		Code string `json:"code"`
	} `json:"error"`
	Ticket *struct {
		TicketID string `json:"ticket_id"`
		Title    string `json:"title"`
	} `json:"ticket"`
}

// countingStore counts the store's calls and the tickets it created.
type countingStore struct {
	core.Store
	creates atomic.Int32
	created atomic.Int32
	reads   atomic.Int32
}

func (s *countingStore) Claims() idem.Store[core.Writes] { return core.ClaimFunc(s.claim) }

func (s *countingStore) claim(ctx context.Context, op idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	s.creates.Add(1)
	existing, err := s.Store.Claims().Claim(ctx, op, w, now)
	if err == nil && existing == nil {
		s.created.Add(1)
	}
	return existing, err
}

func (s *countingStore) Ticket(ctx context.Context, id string) (core.Ticket, error) {
	s.reads.Add(1)
	return s.Store.Ticket(ctx, id)
}

func (s *countingStore) calls() int32 { return s.creates.Load() + s.reads.Load() }

type countingUsers struct {
	core.Users
	lookups atomic.Int32
}

func (u *countingUsers) User(ctx context.Context, id string) (core.User, error) {
	u.lookups.Add(1)
	return u.Users.User(ctx, id)
}

// callTool calls tool through the Go client with request_id in _meta.
func callTool(ctx context.Context, t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, requestID string) (*mcp.CallToolResult, answer) {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if requestID != "" {
		p.Meta = mcp.Meta{mcpdoor.RequestIDMeta: requestID}
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return res, structured(t, res)
}

func structured(t *testing.T, res *mcp.CallToolResult) answer {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("content has %d items; want one text item", len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok || !callbacktest.SameJSON([]byte(text.Text), b) {
		t.Errorf("text content %v; want the structured content's JSON %s", res.Content[0], b)
	}
	return a
}
