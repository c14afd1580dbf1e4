//go:build !nosqlite

package localserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
)

// devMCP is the door on with the development issuer, its key made in a
// folder of the test's.
func devMCP(t *testing.T) config.MCP {
	return config.MCP{Issuer: "http://127.0.0.1:1/dev-issuer", Audience: "http://127.0.0.1:1/mcp", UserClaim: "sub",
		DevKey: filepath.Join(t.TempDir(), "mcp-dev-key.pem")}
}

// mcpRequest is a request to url as a 2025-11-25 MCP client sends it: a
// POST of body (a GET when body is ""), with token as the bearer when not
// "".
func mcpRequest(t *testing.T, url, token, body string) *http.Request {
	t.Helper()
	method := http.MethodGet
	if body != "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	callbacktest.SetMCPHeaders(req, token)
	return req
}

// status sends req and returns the status of the answer; a request that
// cannot be sent fails the test.
func status(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestMCPDoorOffAndDevIssuer: without issuer and audience the door's
// paths are 404 (the callback's not-found answer); with the development
// issuer, -mcp-token's token opens /mcp on the local server, for the
// configured users only.
func TestMCPDoorOffAndDevIssuer(t *testing.T) {
	get := func(url, token, body string) int { return status(t, mcpRequest(t, url, token, body)) }
	off := localConfig(t, "k")
	h, closer, err := LocalServer(context.Background(), checked(t, off), discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	for _, p := range []string{"/mcp", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		if got := get(srv.URL+p, "", ""); got != http.StatusNotFound {
			t.Errorf("door off: GET %s = %d; want 404", p, got)
		}
	}
	srv.Close()
	_ = closer.Close()

	on := localConfig(t, "k")
	on.MCP = devMCP(t)
	if _, err := devToken(on, "user-x"); err == nil || !strings.Contains(err.Error(), "user-x") {
		t.Errorf("a token for an unknown user: %v; want an error naming it", err)
	}
	tok, err := devToken(on, "user-a")
	if err != nil {
		t.Fatal(err)
	}
	h, closer, err = LocalServer(context.Background(), checked(t, on), discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closer.Close() }()
	srv = httptest.NewServer(h)
	defer srv.Close()
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if got := get(srv.URL+"/mcp", tok, list); got != http.StatusOK {
		t.Errorf("tools/list with the development token: %d; want 200", got)
	}
	if got := get(srv.URL+"/mcp", "", list); got != http.StatusUnauthorized {
		t.Errorf("tools/list without a token: %d; want 401", got)
	}
	if got := get(srv.URL+"/.well-known/oauth-protected-resource/mcp", "", ""); got != http.StatusOK {
		t.Errorf("metadata: %d; want 200", got)
	}
}
