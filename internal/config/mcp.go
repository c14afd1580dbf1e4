package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
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
	// with a loopback issuer. The local server checks its path
	// (localserver.CheckSettings).
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

// MCPNames name the door's settings in errors: the file's members or the
// environment's variables. The door's own rules for its URLs (jwtauth's)
// are checked where the door is built, naming the setting by these.
type MCPNames struct{ Issuer, Audience, JWKSURL, UserClaim, Scopes, DevKey string }

// The names of the door's settings in the local file and in the Lambda's
// environment.
var (
	MCPFileNames = MCPNames{"mcp.issuer", "mcp.audience", "mcp.jwks_url", "mcp.user_claim", "mcp.scopes", "mcp.dev_key"}
	MCPEnvNames  = MCPNames{EnvMCPIssuer, EnvMCPAudience, EnvMCPJWKSURL, EnvMCPUserClaim, EnvMCPScopes, ""}
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
	return m, m.check(MCPEnvNames)
}

// check validates m's shape and applies the default claim. One of issuer
// and audience without the other is an error naming the missing one. The
// URL rules of the issuer, the JWK Set and the development issuer are
// jwtauth's, checked where the door is built (doors.CheckMCP).
func (m *MCP) check(n MCPNames) error {
	if !m.On() {
		for _, set := range []struct {
			name string
			on   bool
		}{{n.JWKSURL, m.JWKSURL != ""}, {n.UserClaim, m.UserClaim != ""}, {n.Scopes, m.Scopes != ""}, {n.DevKey, m.DevKey != ""}} {
			if set.on && set.name != "" {
				name := set.name
				return fmt.Errorf("config: %s: set only with %s and %s (the MCP door is off without them)", name, n.Issuer, n.Audience)
			}
		}
		return nil
	}
	switch {
	case m.Issuer == "":
		return fmt.Errorf("config: %s: required when %s is set (the MCP door needs both)", n.Issuer, n.Audience)
	case m.Audience == "":
		return fmt.Errorf("config: %s: required when %s is set (the MCP door needs both): the public URL of /mcp", n.Audience, n.Issuer)
	}
	if u, err := url.Parse(m.Audience); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("config: %s: %q is not an absolute http(s) URL (the public URL of /mcp)", n.Audience, m.Audience)
	}
	if m.UserClaim == "" {
		m.UserClaim = DefaultUserClaim
	}
	for _, s := range m.Scopes.List() {
		if strings.ContainsAny(s, "\"\\") {
			return fmt.Errorf("config: %s: %q is not a scope token (no quotes or backslashes)", n.Scopes, s)
		}
	}
	if m.DevKey != "" {
		if n.DevKey == "" {
			return errors.New("config: the development issuer exists only in the local file")
		}
		if m.JWKSURL != "" {
			return fmt.Errorf("config: %s: the development issuer's key is the only key; remove %s", n.DevKey, n.JWKSURL)
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
