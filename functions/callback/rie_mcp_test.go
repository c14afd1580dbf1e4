//go:build linux

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/aws/aws-lambda-go/events"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// testIssuer is an OAuth issuer on loopback: OpenID discovery and a JWK
// Set holding one ES256 key (made as the development issuer makes its).
func testIssuer(t *testing.T) (*jwtauth.DevIssuer, string) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dev, err := jwtauth.LoadDevIssuer(filepath.Join(t.TempDir(), "issuer.pem"), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": srv.URL, "jwks_uri": srv.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		j, err := jwkset.NewJWKFromKey(&dev.Key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{
			KID: dev.KID, ALG: jwkset.AlgES256, USE: jwkset.UseSig}})
		if err != nil {
			t.Error(err)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{j.Marshal()}})
	})
	return dev, srv.URL
}

// urlProxy serves HTTP by turning each request into a function URL event
// for the RIE and the function's answer back into HTTP: real MCP clients
// reach the bootstrap as they would reach its function URL.
func urlProxy(t *testing.T, invokeURL, host string) string {
	t.Helper()
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		headers := map[string]string{"host": host, "x-forwarded-proto": "https"}
		for k, v := range r.Header {
			headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		ev := events.LambdaFunctionURLRequest{Version: "2.0", RawPath: r.URL.Path, Headers: headers, Body: string(body),
			RequestContext: events.LambdaFunctionURLRequestContext{DomainName: host,
				HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.10"}}}
		raw, _ := json.Marshal(ev)
		// The emulator runs one invocation at a time, as one Lambda
		// execution environment does.
		mu.Lock()
		resp, err := invokeErr(invokeURL, raw)
		mu.Unlock()
		if err != nil {
			t.Errorf("proxy: %v", err)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.WriteString(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPUnderRIE runs the real bootstrap under the Lambda emulator with
// the MCP door on (MCP_ISSUER, MCP_AUDIENCE), against DynamoDB Local:
// events/mcp-create.json (with a fresh token) repeats events/create.json's
// operation through /mcp, so it is deduplicated with the callback's
// ticket; refusals come before authentication; and the Go SDK's client,
// on both protocol revisions, and the TypeScript SDK's clients talk to the
// function through function URL events.
func TestMCPUnderRIE(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and starts DynamoDB Local and the RIE")
	}
	root := testenv.RepoRoot(t)
	dev, issuerURL := testIssuer(t)
	var sample events.LambdaFunctionURLRequest
	sampleRaw, err := os.ReadFile(filepath.Join(root, "events", "mcp-create.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sampleRaw, &sample); err != nil {
		t.Fatal(err)
	}
	audience := "https://" + sample.Headers["host"] + "/mcp"

	endpoint := testenv.DynamoDB(t)
	table := tableWithUserA(t, endpoint)
	client := testenv.DynamoClient(t, endpoint)
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	testenv.BuildBootstrap(t, "lambda.norpc,nosqlite", runtime.GOARCH, bootstrap)
	invokeURL, output, _ := testenv.StartRIE(t, bootstrap, map[string]string{
		"TABLE_NAME":                table,
		"HOOK_KEY":                  rieHookKey,
		"AWS_ENDPOINT_URL_DYNAMODB": endpoint,
		"MCP_ISSUER":                issuerURL,
		"MCP_AUDIENCE":              audience,
	})
	token, err := dev.Token("sub", "user-a", audience, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	decode := func(name string, r urlResponse) map[string]any {
		var rpc struct {
			Result struct {
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"result"`
		}
		if r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &rpc) != nil {
			t.Fatalf("%s: %d %s\n%s", name, r.StatusCode, r.Body, output.String())
		}
		return rpc.Result.StructuredContent
	}
	// The callback creates; the MCP event of the same operation repeats it.
	cbRaw, err := os.ReadFile(filepath.Join(root, "events", "create.json"))
	if err != nil {
		t.Fatal(err)
	}
	cb := invoke(t, invokeURL, urlEvent{raw: cbRaw})
	var created struct {
		TicketID string `json:"ticket_id"`
	}
	if cb.StatusCode != 200 || json.Unmarshal([]byte(cb.Body), &created) != nil || created.TicketID == "" {
		t.Fatalf("create.json: %d %s", cb.StatusCode, cb.Body)
	}
	withToken := func(tok string) []byte {
		ev := sample
		ev.Headers = map[string]string{}
		for k, v := range sample.Headers {
			ev.Headers[k] = v
		}
		ev.Headers["authorization"] = "Bearer " + tok
		if tok == "" {
			delete(ev.Headers, "authorization")
		}
		b, _ := json.Marshal(ev)
		return b
	}
	for i := range 2 {
		got := decode("mcp-create.json", invoke(t, invokeURL, urlEvent{raw: withToken(token)}))
		if got["status"] != "created" || got["deduplicated"] != true || got["ticket_id"] != created.TicketID {
			t.Fatalf("mcp-create.json #%d: %v; want the callback's ticket %s, deduplicated", i, got, created.TicketID)
		}
	}
	// No token: 401 with the metadata's URL; GET: 405 without a token.
	r := invoke(t, invokeURL, urlEvent{raw: withToken("")})
	if want := `Bearer resource_metadata="https://` + sample.Headers["host"] + `/.well-known/oauth-protected-resource/mcp"`; r.StatusCode != 401 || r.Headers["www-authenticate"] != want {
		t.Errorf("no token: %d %v; want 401 with %s", r.StatusCode, r.Headers, want)
	}
	get := sample
	get.RequestContext.HTTP.Method = http.MethodGet
	get.Body = ""
	gb, _ := json.Marshal(get)
	if r := invoke(t, invokeURL, urlEvent{raw: gb}); r.StatusCode != 405 {
		t.Errorf("GET /mcp: %d; want 405", r.StatusCode)
	}
	if strings.Contains(output.String(), token[len(token)-20:]) {
		t.Error("the function's output carries the token")
	}

	// The Go SDK's client, both revisions, through function URL events.
	proxy := urlProxy(t, invokeURL, sample.Headers["host"])
	for i, rev := range []string{"2026-07-28", "2025-11-25"} {
		c := mcp.NewClient(&mcp.Implementation{Name: "go-rie", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: proxy + "/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport(token)}, DisableStandaloneSSE: true, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: rev})
		if err != nil {
			t.Fatalf("%s: connect: %v\n%s", rev, err, output.String())
		}
		var ids []any
		for range 2 {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_ticket",
				Arguments: map[string]any{"title": "Under the emulator"},
				Meta:      mcp.Meta{"io.github.aivax-examples/request_id": "req-rie-" + rev}})
			if err != nil {
				t.Fatalf("%s: %v", rev, err)
			}
			b, _ := json.Marshal(res.StructuredContent)
			var a map[string]any
			_ = json.Unmarshal(b, &a)
			ids = append(ids, a["ticket_id"])
			if a["status"] != "created" || res.IsError {
				t.Fatalf("%s: %s", rev, b)
			}
		}
		if ids[0] != ids[1] || ids[0] == nil {
			t.Errorf("%s (#%d): ticket ids %v; want one", rev, i, ids)
		}
		_ = cs.Close()
	}
	// The official TypeScript SDK's clients, through the same events.
	node, modules := testenv.MCPTSClients(t)
	script := filepath.Join(root, "internal", "mcpdoor", "testdata", "tsclient.cjs")
	for _, c := range []struct{ pkg, rev string }{{"client", "2026-07-28"}, {"client", "2025-11-25"}, {"sdk", "2025-11-25"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, node, script, proxy+"/mcp", token, c.rev, c.pkg, "req-rie-ts-"+c.pkg+"-"+c.rev)
		cmd.Env = append(cmd.Environ(), "MCP_TS_MODULES="+modules)
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("TypeScript %s %s: %v\n%s", c.pkg, c.rev, err, output.String())
		}
		var r struct {
			Negotiated    string `json:"negotiated"`
			First, Second struct {
				Structured struct {
					TicketID     string `json:"ticket_id"`
					Deduplicated bool   `json:"deduplicated"`
				} `json:"structured"`
			}
		}
		if err := json.Unmarshal(out, &r); err != nil || r.Negotiated != c.rev || r.First.Structured.TicketID == "" ||
			r.First.Structured.Deduplicated || r.Second.Structured.TicketID != r.First.Structured.TicketID || !r.Second.Structured.Deduplicated {
			t.Errorf("TypeScript %s %s: %s", c.pkg, c.rev, out)
		}
	}
	if n := countItems(t, client, table)["TICKET#"]; n != 6 {
		t.Errorf("%d tickets; want 6 (the callback's, one per Go revision, one per TypeScript run)", n)
	}
}
