package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/MicahParks/jwkset"

	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

// RefetchEvery is the least time between two fetches of the JWK Set: after
// the first load, a token whose kid is not cached triggers one refetch, at
// most one per RefetchEvery, so a rotated key works without a restart and a
// flood of unknown kids cannot hammer the issuer.
const RefetchEvery = 30 * time.Second

// maxDocument bounds a JWK Set or metadata document read from the issuer.
const maxDocument = 1 << 20

// Keys is the issuer's JWK Set, fetched on first use and cached for the
// life of the process. A kid that is not cached refetches the set, at
// most once per RefetchEvery; a request that finds the refetch spent is
// refused at once (it never waits for the next one). Requests with an
// unknown kid that arrive while a fetch is under way wait for that fetch
// and read its keys; requests with a cached kid never wait.
type Keys struct {
	// Issuer is discovered from when JWKSURL is empty: its
	// /.well-known/openid-configuration, then its
	// /.well-known/oauth-authorization-server, field jwks_uri.
	Issuer  string
	JWKSURL string
	// Transport carries the fetches. When nil or an *http.Transport (whose
	// TLS settings are kept), Keys dials itself, through Resolver and the
	// dial rule (see FetchTransport); a RoundTripper of another kind makes
	// its own connections, unchecked, and is for tests that answer
	// in-process. The client around it is Keys' own (see FetchClient): a
	// caller's client could follow a redirect anywhere.
	Transport http.RoundTripper
	// Resolver finds the addresses of the hosts Keys dials
	// (net.DefaultResolver when nil); tests give one that never leaves
	// the machine.
	Resolver Resolver
	Now      func() time.Time // time.Now when nil
	// Timeout bounds one fetch (discovery and the set); 5 s when zero.
	Timeout time.Duration

	mu     sync.RWMutex // the cache
	keys   map[string]any
	algs   map[string]string
	loaded bool

	fetchMu   sync.Mutex   // one fetch at a time, and its bookkeeping
	jwksURL   string       // JWKSURL, or the discovered one
	lastFetch time.Time    // zero before the first attempt
	client    *http.Client // the fetches' client, made on first use
}

// Key implements KeySource.
func (k *Keys) Key(ctx context.Context, kid, alg string) (any, error) {
	if key, ok, _ := k.cached(kid, alg); ok {
		return key, nil
	}
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	// A fetch this request waited for may have brought the key.
	if key, ok, _ := k.cached(kid, alg); ok {
		return key, nil
	}
	now := k.now()
	if !k.lastFetch.IsZero() && now.Sub(k.lastFetch) < RefetchEvery {
		if _, _, loaded := k.cached("", ""); !loaded {
			return nil, errors.New("jwks: not loaded; the last fetch failed")
		}
		return nil, fmt.Errorf("%w: unknown kid", ErrInvalid)
	}
	k.lastFetch = now
	if err := k.fetch(ctx); err != nil {
		if _, _, loaded := k.cached("", ""); !loaded {
			return nil, err
		}
		return nil, fmt.Errorf("%w: unknown kid (refetch failed: %v)", ErrInvalid, err)
	}
	if key, ok, _ := k.cached(kid, alg); ok {
		return key, nil
	}
	return nil, fmt.Errorf("%w: unknown kid", ErrInvalid)
}

// cached looks kid up for alg, and says whether a set was ever loaded.
func (k *Keys) cached(kid, alg string) (key any, ok, loaded bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	key, ok = k.keys[kid]
	if ok {
		if a := k.algs[kid]; a != "" && a != alg {
			key, ok = nil, false
		}
	}
	return key, ok, k.loaded
}

func (k *Keys) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *Keys) timeout() time.Duration {
	if k.Timeout <= 0 {
		return 5 * time.Second
	}
	return k.Timeout
}

// MaxRedirects is the most redirects one fetch of a metadata document or
// JWK Set follows.
const MaxRedirects = 3

// FetchClient is the client of the discovery and JWK Set fetches: through
// transport (http.DefaultTransport when nil), bounded by timeout, and
// following a redirect only to a URL that CheckURL accepts (https, or http
// on loopback) and, from a host that is not loopback, never to one that
// is, at most MaxRedirects times. A refused hop fails the fetch before any
// connection to its URL; the error names the URL and the rule. Following
// such redirects (rather than none) keeps an issuer whose documents moved
// behind a redirect working, and checking every hop keeps a plain-http
// hop from serving its own key. The redirect rule reads names only
// (0.0.0.0, localhost. or a DNS name may still reach this machine): the
// address rule is the transport's (FetchTransport).
func FetchClient(transport http.RoundTripper, timeout time.Duration) *http.Client {
	return &http.Client{Transport: transport, Timeout: timeout, CheckRedirect: checkRedirect}
}

// Resolver finds a host's addresses, as *net.Resolver's LookupNetIP does.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// FetchTransport is the transport of the discovery and JWK Set fetches:
// base's settings (TLS among them; a fresh transport's when base is nil),
// with a dialer of its own that resolves a host through resolver
// (net.DefaultResolver when nil) and connects to each of its addresses in
// turn through a net.Dialer whose Control applies CheckDialed to the
// address about to be connected, before the connection is made. So the
// rule reads the address actually dialed, whatever the URL's spelling
// (0.0.0.0, [::], localhost., sub.localhost, 127.1, a DNS name that
// resolves to 127.0.0.1) and whichever hop of a redirect dials it. No
// proxy is used: through one, the address dialed would be the proxy's,
// and the target's would go unchecked. base's DialContext and
// DialTLSContext are replaced for the same reason.
func FetchTransport(base *http.Transport, resolver Resolver, allowLoopback bool) *http.Transport {
	var t *http.Transport
	if base != nil {
		t = base.Clone()
	} else {
		t = &http.Transport{
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          10,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	d := &fetchDialer{resolver: resolver, allowLoopback: allowLoopback}
	t.Proxy = nil
	t.DialContext = d.DialContext
	t.DialTLSContext = nil
	t.DialTLS = nil //nolint:staticcheck // cleared: when set, it would dial https in place of DialContext
	return t
}

// CheckDialed is the rule for an address a discovery or JWK Set fetch
// connects to: never an unspecified address (0.0.0.0, ::, which connect
// to this machine) or one of 0.0.0.0/8, never a link-local one
// (169.254.0.0/16, fe80::/10: the cloud's metadata services among them),
// and never a loopback one (127.0.0.0/8, ::1) unless allowLoopback, which
// only an issuer configured on loopback (the development issuer, tests)
// has. IPv4-mapped IPv6 addresses are judged as the IPv4 address.
func CheckDialed(ip netip.Addr, allowLoopback bool) error {
	ip = ip.Unmap()
	switch {
	case ip.IsUnspecified() || (ip.Is4() && ip.As4()[0] == 0):
		return fmt.Errorf("%s is an unspecified address (this machine)", ip)
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return fmt.Errorf("%s is a link-local address", ip)
	case ip.IsLoopback() && !allowLoopback:
		return fmt.Errorf("%s is a loopback address, and the issuer is not on this machine", ip)
	}
	return nil
}

// fetchDialer is FetchTransport's dialer.
type fetchDialer struct {
	resolver      Resolver
	allowLoopback bool
}

// DialContext resolves addr's host (an IP address is its own) and
// connects to its addresses in turn, returning the first connection made
// or the first error.
func (d *fetchDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		lookup := "ip"
		switch network {
		case "tcp4":
			lookup = "ip4"
		case "tcp6":
			lookup = "ip6"
		}
		if ips, err = d.resolver.LookupNetIP(ctx, lookup, host); err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("lookup %s: no addresses", host)
		}
	}
	nd := &net.Dialer{KeepAlive: 30 * time.Second, ControlContext: d.control}
	var first error
	for _, ip := range ips {
		c, err := nd.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// control refuses, before the connection is made, an address CheckDialed
// refuses: address is the one the socket is about to connect to.
func (d *fetchDialer) control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused: %q is not an IP address and port", address)
	}
	if err := CheckDialed(ap.Addr(), d.allowLoopback); err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	return nil
}

// allowLoopback reports whether every URL configured (Issuer, JWKSURL)
// names this machine: only then may a fetch connect to a loopback
// address.
func (k *Keys) allowLoopback() bool {
	if k.Issuer == "" && k.JWKSURL == "" {
		return false
	}
	return (k.Issuer == "" || Loopback(k.Issuer)) && (k.JWKSURL == "" || Loopback(k.JWKSURL))
}

// httpClient is the fetches' client, made on first use: FetchClient over
// Transport, made a FetchTransport when Keys dials itself. Its pool of
// idle connections serves the refetches. fetchMu is held.
func (k *Keys) httpClient() *http.Client {
	if k.client == nil {
		tr := k.Transport
		switch base := tr.(type) {
		case nil:
			tr = FetchTransport(nil, k.Resolver, k.allowLoopback())
		case *http.Transport:
			tr = FetchTransport(base, k.Resolver, k.allowLoopback())
		}
		k.client = FetchClient(tr, k.timeout())
	}
	return k.client
}

// checkRedirect is FetchClient's rule for one redirect to req, via the
// requests made so far.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("redirect to %q: more than %d redirects", req.URL.Redacted(), MaxRedirects)
	}
	if err := CheckURL(req.URL.String()); err != nil {
		return fmt.Errorf("redirect refused: %w", err)
	}
	if prev := via[len(via)-1].URL; !urls.Loopback(prev.Hostname()) && urls.Loopback(req.URL.Hostname()) {
		return fmt.Errorf("redirect refused: %q leads from %s to loopback", req.URL.Redacted(), prev.Hostname())
	}
	return nil
}

func (k *Keys) fetch(ctx context.Context) error {
	timeout := k.timeout()
	// The fetch serves every request waiting for the lock, so one
	// request's cancellation must not cut it short; the timeout bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if k.jwksURL == "" {
		u := k.JWKSURL
		if u == "" {
			var err error
			if u, err = k.discover(ctx); err != nil {
				return err
			}
		}
		if err := CheckURL(u); err != nil {
			return fmt.Errorf("jwks_uri: %w", err)
		}
		k.jwksURL = u
	}
	var set jwkset.JWKSMarshal
	if err := k.getJSON(ctx, k.jwksURL, &set); err != nil {
		return fmt.Errorf("jwks: %w", err)
	}
	keys, algs := map[string]any{}, map[string]string{}
	for _, m := range set.Keys {
		if m.KID == "" || (m.USE != "" && m.USE != jwkset.UseSig) {
			continue
		}
		if m.ALG != "" && m.ALG.String() != Algorithms[0] && m.ALG.String() != Algorithms[1] {
			continue
		}
		j, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			continue // a key this package cannot use is skipped, as RFC 7517 asks
		}
		keys[m.KID], algs[m.KID] = j.Key(), m.ALG.String()
	}
	k.mu.Lock()
	k.keys, k.algs, k.loaded = keys, algs, true
	k.mu.Unlock()
	return nil
}

// discover finds the issuer's jwks_uri: OpenID Connect discovery first,
// then OAuth 2.0 authorization server metadata (RFC 8414, the well-known
// path inserted before the issuer's path). The document's issuer must be
// the configured one.
func (k *Keys) discover(ctx context.Context) (string, error) {
	iss := strings.TrimRight(k.Issuer, "/")
	var tried []string
	for _, u := range discoveryURLs(k.Issuer) {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		err := k.getJSON(ctx, u, &meta)
		switch {
		case err != nil:
			tried = append(tried, fmt.Sprintf("%s: %v", u, err))
		case strings.TrimRight(meta.Issuer, "/") != iss:
			tried = append(tried, fmt.Sprintf("%s: names issuer %q", u, meta.Issuer))
		case meta.JWKSURI == "":
			tried = append(tried, u+": no jwks_uri")
		default:
			return meta.JWKSURI, nil
		}
	}
	return "", fmt.Errorf("jwks discovery: %s", strings.Join(tried, "; "))
}

func discoveryURLs(issuer string) []string {
	trimmed := strings.TrimRight(issuer, "/")
	out := []string{trimmed + "/.well-known/openid-configuration"}
	if i := strings.Index(trimmed, "://"); i >= 0 {
		if j := strings.IndexByte(trimmed[i+3:], '/'); j >= 0 {
			host, path := trimmed[:i+3+j], trimmed[i+3+j:]
			return append(out, host+"/.well-known/oauth-authorization-server"+path)
		}
	}
	return append(out, trimmed+"/.well-known/oauth-authorization-server")
}

func (k *Keys) getJSON(ctx context.Context, u string, v any) error {
	if err := CheckURL(u); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return err
	}
	if len(b) > maxDocument {
		return errors.New("document over 1 MiB")
	}
	return json.Unmarshal(b, v)
}

// StaticKey is a KeySource of one key: the development issuer's, known to
// the process that made it.
type StaticKey struct {
	KID    string
	Alg    string
	Public any
}

// Key implements KeySource.
func (s StaticKey) Key(_ context.Context, kid, alg string) (any, error) {
	if kid != s.KID || alg != s.Alg {
		return nil, fmt.Errorf("%w: unknown kid", ErrInvalid)
	}
	return s.Public, nil
}
