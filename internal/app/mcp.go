package app

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
	"github.com/aivax-examples/idempotent-callback/internal/mcpdoor"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// mcpKeys is where the door's verification keys come from: the local
// development issuer's own key, or the issuer's JWK Set (jwks_url, or
// discovered), fetched on first use.
func mcpKeys(m config.MCP) (jwtauth.KeySource, error) {
	if m.DevKey != "" {
		dev, err := jwtauth.LoadDevIssuer(m.DevKey, m.Issuer)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		return dev.Keys(), nil
	}
	return &jwtauth.Keys{Issuer: m.Issuer, JWKSURL: m.JWKSURL}, nil
}

// withMCP builds the MCP door on svc (the callback's service, so both
// doors share keys and transaction) and routes its paths to it, the rest
// to h. With the door off, h alone: its paths are 404 there.
func withMCP(h http.Handler, m config.MCP, svc *core.Service, maxBody int64, rec metrics.Recorder, logger *slog.Logger) (http.Handler, error) {
	if !m.On() {
		return h, nil
	}
	keys, err := mcpKeys(m)
	if err != nil {
		return nil, err
	}
	door, err := mcpdoor.New(mcpdoor.Config{
		Service:  svc,
		Users:    svc.Users,
		Verifier: &jwtauth.Verifier{Issuer: m.Issuer, Audience: m.Audience, UserClaim: m.UserClaim, Keys: keys},
		Issuer:   m.Issuer,
		Audience: m.Audience,
		Scopes:   m.Scopes.List(),
		MaxBody:  maxBody,
		Logger:   logger,
		Metrics:  rec,
	})
	if err != nil {
		return nil, err
	}
	logger.Info("MCP door on", slog.String("path", mcpdoor.Path), slog.String("issuer", m.Issuer), slog.String("audience", m.Audience))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mcpdoor.Handles(r.URL.Path) {
			door.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// DevTokenTTL is how long a token of -mcp-token is valid.
const DevTokenTTL = 8 * time.Hour

// devToken signs a token for user with the local file's development
// issuer (mcp.dev_key), for curl and MCP Inspector.
func devToken(cfg config.Local, user string) (string, error) {
	m := cfg.MCP
	if m.DevKey == "" {
		return "", fmt.Errorf("config: mcp.dev_key: not set, so there is no development issuer to sign with")
	}
	if _, ok := cfg.Users[user]; !ok {
		return "", fmt.Errorf("config: users: no user %q; the token would be refused with 403", user)
	}
	dev, err := jwtauth.LoadDevIssuer(m.DevKey, m.Issuer)
	if err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	return dev.Token(m.UserClaim, user, m.Audience, m.Scopes.List(), time.Now(), DevTokenTTL)
}
