package config

import (
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/configtest"
)

// TestMCPSettings: the door is off without issuer and audience, one
// without the other is an error naming the missing setting, the
// development issuer is local only (its URL rules, https except on
// loopback and a loopback development issuer, are jwtauth's:
// doors.TestMCPURLRules).
func TestMCPSettings(t *testing.T) {
	c, err := FromEnv(configtest.Env(nil))
	if err != nil || c.MCP.On() {
		t.Fatalf("no MCP variables: %+v, %v; want the door off", c.MCP, err)
	}
	c, err = FromEnv(configtest.Env(map[string]string{EnvMCPIssuer: "https://login.example.com/", EnvMCPAudience: "https://t.example/mcp", EnvMCPScopes: " tickets  read "}))
	if err != nil || !c.MCP.On() || c.MCP.UserClaim != DefaultUserClaim || c.MCP.Scopes != "tickets read" {
		t.Fatalf("issuer and audience: %+v, %v", c.MCP, err)
	}
	for name, tc := range map[string]struct {
		vars  map[string]string
		names string
	}{
		"issuer alone":          {map[string]string{EnvMCPIssuer: "https://login.example.com/"}, EnvMCPAudience},
		"audience alone":        {map[string]string{EnvMCPAudience: "https://t.example/mcp"}, EnvMCPIssuer},
		"relative audience":     {map[string]string{EnvMCPIssuer: "https://l.example/", EnvMCPAudience: "/mcp"}, EnvMCPAudience},
		"scopes without a door": {map[string]string{EnvMCPScopes: "tickets"}, EnvMCPScopes},
	} {
		if _, err := FromEnv(configtest.Env(tc.vars)); err == nil || !strings.Contains(err.Error(), tc.names) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: %v; want one line naming %s", name, err, tc.names)
		}
	}
	file := func(mcp string) error {
		_, err := ParseFile([]byte(`{"hook_key":"k","mcp":` + mcp + `}`))
		return err
	}
	for mcp, want := range map[string]string{
		`{"issuer":"https://l.example/"}`: "mcp.audience",
		`{"issuer":"http://127.0.0.1:1/","audience":"http://127.0.0.1:1/mcp","dev_key":"k.pem","jwks_url":"http://127.0.0.1:1/j"}`: "mcp.dev_key",
		`{"issuer":"https://l.example/","audience":"https://t.example/mcp","scopes":"tickets"}`:                                    "mcp.scopes",
		`{"issuer":"https://l.example/","audience":"https://t.example/mcp","scopes":["a b"]}`:                                      "mcp.scopes",
		`{"issuer":"https://l.example/","audience":"https://t.example/mcp","userclaim":"sub"}`:                                     "userclaim",
	} {
		if err := file(mcp); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mcp %s: %v; want an error naming %s", mcp, err, want)
		}
	}
	if err := file(`{"issuer":"http://127.0.0.1:3210/dev-issuer","audience":"http://127.0.0.1:3210/mcp","dev_key":"k.pem","scopes":["tickets"]}`); err != nil {
		t.Errorf("the development issuer: %v", err)
	}
}
