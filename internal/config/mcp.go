package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
)

// MCP configures the MCP door (docs/contract.md, The MCP door): the OAuth
// 2.1 issuer whose access tokens it accepts and the audience they must
// name. The door is off when neither Issuer nor Audience is set.
type MCP struct {
	Issuer    string `json:"issuer"`
	Audience  string `json:"audience"`
	JWKSURL   string `json:"jwks_url"`   // "": discovered from the issuer
	UserClaim string `json:"user_claim"` // "": DefaultUserClaim
	Scopes    Scopes `json:"scopes"`     // every one required in the token's scope claim
	// DevKey is the local server's development issuer: a file holding the
	// issuer's private signing key, made on first start when missing. Its
	// public key is the door's only key (no JWKS is fetched), and
	// -mcp-token signs tokens with it. Only the local file has it, and only
	// with a loopback issuer.
	DevKey string `json:"dev_key"`
}

// DefaultUserClaim is the token claim that names the user.
const DefaultUserClaim = "sub"

// The Lambda's environment variables of the MCP door.
const (
	EnvMCPIssuer    = "MCP_ISSUER"
	EnvMCPAudience  = "MCP_AUDIENCE"
	EnvMCPJWKSURL   = "MCP_JWKS_URL"
	EnvMCPUserClaim = "MCP_USER_CLAIM"
	EnvMCPScopes    = "MCP_SCOPES"
)

// On reports whether the door is configured.
func (m MCP) On() bool { return m.Issuer != "" || m.Audience != "" }

// mcpNames names the settings in errors: the file's members or the
// environment's variables.
type mcpNames struct{ issuer, audience, jwksURL, userClaim, scopes, devKey string }

var (
	mcpFileNames = mcpNames{"mcp.issuer", "mcp.audience", "mcp.jwks_url", "mcp.user_claim", "mcp.scopes", "mcp.dev_key"}
	mcpEnvNames  = mcpNames{EnvMCPIssuer, EnvMCPAudience, EnvMCPJWKSURL, EnvMCPUserClaim, EnvMCPScopes, ""}
)

// mcpFromEnv reads the door's settings from the Lambda's environment.
func mcpFromEnv(getenv func(string) string) (MCP, error) {
	m := MCP{
		Issuer:    getenv(EnvMCPIssuer),
		Audience:  getenv(EnvMCPAudience),
		JWKSURL:   getenv(EnvMCPJWKSURL),
		UserClaim: getenv(EnvMCPUserClaim),
		Scopes:    Scopes(strings.Join(strings.Fields(getenv(EnvMCPScopes)), " ")),
	}
	return m, m.check(mcpEnvNames)
}

// check validates m and applies the default claim. One of issuer and
// audience without the other is an error naming the missing one.
func (m *MCP) check(n mcpNames) error {
	if !m.On() {
		for _, set := range []struct {
			name string
			on   bool
		}{{n.jwksURL, m.JWKSURL != ""}, {n.userClaim, m.UserClaim != ""}, {n.scopes, m.Scopes != ""}, {n.devKey, m.DevKey != ""}} {
			if set.on && set.name != "" {
				name := set.name
				return fmt.Errorf("config: %s: set only with %s and %s (the MCP door is off without them)", name, n.issuer, n.audience)
			}
		}
		return nil
	}
	switch {
	case m.Issuer == "":
		return fmt.Errorf("config: %s: required when %s is set (the MCP door needs both)", n.issuer, n.audience)
	case m.Audience == "":
		return fmt.Errorf("config: %s: required when %s is set (the MCP door needs both): the public URL of /mcp", n.audience, n.issuer)
	}
	if err := jwtauth.CheckURL(m.Issuer); err != nil {
		return fmt.Errorf("config: %s: %w", n.issuer, err)
	}
	if u, err := url.Parse(m.Audience); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("config: %s: %q is not an absolute http(s) URL (the public URL of /mcp)", n.audience, m.Audience)
	}
	if m.JWKSURL != "" {
		if err := jwtauth.CheckURL(m.JWKSURL); err != nil {
			return fmt.Errorf("config: %s: %w", n.jwksURL, err)
		}
	}
	if m.UserClaim == "" {
		m.UserClaim = DefaultUserClaim
	}
	for _, s := range m.Scopes.List() {
		if strings.ContainsAny(s, "\"\\") {
			return fmt.Errorf("config: %s: %q is not a scope token (no quotes or backslashes)", n.scopes, s)
		}
	}
	if m.DevKey != "" {
		if n.devKey == "" {
			return errors.New("config: the development issuer exists only in the local file")
		}
		if !jwtauth.Loopback(m.Issuer) {
			return fmt.Errorf("config: %s: the development issuer needs a loopback %s, not %q", n.devKey, n.issuer, m.Issuer)
		}
		if m.JWKSURL != "" {
			return fmt.Errorf("config: %s: the development issuer's key is the only key; remove %s", n.devKey, n.jwksURL)
		}
		var err error
		if m.DevKey, err = filePath(n.devKey, m.DevKey); err != nil {
			return err
		}
	}
	return nil
}

// Scopes are the scopes the door requires, space-separated as the token's
// scope claim (RFC 9068) and MCP_SCOPES write them; the file writes them as
// a JSON array of strings. A string keeps MCP comparable.
type Scopes string

// UnmarshalJSON reads the file's array; a scope with white space in it is
// an error.
func (s *Scopes) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("mcp.scopes must be an array of strings")
	}
	for _, v := range list {
		if v == "" || strings.ContainsAny(v, " \t\r\n") {
			return fmt.Errorf("mcp.scopes: %q is not a scope (no spaces)", v)
		}
	}
	*s = Scopes(strings.Join(list, " "))
	return nil
}

// List returns the scopes, one per element.
func (s Scopes) List() []string { return strings.Fields(string(s)) }
