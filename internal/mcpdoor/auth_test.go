package mcpdoor_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// nothingDone fails t if the request read users or touched the store.
func (e *env) nothingDone(t *testing.T, what string, users, calls int32) {
	t.Helper()
	if got := e.users.lookups.Load(); got != users {
		t.Errorf("%s: %d user lookups; want %d", what, got, users)
	}
	if got := e.store.calls(); got != calls {
		t.Errorf("%s: %d store calls; want %d (nothing read or written)", what, got, calls)
	}
}

// TestHostileTokens: every token the contract refuses is answered 401
// with WWW-Authenticate naming the resource metadata and a short JSON
// body, and nothing is read or written.
func TestHostileTokens(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	// The JWK Set is loaded by a valid call first, so an unknown kid
	// below is one after the first load.
	if resp, b := e.post(e.token("user-a"), toolsCall("get_ticket", `{"ticket_id":"t"}`, "")); resp.StatusCode != 200 {
		t.Fatalf("valid token: %d %s", resp.StatusCode, b)
	}
	baseUsers, baseCalls := e.users.lookups.Load(), e.store.calls()
	now := e.clock.Now()
	pubDER, _ := x509.MarshalPKIXPublicKey(&e.iss.rsa.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	with := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := e.claims("user-a")
		mod(c)
		return c
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"rsa1"}`))
	payload, _ := json.Marshal(e.claims("user-a"))
	cases := map[string]string{
		"missing":         "",
		"malformed":       "not.a.jwt",
		"alg none":        header + "." + base64.RawURLEncoding.EncodeToString(payload) + ".",
		"HMAC public key": e.sign(jwt.SigningMethodHS256, "rsa1", pubPEM, e.claims("user-a")),
		"HMAC DER key":    e.sign(jwt.SigningMethodHS256, "rsa1", pubDER, e.claims("user-a")),
		"RS384":           e.sign(jwt.SigningMethodRS384, "rsa1", e.iss.rsa, e.claims("user-a")),
		"wrong key":       e.sign(jwt.SigningMethodRS256, "rsa1", other, e.claims("user-a")),
		"RSA kid, EC alg": e.sign(jwt.SigningMethodES256, "rsa1", e.iss.ec, e.claims("user-a")),
		"no kid":          e.sign(jwt.SigningMethodRS256, "", e.iss.rsa, e.claims("user-a")),
		"unknown kid":     e.sign(jwt.SigningMethodRS256, "rsa-unknown", e.iss.rsa, e.claims("user-a")),
		"wrong issuer":    e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example/" })),
		"no issuer":       e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { delete(c, "iss") })),
		"wrong audience":  e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { c["aud"] = "https://other.example/mcp" })),
		"no audience":     e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { delete(c, "aud") })),
		"expired":         e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-61 * time.Second).Unix() })),
		"no exp":          e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { delete(c, "exp") })),
		"not yet valid":   e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { c["nbf"] = now.Add(61 * time.Second).Unix() })),
		"issued ahead":    e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { c["iat"] = now.Add(61 * time.Second).Unix() })),
		"no user claim":   e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { delete(c, "sub") })),
		"user not string": e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(func(c jwt.MapClaims) { c["sub"] = 42 })),
	}
	fetches := e.iss.fetches.Load()
	for name, tok := range cases {
		resp, b := e.post(tok, toolsCall("create_ticket", `{"title":"Hostile"}`, `"req-hostile"`))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d %s; want 401", name, resp.StatusCode, b)
			continue
		}
		want := `Bearer resource_metadata="` + e.url + `/.well-known/oauth-protected-resource/mcp"`
		if got := resp.Header.Get("WWW-Authenticate"); got != want {
			t.Errorf("%s: WWW-Authenticate %q; want %q", name, got, want)
		}
		if string(b) != `{"error":"unauthenticated"}`+"\n" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: body %q (%s)", name, b, resp.Header.Get("Content-Type"))
		}
	}
	e.nothingDone(t, "hostile tokens", baseUsers, baseCalls)
	// One refetch for the unknown kids at most (the first unknown kid
	// after the load; the others fall within 30 s).
	if got := e.iss.fetches.Load() - fetches; got > 1 {
		t.Errorf("%d JWK Set fetches for the hostile tokens; want at most 1", got)
	}
	// Within the 60 s skew, the same claims pass.
	for name, mod := range map[string]func(jwt.MapClaims){
		"expired 30 s ago":   func(c jwt.MapClaims) { c["exp"] = now.Add(-30 * time.Second).Unix() },
		"valid in 30 s":      func(c jwt.MapClaims) { c["nbf"] = now.Add(30 * time.Second).Unix() },
		"issued 30 s ahead":  func(c jwt.MapClaims) { c["iat"] = now.Add(30 * time.Second).Unix() },
		"audience in a list": func(c jwt.MapClaims) { c["aud"] = []string{"https://other.example", e.audience} },
	} {
		tok := e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, with(mod))
		if resp, b := e.post(tok, toolsCall("get_ticket", `{"ticket_id":"t"}`, "")); resp.StatusCode != 200 {
			t.Errorf("%s: %d %s; want 200", name, resp.StatusCode, b)
		}
	}
	// ES256 with the EC key passes.
	if resp, b := e.post(e.sign(jwt.SigningMethodES256, "ec1", e.iss.ec, e.claims("user-a")), toolsCall("get_ticket", `{"ticket_id":"t"}`, "")); resp.StatusCode != 200 {
		t.Errorf("ES256: %d %s", resp.StatusCode, b)
	}
}

// TestUnknownKidFloodAndRotation: a flood of unknown kids costs the issuer
// one refetch per 30 s at most, and a rotated key works without a restart
// once the 30 s have passed.
func TestUnknownKidFloodAndRotation(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	if resp, _ := e.post(e.token("user-a"), toolsCall("get_ticket", `{"ticket_id":"t"}`, "")); resp.StatusCode != 200 {
		t.Fatal("valid token refused")
	}
	if got := e.iss.fetches.Load(); got != 1 {
		t.Fatalf("%d fetches after the first token; want 1", got)
	}
	e.clock.Advance(jwtauth.RefetchEvery + time.Second)
	for i := range 200 {
		tok := e.sign(jwt.SigningMethodRS256, fmt.Sprintf("flood-%d", i), e.iss.rsa, e.claims("user-a"))
		if resp, _ := e.post(tok, toolsCall("get_ticket", `{"ticket_id":"t"}`, "")); resp.StatusCode != 401 {
			t.Fatalf("flood token %d: %d; want 401", i, resp.StatusCode)
		}
	}
	if got := e.iss.fetches.Load(); got != 2 {
		t.Errorf("%d fetches after 200 unknown kids; want 2 (one refetch)", got)
	}
	rotated, _ := rsa.GenerateKey(rand.Reader, 2048)
	e.iss.rotate("rsa2", rotated)
	tok := e.sign(jwt.SigningMethodRS256, "rsa2", rotated, e.claims("user-a"))
	if resp, _ := e.post(tok, toolsCall("get_ticket", `{"ticket_id":"t"}`, "")); resp.StatusCode != 401 {
		t.Errorf("rotated key within 30 s of the last refetch: %d; want 401 (rate-limited)", resp.StatusCode)
	}
	e.clock.Advance(jwtauth.RefetchEvery)
	if resp, b := e.post(tok, toolsCall("get_ticket", `{"ticket_id":"t"}`, "")); resp.StatusCode != 200 {
		t.Errorf("rotated key after 30 s: %d %s; want 200", resp.StatusCode, b)
	}
	if got := e.iss.fetches.Load(); got != 3 {
		t.Errorf("%d fetches; want 3", got)
	}
}

// TestForbidden: a valid token of an unknown or disabled user is 403, as
// is one without the configured scopes (with error="insufficient_scope");
// nothing is written.
func TestForbidden(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{scopes: []string{"tickets"}})
	body := toolsCall("create_ticket", `{"title":"Forbidden"}`, `"req-forbidden"`)
	scoped := func(user, scope string) string {
		c := e.claims(user)
		if scope != "" {
			c["scope"] = scope
		}
		return e.sign(jwt.SigningMethodRS256, "rsa1", e.iss.rsa, c)
	}
	resp, b := e.post(scoped("user-a", "openid"), body)
	if resp.StatusCode != 403 || string(b) != `{"error":"forbidden"}`+"\n" {
		t.Errorf("missing scope: %d %s; want 403", resp.StatusCode, b)
	}
	want := `Bearer error="insufficient_scope", resource_metadata="` + e.url + `/.well-known/oauth-protected-resource/mcp", scope="tickets"`
	if got := resp.Header.Get("WWW-Authenticate"); got != want {
		t.Errorf("WWW-Authenticate %q; want %q", got, want)
	}
	e.nothingDone(t, "missing scope", 0, 0)
	for _, user := range []string{"user-x", "user-d"} {
		resp, b := e.post(scoped(user, "openid tickets"), body)
		if resp.StatusCode != 403 || string(b) != `{"error":"forbidden"}`+"\n" {
			t.Errorf("%s: %d %s; want 403", user, resp.StatusCode, b)
		}
	}
	e.nothingDone(t, "unknown and disabled users", 2, 0)
	if resp, b := e.post(scoped("user-a", "openid tickets"), body); resp.StatusCode != 200 || !strings.Contains(string(b), `\"created\"`) {
		t.Errorf("with the scope: %d %s", resp.StatusCode, b)
	}
}

// TestBeforeAuth: GET and DELETE are 405 and a body over the limit 413,
// without a token being asked for and with nothing read or written.
func TestBeforeAuth(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{maxBody: 2048})
	for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPut} {
		resp, b := e.do(m, e.audience, "", "")
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" || string(b) != `{"error":"method_not_allowed"}`+"\n" {
			t.Errorf("%s: %d %s allow %q", m, resp.StatusCode, b, resp.Header.Get("Allow"))
		}
	}
	big := toolsCall("create_ticket", `{"title":"`+strings.Repeat("a", 3000)+`"}`, `"req-big"`)
	for _, tok := range []string{"", e.token("user-a")} {
		resp, b := e.post(tok, big)
		if resp.StatusCode != 413 || string(b) != `{"error":"too_large"}`+"\n" {
			t.Errorf("over the limit: %d %s; want 413", resp.StatusCode, b)
		}
	}
	e.nothingDone(t, "refused before authentication", 0, 0)
	if got := e.iss.fetches.Load(); got != 0 {
		t.Errorf("%d JWK Set fetches; want none before authentication", got)
	}
}

// TestProtectedResourceMetadata: RFC 9728 metadata at both paths,
// unauthenticated.
func TestProtectedResourceMetadata(t *testing.T) {
	for _, scopes := range [][]string{nil, {"tickets"}} {
		e := newEnv(t, memtest.New(), envOptions{scopes: scopes})
		want := `{"resource":"` + e.audience + `","authorization_servers":["` + e.iss.srv.URL + `"],"bearer_methods_supported":["header"]}`
		if scopes != nil {
			want = `{"resource":"` + e.audience + `","authorization_servers":["` + e.iss.srv.URL + `"],"scopes_supported":["tickets"],"bearer_methods_supported":["header"]}`
		}
		for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
			resp, b := e.do(http.MethodGet, e.url+p, "", "")
			if resp.StatusCode != 200 || !callbacktest.SameJSON(b, []byte(want)) {
				t.Errorf("%s: %d %s; want %s", p, resp.StatusCode, b, want)
			}
		}
	}
}

// TestOneUserLookup: a tool call reads its user's record once, in the
// door's check after the token; the service answers on that record.
func TestOneUserLookup(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	before := e.users.lookups.Load()
	if resp, b := e.post(e.token("user-a"), toolsCall("create_ticket", `{"title":"Once"}`, `"req-once"`)); resp.StatusCode != 200 || !strings.Contains(string(b), `\"created\"`) {
		t.Fatalf("create_ticket: %d %s", resp.StatusCode, b)
	}
	if got := e.users.lookups.Load() - before; got != 1 {
		t.Errorf("%d user lookups for one tool call; want 1", got)
	}
}
