package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
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
	// Transport carries the fetches (http.DefaultTransport when nil). The
	// client around it is Keys' own (see FetchClient): a caller's client
	// could follow a redirect anywhere.
	Transport http.RoundTripper
	Now       func() time.Time // time.Now when nil
	// Timeout bounds one fetch (discovery and the set); 5 s when zero.
	Timeout time.Duration

	mu     sync.RWMutex // the cache
	keys   map[string]any
	algs   map[string]string
	loaded bool

	fetchMu   sync.Mutex // one fetch at a time, and its bookkeeping
	jwksURL   string     // JWKSURL, or the discovered one
	lastFetch time.Time  // zero before the first attempt
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
// hop from serving its own key.
func FetchClient(transport http.RoundTripper, timeout time.Duration) *http.Client {
	return &http.Client{Transport: transport, Timeout: timeout, CheckRedirect: checkRedirect}
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
	resp, err := FetchClient(k.Transport, k.timeout()).Do(req)
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
