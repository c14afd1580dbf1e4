// Package jwtauth verifies the OAuth 2.1 access tokens of the MCP door
// (docs/contract.md, The MCP door: Authentication): JWTs signed with RS256
// or ES256 by the configured issuer, the key found by kid in the issuer's
// JWK Set. Parsing and the checks of the registered claims are
// github.com/golang-jwt/jwt/v5's; JWK parsing is
// github.com/MicahParks/jwkset's; fetching and caching the JWK Set is
// Keys', whose refetch rule (at most one per RefetchEvery, never waiting for
// one) is the contract's.
//
// A token never appears in an error, a log line or a panic of this package.
package jwtauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

// Algorithms are the only signature algorithms accepted: none, HMAC
// (whose "key" would be the public key's bytes) and every other algorithm
// are refused before a key is looked up.
var Algorithms = []string{jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg()}

// MaxSkew is the clock skew tolerated either way on exp, nbf and iat.
const MaxSkew = 60 * time.Second

// ErrInvalid: the token is missing, malformed, or fails a check. The
// request is answered 401.
var ErrInvalid = errors.New("invalid token")

// KeySource finds the verification key of a token's kid.
type KeySource interface {
	// Key returns the public key named kid for a token signed with alg.
	// An unknown kid is an error wrapping ErrInvalid; a JWK Set that
	// cannot be had at all is another error (the request fails 500).
	Key(ctx context.Context, kid, alg string) (any, error)
}

// Verifier checks access tokens.
type Verifier struct {
	Issuer    string
	Audience  string
	UserClaim string // the claim naming the user, e.g. "sub"
	Keys      KeySource
	Now       func() time.Time // time.Now when nil
}

// Token is what a verified token says.
type Token struct {
	User   string   // the value of the user claim
	Scopes []string // the scope claim, split on spaces
}

// Verify checks raw and returns what it says. Every failure wraps
// ErrInvalid, except a key source that cannot load any JWK Set.
func (v *Verifier) Verify(ctx context.Context, raw string) (Token, error) {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	var keyErr error
	p := jwt.NewParser(
		jwt.WithValidMethods(Algorithms),
		jwt.WithIssuer(v.Issuer),
		jwt.WithAudience(v.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(MaxSkew),
		jwt.WithTimeFunc(now),
	)
	claims := jwt.MapClaims{}
	_, err := p.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, fmt.Errorf("%w: no kid", ErrInvalid)
		}
		k, err := v.Keys.Key(ctx, kid, t.Method.Alg())
		if err != nil && !errors.Is(err, ErrInvalid) {
			keyErr = err
		}
		return k, err
	})
	if keyErr != nil {
		return Token{}, keyErr
	}
	if err != nil {
		// jwt's errors name the failed check, never the token.
		return Token{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	user, ok := claims[v.UserClaim].(string)
	if !ok || user == "" {
		return Token{}, fmt.Errorf("%w: no string claim %q", ErrInvalid, v.UserClaim)
	}
	tok := Token{User: user}
	if s, ok := claims["scope"]; ok {
		str, isStr := s.(string)
		if !isStr {
			return Token{}, fmt.Errorf("%w: scope is not a string", ErrInvalid)
		}
		tok.Scopes = strings.Fields(str)
	}
	return tok, nil
}

// CheckURL accepts an absolute https URL, or an http one on loopback (the
// development issuer and local tests), without credentials: the issuer,
// JWK Set and discovered URLs must be.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q is not an absolute https URL", raw)
	}
	if u.User != nil {
		return fmt.Errorf("%q: credentials in the URL are not accepted", u.Redacted())
	}
	if u.Scheme == "http" && !Loopback(raw) {
		return fmt.Errorf("%q: https is required except on loopback", raw)
	}
	return nil
}

// Loopback reports whether raw is a URL whose host is this machine.
func Loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	return urls.Loopback(u.Hostname())
}
