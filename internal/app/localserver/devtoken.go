package localserver

import (
	"fmt"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/app/doors"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
)

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
	if err := doors.CheckMCP(m, config.MCPFileNames); err != nil {
		return "", err
	}
	dev, err := jwtauth.LoadDevIssuer(m.DevKey, m.Issuer)
	if err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	return dev.Token(m.UserClaim, user, m.Audience, m.Scopes.List(), time.Now(), DevTokenTTL)
}
