package jwtauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"

	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
)

// TestCheckURL: https anywhere, http only on loopback, no credentials.
func TestCheckURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://login.example.com/":         true,
		"http://127.0.0.1:8080/issuer":       true,
		"http://localhost:3210/dev-issuer":   true,
		"http://[::1]:9/x":                   true,
		"http://login.example.com/":          false,
		"http://10.0.0.1/":                   false,
		"ftp://login.example.com/":           false,
		"login.example.com":                  false,
		"https://user:pw@login.example.com/": false,
	} {
		if err := jwtauth.CheckURL(raw); (err == nil) != ok {
			t.Errorf("CheckURL(%q) = %v; want ok %v", raw, err, ok)
		}
	}
}

// devIssuer is a development issuer whose key file is in a folder of the
// test's.
func devIssuer(t *testing.T) *jwtauth.DevIssuer {
	t.Helper()
	dev, err := jwtauth.LoadDevIssuer(filepath.Join(t.TempDir(), "k.pem"), "")
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// writeSet writes dev's public key to w as a JWK Set.
func writeSet(t *testing.T, w http.ResponseWriter, dev *jwtauth.DevIssuer) {
	t.Helper()
	j, err := jwkset.NewJWKFromKey(&dev.Key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: dev.KID, ALG: jwkset.AlgES256}})
	if err != nil {
		t.Error(err) // served from the test server's goroutine: Error, not Fatal
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{j.Marshal()}})
}

// issuerServer serves dev's key as a JWK Set at /jwks, with metadata at
// the paths given (path → document).
func issuerServer(t *testing.T, dev *jwtauth.DevIssuer, meta func(base string) map[string]any) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jwks" {
			writeSet(t, w, dev)
			return
		}
		if doc, ok := meta(srv.URL)[r.URL.Path]; ok {
			_ = json.NewEncoder(w).Encode(doc)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDiscovery: the JWK Set is found through OpenID discovery, else
// through OAuth authorization server metadata (RFC 8414, path inserted);
// metadata naming another issuer is refused, and so is a failed discovery
// (not a 401 but an error: no key can be had).
func TestDiscovery(t *testing.T) {
	dev := devIssuer(t)
	cases := map[string]struct {
		path string // the issuer's path
		meta func(base string) map[string]any
		ok   bool
	}{
		"openid": {"", func(b string) map[string]any {
			return map[string]any{"/.well-known/openid-configuration": map[string]string{"issuer": b, "jwks_uri": b + "/jwks"}}
		}, true},
		"oauth, path inserted": {"/tenant1", func(b string) map[string]any {
			return map[string]any{"/.well-known/oauth-authorization-server/tenant1": map[string]string{"issuer": b + "/tenant1", "jwks_uri": b + "/jwks"}}
		}, true},
		"other issuer": {"", func(b string) map[string]any {
			return map[string]any{"/.well-known/openid-configuration": map[string]string{"issuer": "https://evil.example", "jwks_uri": b + "/jwks"}}
		}, false},
		"http jwks off loopback": {"", func(b string) map[string]any {
			return map[string]any{"/.well-known/openid-configuration": map[string]string{"issuer": b, "jwks_uri": "http://jwks.example/keys"}}
		}, false},
		"none": {"", func(string) map[string]any { return nil }, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := issuerServer(t, dev, c.meta)
			iss := srv.URL + c.path
			dev.Issuer = iss
			tok, err := dev.Token("sub", "user-a", "https://tickets.example/mcp", nil, time.Now(), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			v := &jwtauth.Verifier{Issuer: iss, Audience: "https://tickets.example/mcp", UserClaim: "sub", Keys: &jwtauth.Keys{Issuer: iss}}
			got, err := v.Verify(context.Background(), tok)
			switch {
			case c.ok && (err != nil || got.User != "user-a"):
				t.Errorf("Verify = %+v, %v; want user-a", got, err)
			case !c.ok && (err == nil || errors.Is(err, jwtauth.ErrInvalid)):
				t.Errorf("Verify error %v; want a key error that is not ErrInvalid (500, not 401)", err)
			case err != nil && strings.Contains(err.Error(), tok):
				t.Errorf("the error carries the token: %v", err)
			}
		})
	}
}

// TestFailedLoadRetriesAfter30s: a JWK Set that cannot be fetched is
// tried again only after RefetchEvery.
func TestFailedLoadRetriesAfter30s(t *testing.T) {
	var hits atomic.Int32
	down := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	t.Cleanup(srv.Close)
	now := time.Now()
	k := &jwtauth.Keys{JWKSURL: srv.URL, Now: func() time.Time { return now }}
	for range 5 {
		if _, err := k.Key(context.Background(), "a", "ES256"); err == nil || errors.Is(err, jwtauth.ErrInvalid) {
			t.Fatalf("Key with the set down: %v; want a load error", err)
		}
	}
	if hits.Load() != 1 {
		t.Errorf("%d fetches within 30 s; want 1", hits.Load())
	}
	down = false
	now = now.Add(jwtauth.RefetchEvery)
	if _, err := k.Key(context.Background(), "a", "ES256"); !errors.Is(err, jwtauth.ErrInvalid) {
		t.Errorf("Key after the set is back: %v; want unknown kid (ErrInvalid)", err)
	}
	if hits.Load() != 2 {
		t.Errorf("%d fetches; want 2", hits.Load())
	}
}

// TestDevIssuer: the key file is made once, 0600, and read back with the
// same kid; a file that is not a key is an error naming what to do.
func TestDevIssuer(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mcp-dev-key.pem")
	a, err := jwtauth.LoadDevIssuer(p, "http://127.0.0.1:3210/dev-issuer")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v; want mode 0600", fi, err)
	}
	b, err := jwtauth.LoadDevIssuer(p, "http://127.0.0.1:3210/dev-issuer")
	if err != nil || b.KID != a.KID || !a.Key.Equal(b.Key) {
		t.Fatalf("second load: %v; want the same key", err)
	}
	if err := os.WriteFile(p, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := jwtauth.LoadDevIssuer(p, "x"); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("a broken key file: %v", err)
	}
}

// TestCachedKidDoesNotWaitForRefetch: while a refetch for an unknown kid
// hangs on the issuer, a token with a cached kid is still verified (it
// would block here, and the test time out, if it waited for the fetch).
func TestCachedKidDoesNotWaitForRefetch(t *testing.T) {
	dev := devIssuer(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			entered <- struct{}{}
			<-release
		}
		writeSet(t, w, dev)
	}))
	defer srv.Close()
	now := time.Now()
	k := &jwtauth.Keys{JWKSURL: srv.URL, Now: func() time.Time { return now }, Timeout: time.Minute}
	if _, err := k.Key(context.Background(), dev.KID, "ES256"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(jwtauth.RefetchEvery)
	done := make(chan error, 1)
	go func() {
		_, err := k.Key(context.Background(), "rotated", "ES256")
		done <- err
	}()
	<-entered
	if _, err := k.Key(context.Background(), dev.KID, "ES256"); err != nil {
		t.Errorf("cached kid during a refetch: %v", err)
	}
	close(release)
	if err := <-done; !errors.Is(err, jwtauth.ErrInvalid) {
		t.Errorf("unknown kid after the refetch: %v; want ErrInvalid", err)
	}
}

// recording is a transport that notes every URL it is asked for.
type recording struct {
	next http.RoundTripper
	mu   sync.Mutex
	urls []string
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

// TestJWKSRedirects: an https JWK Set URL that redirects to plain http off
// loopback is refused on the redirect's URL itself, before any connection
// to it: no key, an error naming the rule (the door logs it and answers
// 500), and the transport asked for the https URL only. A redirect to
// https, or to http on loopback, is followed; more than MaxRedirects hops
// are refused.
func TestJWKSRedirects(t *testing.T) {
	dev := devIssuer(t)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeSet(t, w, dev) }))
	t.Cleanup(plain.Close)
	var tls *httptest.Server
	tls = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/keys":
			writeSet(t, w, dev)
		case "/to-https":
			http.Redirect(w, r, tls.URL+"/keys", http.StatusFound)
		case "/to-loopback-http":
			http.Redirect(w, r, plain.URL+"/keys", http.StatusMovedPermanently)
		case "/to-plain-http":
			// A host that is not loopback: the redirect must be refused
			// on its URL, since nothing here could answer it.
			http.Redirect(w, r, "http://jwks.example.invalid/keys", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, tls.URL+"/loop", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(tls.Close)
	for _, c := range []struct {
		path, refused string // refused: the error's text; "" when the key is had
	}{
		{"/keys", ""},
		{"/to-https", ""},
		{"/to-loopback-http", ""},
		{"/to-plain-http", "https is required except on loopback"},
		{"/loop", "more than 3 redirects"},
	} {
		t.Run(c.path, func(t *testing.T) {
			tr := &recording{next: tls.Client().Transport}
			k := &jwtauth.Keys{JWKSURL: tls.URL + c.path, Transport: tr}
			key, err := k.Key(context.Background(), dev.KID, "ES256")
			if c.refused == "" {
				if err != nil || key == nil {
					t.Fatalf("Key = %v, %v; want the key through the redirect", key, err)
				}
				return
			}
			if err == nil || errors.Is(err, jwtauth.ErrInvalid) || !strings.Contains(err.Error(), c.refused) {
				t.Fatalf("Key error %v; want a load error saying %q", err, c.refused)
			}
			for _, u := range tr.urls {
				if !strings.HasPrefix(u, tls.URL) {
					t.Errorf("the transport was asked for %s; the refused hop must not be requested", u)
				}
			}
		})
	}
}
