package doors

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestAuthenticator(t *testing.T) {
	s := Settings{MinCost: 4, MaxCost: 12}
	key := "local-demo-hook-key"
	good, err := nonce.Generate(key, 4)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		key        string
		insecure   bool
		wantErr    bool
		wantType   any
		acceptGood bool // Verify(nonce of key) succeeds
		acceptNone bool // Verify("") succeeds
	}{
		{"empty key -> nonce.Refuse (fail closed)", "", false, false, nonce.Refuse{}, false, false},
		{"insecure -> nonce.Off", "", true, false, nonce.Off{}, true, true},
		{"key of 73 bytes -> error", strings.Repeat("k", 73), false, true, nil, false, false},
		{"key -> *nonce.Verifier", key, false, false, &nonce.Verifier{}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.HookKey = tc.key
			a, err := Authenticator(s, tc.insecure, discard())
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %T and no error", a)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch tc.wantType.(type) {
			case nonce.Refuse:
				if _, ok := a.(nonce.Refuse); !ok {
					t.Errorf("got %T, want nonce.Refuse", a)
				}
			case nonce.Off:
				if _, ok := a.(nonce.Off); !ok {
					t.Errorf("got %T, want nonce.Off", a)
				}
			case *nonce.Verifier:
				if _, ok := a.(*nonce.Verifier); !ok {
					t.Errorf("got %T, want *nonce.Verifier", a)
				}
			}
			if got := a.Verify(good) == nil; got != tc.acceptGood {
				t.Errorf("Verify(good nonce) accepted=%v, want %v", got, tc.acceptGood)
			}
			if got := a.Verify("") == nil; got != tc.acceptNone {
				t.Errorf("Verify(\"\") accepted=%v, want %v", got, tc.acceptNone)
			}
		})
	}
}

// TestMCPURLRules: the door's URLs are https except on loopback, and the
// development issuer is loopback only; the door refuses to be built
// otherwise, with one line naming the setting as the environment or the
// file calls it.
func TestMCPURLRules(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string {
			if k == "TABLE_NAME" {
				return "tickets"
			}
			return m[k]
		}
	}
	for name, tc := range map[string]struct {
		vars  map[string]string
		names string
	}{
		"http issuer": {map[string]string{config.EnvMCPIssuer: "http://login.example.com/", config.EnvMCPAudience: "https://t.example/mcp"}, config.EnvMCPIssuer},
		"http jwks":   {map[string]string{config.EnvMCPIssuer: "https://l.example/", config.EnvMCPAudience: "https://t.example/mcp", config.EnvMCPJWKSURL: "http://l.example/jwks"}, config.EnvMCPJWKSURL},
	} {
		c, err := config.FromEnv(env(tc.vars))
		if err == nil {
			err = CheckMCP(c.MCP, config.MCPEnvNames)
		}
		if err == nil || !strings.Contains(err.Error(), tc.names) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: %v; want one line naming %s", name, err, tc.names)
		}
	}
	file := func(mcp string) error {
		c, err := config.ParseFile([]byte(`{"hook_key":"k","mcp":` + mcp + `}`))
		if err != nil {
			return err
		}
		return CheckMCP(c.MCP, config.MCPFileNames)
	}
	for mcp, want := range map[string]string{
		`{"audience":"https://t.example/mcp","issuer":"http://l.example/"}`:                    "mcp.issuer",
		`{"issuer":"https://l.example/","audience":"https://t.example/mcp","dev_key":"k.pem"}`: "mcp.dev_key",
	} {
		if err := file(mcp); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mcp %s: %v; want an error naming %s", mcp, err, want)
		}
	}
	if err := file(`{"issuer":"http://127.0.0.1:3210/dev-issuer","audience":"http://127.0.0.1:3210/mcp","dev_key":"k.pem","scopes":["tickets"]}`); err != nil {
		t.Errorf("the development issuer: %v", err)
	}
}

// A service that could not hold a key (here a retention under a second:
// records keep whole seconds) stops Build, before any request.
func TestBuildChecksTheService(t *testing.T) {
	_, err := Build(Config{Store: memtest.New(), Users: memstore.Users{},
		Settings: Settings{Policy: idem.PolicyArguments, Retention: 500 * time.Millisecond}, Logger: discard()})
	if err == nil || !strings.Contains(err.Error(), "Retention") {
		t.Fatalf("Build with a 500 ms retention: %v; want an error naming Retention", err)
	}
}
