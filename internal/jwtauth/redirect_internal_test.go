package jwtauth

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCheckRedirect: each hop obeys CheckURL, and a hop from a host that
// is not loopback never leads to one that is (a real issuer cannot point
// the fetch at the server's own machine); loopback to loopback is the
// development issuer's and is followed.
func TestCheckRedirect(t *testing.T) {
	req := func(u string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		from, to string
		refused  string // "" when followed
	}{
		{"https://login.example.com/jwks", "https://cdn.example.net/jwks", ""},
		{"https://127.0.0.1:8443/jwks", "http://127.0.0.1:8080/jwks", ""},
		{"http://localhost:3210/jwks", "https://login.example.com/jwks", ""},
		{"https://login.example.com/jwks", "http://cdn.example.net/jwks", "https is required"},
		{"https://127.0.0.1:8443/jwks", "http://10.0.0.1/jwks", "https is required"},
		{"https://login.example.com/jwks", "http://127.0.0.1/jwks", "to loopback"},
		{"https://login.example.com/jwks", "https://localhost/jwks", "to loopback"},
		{"https://login.example.com/jwks", "https://user:pw@cdn.example.net/jwks", "credentials"},
		{"https://login.example.com/jwks", "file:///etc/passwd", "not an absolute https URL"},
	} {
		err := checkRedirect(req(c.to), []*http.Request{req(c.from)})
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s → %s refused: %v; want followed", c.from, c.to, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s → %s: %v; want refused, saying %q", c.from, c.to, err, c.refused)
		}
	}
	via := []*http.Request{req("https://a.example/1"), req("https://a.example/2"), req("https://a.example/3"), req("https://a.example/4")}
	if err := checkRedirect(req("https://a.example/5"), via); err == nil {
		t.Errorf("a redirect after %d hops was followed; at most %d are", len(via)-1, MaxRedirects)
	}
}

// testResolver resolves from its table only, so no lookup leaves the
// machine; a name not in it does not resolve.
type testResolver map[string][]netip.Addr

func (r testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ips, ok := r[host]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "not in the test resolver", Name: host, IsNotFound: true}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingServer is a TLS server on loopback serving an empty JWK Set,
// with the number of connections it accepted.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// remoteFront answers the requests to login.example.com in-process (the
// remote issuer, which no test may dial) with answer, and sends every
// other request through next: the transport Keys dials with.
func remoteFront(next http.RoundTripper, answer func(*http.Request) *http.Response) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Host == "login.example.com" {
			resp := answer(r)
			resp.Request = r
			return resp, nil
		}
		return next.RoundTrip(r)
	})
}

func redirectTo(target string) *http.Response {
	return &http.Response{StatusCode: http.StatusFound, Header: http.Header{"Location": {target}}, Body: http.NoBody}
}

// TestRemoteIssuerNeverLandsOnThisMachine: a remote issuer's discovery or
// JWK Set fetch never connects to a loopback, unspecified or link-local
// address, however the URL spells it (0.0.0.0, [::], localhost.,
// sub.localhost, 127.1, an IPv4-mapped address, a DNS name resolving to
// 127.0.0.1, 169.254.169.254, fe80::1) and whichever way the fetch gets
// there: a redirect of the JWK Set fetch, a redirect of the discovery
// fetch, or the jwks_uri discovery names. The address dialed is refused
// before the connection is made: the error says which rule, and the
// loopback server on the port every URL names saw no connection. Names
// resolve through a test resolver; the remote host is answered
// in-process.
func TestRemoteIssuerNeverLandsOnThisMachine(t *testing.T) {
	srv, conns := countingServer(t)
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	loop4, loop6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	resolver := testResolver{
		"localhost.":          {loop4},
		"sub.localhost":       {loop6, loop4},
		"127.1":               {loop4}, // as inet_aton (the C library's resolver) reads it
		"rebound.example.net": {loop4},
	}
	targets := []struct{ host, says string }{
		{"0.0.0.0", "unspecified"},
		{"[::]", "unspecified"},
		{"localhost.", "loopback"},
		{"sub.localhost", "loopback"},
		{"127.1", "loopback"},
		{"[::ffff:127.0.0.1]", "loopback"},
		{"rebound.example.net", "loopback"},
		{"169.254.169.254", "link-local"},
		{"[fe80::1]", "link-local"},
	}
	const iss = "https://login.example.com"
	ways := []struct {
		name string
		keys func() *Keys
		// answer is login.example.com's answer, given the target URL.
		answer func(target string, r *http.Request) *http.Response
	}{
		{"JWK Set redirect", func() *Keys { return &Keys{JWKSURL: iss + "/jwks"} },
			func(target string, _ *http.Request) *http.Response { return redirectTo(target) }},
		{"discovery redirect", func() *Keys { return &Keys{Issuer: iss} },
			func(target string, _ *http.Request) *http.Response { return redirectTo(target) }},
		{"discovered jwks_uri", func() *Keys { return &Keys{Issuer: iss} },
			func(target string, r *http.Request) *http.Response {
				if !strings.HasPrefix(r.URL.Path, "/.well-known/") {
					return &http.Response{StatusCode: http.StatusNotFound, Body: http.NoBody}
				}
				doc := `{"issuer":"` + iss + `","jwks_uri":"` + target + `"}`
				return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(doc))}
			}},
	}
	for _, way := range ways {
		for _, tg := range targets {
			target := "https://" + tg.host + ":" + port + "/keys"
			t.Run(way.name+" to "+tg.host, func(t *testing.T) {
				k := way.keys()
				k.Resolver = resolver
				k.Transport = srv.Client().Transport // trusts srv: a dial that got through would fetch
				hc := k.httpClient()
				hc.Transport = remoteFront(hc.Transport, func(r *http.Request) *http.Response { return way.answer(target, r) })
				before := conns.Load()
				_, err := k.Key(context.Background(), "kid", "ES256")
				if err == nil || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), tg.says) {
					t.Errorf("Key error %v; want the fetch refused, saying %q", err, tg.says)
				}
				if n := conns.Load() - before; n != 0 {
					t.Errorf("the loopback server accepted %d connections; want none", n)
				}
			})
		}
	}
}

// TestRemoteIssuerNameOnLoopbackRefused: an issuer configured by a name
// that is not this machine's, resolving to 127.0.0.1, is refused on its
// first fetch, before connecting; the same server as a loopback issuer's
// JWK Set URL is fetched (the development issuer and the tests).
func TestRemoteIssuerNameOnLoopbackRefused(t *testing.T) {
	srv, conns := countingServer(t)
	u, _ := url.Parse(srv.URL)
	resolver := testResolver{"idp.example.com": {netip.MustParseAddr("127.0.0.1")}}
	for _, k := range []*Keys{
		{Issuer: "https://idp.example.com:" + u.Port(), Resolver: resolver, Transport: srv.Client().Transport},
		{JWKSURL: "https://idp.example.com:" + u.Port() + "/keys", Resolver: resolver, Transport: srv.Client().Transport},
		{Issuer: "https://idp.example.com", JWKSURL: srv.URL + "/keys", Resolver: resolver, Transport: srv.Client().Transport},
	} {
		_, err := k.Key(context.Background(), "kid", "ES256")
		if err == nil || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "loopback address, and the issuer is not on this machine") {
			t.Errorf("issuer %q, JWK Set %q: Key error %v; want the dial refused", k.Issuer, k.JWKSURL, err)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the loopback server accepted %d connections; want none", n)
	}
	k := &Keys{JWKSURL: srv.URL + "/keys", Transport: srv.Client().Transport}
	if _, err := k.Key(context.Background(), "kid", "ES256"); !errors.Is(err, ErrInvalid) {
		t.Errorf("loopback JWK Set URL: Key error %v; want the set loaded and the kid unknown", err)
	}
}

// TestCheckDialed: the address rule, for a remote issuer and for one on
// loopback.
func TestCheckDialed(t *testing.T) {
	for _, c := range []struct {
		addr             string
		remote, loopback bool // allowed for a remote issuer, for a loopback one
	}{
		{"93.184.215.14", true, true},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", true, true},
		{"10.0.0.1", true, true},
		{"127.0.0.1", false, true},
		{"127.1.2.3", false, true},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"0.0.0.0", false, false},
		{"0.1.2.3", false, false},
		{"::", false, false},
		{"::ffff:0.0.0.0", false, false},
		{"169.254.169.254", false, false},
		{"fe80::1", false, false},
		{"fe80::1%eth0", false, false},
		{"::ffff:169.254.1.1", false, false},
	} {
		ip := netip.MustParseAddr(c.addr)
		if got := CheckDialed(ip, false) == nil; got != c.remote {
			t.Errorf("CheckDialed(%s, remote issuer) allowed = %t; want %t", c.addr, got, c.remote)
		}
		if got := CheckDialed(ip, true) == nil; got != c.loopback {
			t.Errorf("CheckDialed(%s, loopback issuer) allowed = %t; want %t", c.addr, got, c.loopback)
		}
	}
}
