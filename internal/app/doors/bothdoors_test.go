package doors_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/app/doors"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
	"github.com/aivax-examples/idempotent-callback/internal/mcpdoor"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
)

const addToolHookKey = "add-tool-hook-key"

// bothDoors is doors.Build's handler on a loopback server, and a client
// of each door: the AIVAX callback with a fresh nonce per request, and
// the MCP Go SDK's client with a token of the development issuer the door
// trusts, one session per user.
type bothDoors struct {
	t        *testing.T
	base     string
	m        config.MCP
	dev      *jwtauth.DevIssuer
	sessions map[string]*mcp.ClientSession
}

// doorUsers are the users both doors know: alice and bob in tenant-a,
// carol in tenant-b.
var doorUsers = memstore.Users{
	"user-a": {ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"},
	"user-b": {ExternalID: "user-b", TenantID: "tenant-a", UserID: "bob"},
	"user-c": {ExternalID: "user-c", TenantID: "tenant-b", UserID: "carol"},
}

// newBothDoors serves tools (nil: the product's) over store under policy;
// deliver says whether a destination is configured.
func newBothDoors(t *testing.T, store core.Store, tools *core.Tools, policy idem.Policy, deliver bool) *bothDoors {
	t.Helper()
	auth, err := nonce.New(addToolHookKey, nonce.MinCost, nonce.CapCost)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	d := &bothDoors{t: t, base: "http://" + srv.Listener.Addr().String(), sessions: map[string]*mcp.ClientSession{}}
	d.m = config.MCP{Issuer: "http://127.0.0.1:1", Audience: d.base + mcpdoor.Path, UserClaim: "sub",
		DevKey: filepath.Join(t.TempDir(), "dev-key.pem")}
	h, err := doors.Build(doors.Config{
		Deliver: deliver, Store: store, Users: doorUsers,
		Settings: doors.Settings{Policy: policy, Retention: time.Hour},
		MCP:      d.m,
		MCPNames: config.MCPFileNames,
		Auth:     auth,
		Tools:    tools,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	if d.dev, err = jwtauth.LoadDevIssuer(d.m.DevKey, d.m.Issuer); err != nil {
		t.Fatal(err)
	}
	return d
}

// aivax sends one request to the AIVAX door with a fresh nonce.
func (d *bothDoors) aivax(method, path, body string) (int, string) {
	d.t.Helper()
	n, err := nonce.Generate(addToolHookKey, nonce.MinCost)
	if err != nil {
		d.t.Fatal(err)
	}
	code, b := callbacktest.Send(d.t, method, d.base+path, n, body)
	return code, string(b)
}

// callback calls fn with args (a JSON object) as user under requestID
// through the AIVAX door.
func (d *bothDoors) callback(user, fn, args, requestID string) (int, string) {
	d.t.Helper()
	return d.aivax(http.MethodPost, "/callback", `{"type":"tool_call","function":{"name":`+callbacktest.Quote(fn)+
		`,"content":`+args+`},"context":{"externalUserId":`+callbacktest.Quote(user)+
		`,"metadata":{"request_id":`+callbacktest.Quote(requestID)+`}}}`)
}

// session is user's MCP session, made on first use.
func (d *bothDoors) session(user string) *mcp.ClientSession {
	d.t.Helper()
	if cs, ok := d.sessions[user]; ok {
		return cs
	}
	token, err := d.dev.Token("sub", user, d.m.Audience, nil, time.Now(), time.Hour)
	if err != nil {
		d.t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "both-doors-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: d.m.Audience,
		HTTPClient: &http.Client{Transport: bearer{token}}, DisableStandaloneSSE: true, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: mcpdoor.Revisions[0]})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { _ = cs.Close() })
	d.sessions[user] = cs
	return cs
}

// mcp calls fn with args as user under requestID ("" for none) through
// the MCP door and returns the result and its one text item.
func (d *bothDoors) mcp(user, fn, args, requestID string) (*mcp.CallToolResult, string) {
	d.t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		d.t.Fatal(err)
	}
	p := &mcp.CallToolParams{Name: fn, Arguments: a}
	if requestID != "" {
		p.Meta = mcp.Meta{mcpdoor.RequestIDMeta: requestID}
	}
	res, err := d.session(user).CallTool(context.Background(), p)
	if err != nil {
		d.t.Fatalf("tools/call %s: %v", fn, err)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if len(res.Content) != 1 || !ok {
		d.t.Fatalf("content %v; want one text item", res.Content)
	}
	return res, text.Text
}
