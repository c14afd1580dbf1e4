package mcpdoor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/prom"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// stores are the stores the door's flows run on; sqlite_test.go adds
// SQLite where it is built.
var stores = map[string]func(t *testing.T) core.Store{
	"memory": func(*testing.T) core.Store { return memtest.New() },
	"dynamodb-local": func(t *testing.T) core.Store {
		ep := testenv.DynamoDB(t)
		return dynamo.New(testenv.DynamoClient(t, ep), testenv.CreateTable(t, ep), dynamo.Options{})
	},
}

// TestGoClientFlows: the Go SDK's client on both revisions and every
// store: created, then the same request_id deduplicated with the same
// ticket_id; get_ticket finds it; isError as the contract says.
func TestGoClientFlows(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open(t), envOptions{})
			for _, rev := range revisions {
				t.Run(rev, func(t *testing.T) {
					ctx := context.Background()
					cs := e.client(ctx, e.token("user-a"), rev)
					if got := cs.InitializeResult().ProtocolVersion; got != rev {
						t.Fatalf("negotiated %s; want %s", got, rev)
					}
					args := map[string]any{"title": "Cannot sign in", "priority": "high"}
					rid := "req-flow-" + rev
					res1, a1 := callTool(ctx, t, cs, "create_ticket", args, rid)
					res2, a2 := callTool(ctx, t, cs, "create_ticket", args, rid)
					if a1.Status != "created" || a1.Deduplicated || res1.IsError {
						t.Fatalf("first call: %+v isError %v; want created", a1, res1.IsError)
					}
					if a2.Status != "created" || !a2.Deduplicated || a2.TicketID != a1.TicketID || res2.IsError {
						t.Fatalf("repeat: %+v isError %v; want deduplicated %s", a2, res2.IsError, a1.TicketID)
					}
					res3, a3 := callTool(ctx, t, cs, "get_ticket", map[string]any{"ticket_id": a1.TicketID}, "")
					if a3.Status != "found" || a3.Ticket == nil || a3.Ticket.Title != "Cannot sign in" || res3.IsError {
						t.Fatalf("get_ticket: %+v isError %v", a3, res3.IsError)
					}
					res4, a4 := callTool(ctx, t, cs, "get_ticket", map[string]any{"ticket_id": "nope"}, "")
					if a4.Status != "rejected" || a4.Error.Code != core.CodeTicketNotFound || !res4.IsError {
						t.Fatalf("get_ticket of a missing ticket: %+v isError %v", a4, res4.IsError)
					}
				})
			}
			if got := e.store.created.Load(); got != int32(len(revisions)) {
				t.Errorf("%d tickets; want one per revision", got)
			}
		})
	}
}

// TestConcurrentIdenticalCalls: ten identical tools/call at once make one
// ticket, and every answer names it.
func TestConcurrentIdenticalCalls(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open(t), envOptions{})
			ctx := context.Background()
			tok := e.token("user-a")
			var wg sync.WaitGroup
			ids := make([]string, 10)
			for i := range ids {
				wg.Go(func() {
					cs := e.client(ctx, tok, revisions[i%2])
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_ticket",
						Arguments: map[string]any{"title": "Printer on fire"},
						Meta:      mcp.Meta{"io.github.aivax-examples/request_id": "req-concurrent"}})
					if err != nil {
						t.Error(err)
						return
					}
					b, _ := json.Marshal(res.StructuredContent)
					var a answer
					_ = json.Unmarshal(b, &a)
					if a.Status == "created" {
						ids[i] = a.TicketID
					} else {
						t.Errorf("call %d: %s", i, b)
					}
				})
			}
			wg.Wait()
			if got := e.store.created.Load(); got != 1 {
				t.Errorf("%d tickets from ten identical calls; want 1", got)
			}
			for _, id := range ids {
				if id != ids[0] {
					t.Errorf("ticket ids %v; want one", ids)
					break
				}
			}
		})
	}
}

// TestCallbackThenMCP: an operation begun through /callback and repeated
// through /mcp (same user, request_id, function and arguments) is one
// operation: one ticket, the MCP answer deduplicated with its ticket_id.
func TestCallbackThenMCP(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open(t), envOptions{})
			n, err := nonce.Generate(hookKey, nonce.MinCost)
			if err != nil {
				t.Fatal(err)
			}
			body := `{"type":"tool_call","function":{"name":"create_ticket","content":{"title":"Cannot sign in"}},` +
				`"context":{"externalUserId":"user-a","metadata":{"request_id":"req-both-doors"}}}`
			_, b := callbacktest.Send(t, http.MethodPost, e.url+"/callback", n, body)
			var cb answer
			_ = json.Unmarshal(b, &cb)
			if cb.Status != "created" {
				t.Fatalf("callback: %+v", cb)
			}
			ctx := context.Background()
			cs := e.client(ctx, e.token("user-a"), revisions[0])
			res, a := callTool(ctx, t, cs, "create_ticket", map[string]any{"title": "Cannot sign in"}, "req-both-doors")
			if !a.Deduplicated || a.TicketID != cb.TicketID || res.IsError {
				t.Fatalf("MCP repeat of a callback: %+v; want deduplicated %s", a, cb.TicketID)
			}
			if got := e.store.created.Load(); got != 1 {
				t.Errorf("%d tickets; want 1", got)
			}
		})
	}
}

// TestRequestIDConflictIsToolResult: another user of the tenant reusing
// the request_id gets request_id_conflict as a tool result (isError), not
// an HTTP 403, and nothing is written.
func TestRequestIDConflictIsToolResult(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	ctx := context.Background()
	args := map[string]any{"title": "Shared"}
	_, a := callTool(ctx, t, e.client(ctx, e.token("user-a"), revisions[0]), "create_ticket", args, "req-shared")
	res, c := callTool(ctx, t, e.client(ctx, e.token("user-c"), revisions[1]), "create_ticket", args, "req-shared")
	if c.Status != "rejected" || c.Error.Code != core.CodeRequestIDConflict || !res.IsError {
		t.Fatalf("conflict: %+v isError %v", c, res.IsError)
	}
	if a.Status != "created" || e.store.created.Load() != 1 {
		t.Errorf("first %+v, %d tickets; want one", a, e.store.created.Load())
	}
}

// gateStore holds Create until released, to cancel a client mid-call.
type gateStore struct {
	core.Store
	entered chan struct{}
	release chan struct{}
	done    chan struct{}
	once    sync.Once
}

func (g *gateStore) Claims() idem.Store[core.Writes] { return core.ClaimFunc(g.claim) }

func (g *gateStore) claim(ctx context.Context, op idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return g.Store.Claims().Claim(ctx, op, w, now)
	}
	close(g.entered)
	<-g.release
	defer close(g.done)
	// As DynamoDB's and SQLite's clients do: a cancelled context writes
	// nothing.
	if ctx.Err() != nil {
		return nil, core.ErrBusy
	}
	return g.Store.Claims().Claim(ctx, op, w, now)
}

// TestCancelledClientGetsStoredResult: a client that cancels its call
// after sending it (the Go client's cancellation, and a closed response
// stream, which MCP counts as cancellation) and re-issues it gets the
// stored result: the operation ran to its end, once.
func TestCancelledClientGetsStoredResult(t *testing.T) {
	for _, rev := range revisions {
		for _, how := range []string{"client cancels", "stream closed"} {
			t.Run(rev+"/"+how, func(t *testing.T) {
				g := &gateStore{Store: memtest.New(), entered: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
				e := newEnv(t, g, envOptions{})
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error, 1)
				if how == "client cancels" {
					cs := e.client(context.Background(), e.token("user-a"), rev)
					go func() {
						_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_ticket", Arguments: map[string]any{"title": "Gone"},
							Meta: mcp.Meta{"io.github.aivax-examples/request_id": "req-cancel"}})
						errc <- err
					}()
				} else {
					body := toolsCall("create_ticket", `{"title":"Gone"}`, `"req-cancel"`)
					if rev == revisions[0] {
						body = strings.Replace(body, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"`+rev+`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},`, 1)
					}
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.audience, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("MCP-Protocol-Version", rev)
					req.Header.Set("Mcp-Method", "tools/call")
					req.Header.Set("Mcp-Name", "create_ticket")
					req.Header.Set("Authorization", "Bearer "+e.token("user-a"))
					go func() {
						resp, err := http.DefaultClient.Do(req)
						if err == nil {
							_ = resp.Body.Close()
						}
						errc <- err
					}()
				}
				select {
				case <-g.entered:
				case err := <-errc:
					t.Fatalf("the call ended (%v) before reaching the store", err)
				}
				cancel()
				if err := <-errc; err == nil {
					t.Fatal("the cancelled call returned no error")
				}
				close(g.release)
				select {
				case <-g.done:
				case <-time.After(30 * time.Second):
					t.Fatal("the operation did not finish after its client went away")
				}
				cs2 := e.client(context.Background(), e.token("user-a"), rev)
				res, a := callTool(context.Background(), t, cs2, "create_ticket", map[string]any{"title": "Gone"}, "req-cancel")
				if a.Status != "created" || !a.Deduplicated || res.IsError {
					t.Fatalf("re-issued call: %+v; want the stored result, deduplicated", a)
				}
				if got := e.store.created.Load(); got != 1 {
					t.Errorf("%d tickets; want 1", got)
				}
			})
		}
	}
}

// TestToolsList: both tools, with the catalogue's input schemas (one
// definition), an output schema and the contract's annotations.
func TestToolsList(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	for _, rev := range revisions {
		cs := e.client(context.Background(), e.token("user-a"), rev)
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) != len(core.Functions()) {
			t.Fatalf("%s: %d tools; want %d", rev, len(res.Tools), len(core.Functions()))
		}
		for _, tool := range res.Tools {
			fn, ok := core.LookupFunction(tool.Name)
			if !ok {
				t.Fatalf("tool %s is not in the catalogue", tool.Name)
			}
			in, _ := json.Marshal(tool.InputSchema)
			if !callbacktest.SameJSON(in, fn.Schema()) {
				t.Errorf("%s input schema %s; want the catalogue's %s", tool.Name, in, fn.Schema())
			}
			out, _ := json.Marshal(tool.OutputSchema)
			if !callbacktest.SameJSON(out, fn.OutputSchema()) {
				t.Errorf("%s output schema %s", tool.Name, out)
			}
			a := tool.Annotations
			switch tool.Name {
			case core.CreateTicket:
				if a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint || !a.IdempotentHint {
					t.Errorf("create_ticket annotations %+v", a)
				}
			case core.GetTicket:
				if a == nil || !a.ReadOnlyHint {
					t.Errorf("get_ticket annotations %+v", a)
				}
			}
		}
	}
}

// TestAddedToolIsListedAndCalled: a tool added to the service's tools
// (coretest.Peek) is in tools/list with its schemas and read-only hint,
// and tools/call dispatches it, with no change to the door.
func TestAddedToolIsListedAndCalled(t *testing.T) {
	ctx := context.Background()
	tools := coretest.Tools()
	peek, _ := tools.Lookup(coretest.PeekTicket)
	e := newEnv(t, memtest.New(), envOptions{tools: tools})
	cs := e.client(ctx, e.token("user-a"), revisions[len(revisions)-1])
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Name != coretest.PeekTicket {
			continue
		}
		in, _ := json.Marshal(tool.InputSchema)
		out, _ := json.Marshal(tool.OutputSchema)
		if !callbacktest.SameJSON(in, peek.Schema()) ||
			!callbacktest.SameJSON(out, peek.OutputSchema()) ||
			tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.Description != peek.Description {
			t.Errorf("peek_ticket listed as %s %s %+v %q", in, out, tool.Annotations, tool.Description)
		}
	}
	if len(names) != 5 || names[4] != coretest.PeekTicket {
		t.Fatalf("tools/list %v; want the product's four and peek_ticket", names)
	}
	_, created := callTool(ctx, t, cs, core.CreateTicket, map[string]any{"title": "Printer"}, "r-1")
	_, peeked := callTool(ctx, t, cs, coretest.PeekTicket, map[string]any{"ticket_id": created.TicketID}, "")
	if peeked.Status != "found" || peeked.Ticket == nil || peeked.Ticket.Title != coretest.PeekedTitle+"Printer" {
		t.Fatalf("tools/call peek_ticket: %+v; want found with the peeked title", peeked)
	}
}

// TestStructuredContentMatchesOutputSchema: every answer's structured
// content validates against its tool's output schema (MCP clients check
// it), with a JSON Schema 2020-12 validator.
func TestStructuredContentMatchesOutputSchema(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	ctx := context.Background()
	cs := e.client(ctx, e.token("user-a"), revisions[0])
	compile := func(fn *core.Function) *jsonschema.Schema {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(fn.OutputSchema()))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("mem:///"+fn.Name, doc); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile("mem:///" + fn.Name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	create, _ := core.LookupFunction(core.CreateTicket)
	get, _ := core.LookupFunction(core.GetTicket)
	cs1, gs := compile(create), compile(get)
	var ticket string
	for i, c := range []struct {
		tool   string
		args   map[string]any
		rid    string
		schema *jsonschema.Schema
	}{
		{"create_ticket", map[string]any{"title": "Schema"}, "req-schema", cs1},
		{"create_ticket", map[string]any{"title": "Schema"}, "req-schema", cs1},
		{"create_ticket", map[string]any{"title": ""}, "req-schema-2", cs1},
		{"create_ticket", map[string]any{"title": "x"}, "", cs1},
		{"get_ticket", nil, "", gs},
		{"get_ticket", map[string]any{"ticket_id": "missing"}, "", gs},
	} {
		args := c.args
		if c.tool == "get_ticket" && args == nil {
			args = map[string]any{"ticket_id": ticket}
		}
		res, a := callTool(ctx, t, cs, c.tool, args, c.rid)
		if i == 0 {
			ticket = a.TicketID
		}
		b, _ := json.Marshal(res.StructuredContent)
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err := c.schema.Validate(v); err != nil {
			t.Errorf("case %d: %s does not match the output schema: %v", i, b, err)
		}
	}
}

// TestLogLine: a tool call's line is the callback's, with door mcp; no
// line carries the token, even for refused ones.
func TestLogLine(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	tok := e.token("user-a")
	e.post(tok, toolsCall("create_ticket", `{"title":"Log"}`, `"req-log"`))
	e.post(tok+"x", toolsCall("create_ticket", `{"title":"Log"}`, `"req-log"`))
	e.post(e.token("user-x"), toolsCall("create_ticket", `{"title":"Log"}`, `"req-log"`))
	logs := e.logs.String()
	var first map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(logs, "\n", 2)[0]), &first); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"msg": "callback", "door": "mcp", "function": "create_ticket", "tenant": "tenant-a",
		"outcome": "created", "http_status": float64(200)} {
		if first[k] != want {
			t.Errorf("log %s = %v; want %v (%s)", k, first[k], want, logs)
		}
	}
	if _, ok := first["operation_key"]; !ok {
		t.Errorf("no operation_key in %v", first)
	}
	if strings.Contains(logs, tok[:40]) || strings.Contains(logs, strings.Split(tok, ".")[2]) || strings.Contains(logs, "Log\"") {
		t.Errorf("a log line carries the token or the arguments:\n%s", logs)
	}
	for _, want := range []string{`"outcome":"unauthenticated","http_status":401`, `"outcome":"forbidden","http_status":403`} {
		if !strings.Contains(logs, want) {
			t.Errorf("no line with %s:\n%s", want, logs)
		}
	}
}

// TestMetrics: MCP tool calls are counted by function and outcome with
// door mcp, beside the callback's door aivax; authentication failures as
// unauthenticated and forbidden.
func TestMetrics(t *testing.T) {
	rec := prom.New(httpapi.MetricLabels(nil), destination.MetricLabels())
	e := newEnv(t, memtest.New(), envOptions{rec: rec})
	tok := e.token("user-a")
	e.post(tok, toolsCall("create_ticket", `{"title":"Counted"}`, `"req-count"`))
	e.post(tok, toolsCall("create_ticket", `{"title":"Counted"}`, `"req-count"`))
	e.post(tok, toolsCall("create_ticket", `{"title":"Counted"}`, ""))
	e.post(tok, toolsCall("nope", `{}`, `"r"`))
	e.post("", toolsCall("create_ticket", `{"title":"Counted"}`, `"req-count"`))
	e.post(e.token("user-d"), toolsCall("create_ticket", `{"title":"Counted"}`, `"req-count"`))
	want := `
# HELP callbacks_total Requests by door, function, outcome and rejection code.
# TYPE callbacks_total counter
callbacks_total{code="",door="mcp",function="",outcome="forbidden"} 1
callbacks_total{code="",door="mcp",function="",outcome="unauthenticated"} 1
callbacks_total{code="",door="mcp",function="create_ticket",outcome="created"} 1
callbacks_total{code="",door="mcp",function="create_ticket",outcome="deduplicated"} 1
callbacks_total{code="missing_request_id",door="mcp",function="create_ticket",outcome="rejected"} 1
callbacks_total{code="unknown_function",door="mcp",function="",outcome="rejected"} 1
`
	if err := testutil.GatherAndCompare(rec.Registry(), strings.NewReader(want), metrics.Callbacks); err != nil {
		t.Error(err)
	}
}
