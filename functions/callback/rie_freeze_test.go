//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/otlptest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// freezePause is how long the bootstrap stays stopped between two
// invocations: seconds, as a Lambda environment idles between calls, and
// longer than the DynamoDB call timeout (STORE_CALL_TIMEOUT below), so a
// request left in flight at the freeze would run out on the thaw.
const freezePause = 3 * time.Second

// TestFrozenBetweenInvocations runs the built bootstrap under the Lambda
// emulator as Lambda runs it: frozen as soon as each answer is out
// (SIGSTOP to the bootstrap, the emulator's child) and thawed (SIGCONT)
// only just before the next invocation, freezePause later. The calls: a
// new create_ticket, its repeat, the same operation as an MCP tools/call,
// then GET /functions. The result cache is off, so the repeat and the MCP
// call are claims whose read-ahead answers ahead of the transaction: the
// request the answer did not wait for is the work most likely left after
// it. While the bootstrap is frozen, each invocation must already show
// everything it owes: its answer, its JSON line with its EMF metrics, and
// its spans (exported to a loopback OTLP receiver), every one of them
// started after the invocation was sent and ended before its answer came
// back. Nothing appears later: no span of an earlier invocation in a
// later flush, no read-ahead failure on a thaw.
func TestFrozenBetweenInvocations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and starts DynamoDB Local and the RIE")
	}
	root := testenv.RepoRoot(t)
	dev, issuerURL := testIssuer(t)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(root, "events", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var mcpEvent events.LambdaFunctionURLRequest
	if err := json.Unmarshal(read("mcp-create.json"), &mcpEvent); err != nil {
		t.Fatal(err)
	}
	audience := "https://" + mcpEvent.Headers["host"] + "/mcp"
	token, err := dev.Token("sub", "user-a", audience, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{}
	for k, v := range mcpEvent.Headers {
		headers[k] = v
	}
	headers["authorization"] = "Bearer " + token
	mcpEvent.Headers = headers
	mcpRaw, _ := json.Marshal(mcpEvent)

	endpoint := testenv.DynamoDB(t)
	table := tableWithUserA(t, endpoint)
	rc := otlptest.Start(t)
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	testenv.BuildBootstrap(t, "lambda.norpc,nosqlite", runtime.GOARCH, bootstrap)
	rie := testenv.StartRuntime(t, bootstrap, map[string]string{
		"TABLE_NAME":                  table,
		"HOOK_KEY":                    rieHookKey,
		"AWS_ENDPOINT_URL_DYNAMODB":   endpoint,
		"MCP_ISSUER":                  issuerURL,
		"MCP_AUDIENCE":                audience,
		"RESULT_CACHE_SIZE":           "0",
		"STORE_CALL_TIMEOUT":          "2s",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL,
	})

	type call struct {
		name string
		raw  []byte
		// claim: the invocation claims an operation, so its spans hold
		// the transaction and the read-ahead beside it.
		claim bool
		check func(t *testing.T, r urlResponse)
	}
	var ticket string
	answer := func(r urlResponse) map[string]any {
		var a map[string]any
		if r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &a) != nil {
			t.Fatalf("%d %s\n%s", r.StatusCode, r.Body, rie.Out)
		}
		return a
	}
	calls := []call{
		{"create.json", read("create.json"), true, func(t *testing.T, r urlResponse) {
			a := answer(r)
			ticket, _ = a["ticket_id"].(string)
			if a["status"] != "created" || a["deduplicated"] != false || ticket == "" {
				t.Errorf("create.json: %s; want created, not deduplicated", r.Body)
			}
		}},
		{"repeat.json", read("repeat.json"), true, func(t *testing.T, r urlResponse) {
			if a := answer(r); a["status"] != "created" || a["deduplicated"] != true || a["ticket_id"] != ticket {
				t.Errorf("repeat.json: %s; want ticket %s, deduplicated", r.Body, ticket)
			}
		}},
		{"mcp-create.json", mcpRaw, true, func(t *testing.T, r urlResponse) {
			var rpc struct {
				Result struct {
					StructuredContent map[string]any `json:"structuredContent"`
				} `json:"result"`
			}
			if r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &rpc) != nil {
				t.Fatalf("mcp-create.json: %d %s", r.StatusCode, r.Body)
			}
			if a := rpc.Result.StructuredContent; a["status"] != "created" || a["deduplicated"] != true || a["ticket_id"] != ticket {
				t.Errorf("mcp-create.json: %s; want ticket %s, deduplicated", r.Body, ticket)
			}
		}},
		{"functions.json", read("functions.json"), false, func(t *testing.T, r urlResponse) {
			if r.StatusCode != 200 || !strings.Contains(r.Body, `"create_ticket"`) {
				t.Errorf("functions.json: %d %s", r.StatusCode, r.Body)
			}
		}},
	}

	frozen := 0 // the stopped bootstrap's pid; 0 before the first invocation
	seen := 0   // spans received before this invocation
	for i, c := range calls {
		if frozen != 0 {
			rie.Thaw(t, frozen)
		}
		sent := time.Now()
		resp, err := invokeErr(rie.URL, c.raw)
		answered := time.Now()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, rie.Out)
		}
		frozen = rie.Freeze(t)
		c.check(t, resp)

		// The invocation's line, with its metrics, is out. The bootstrap
		// is stopped: what it wrote is in the emulator's pipe, which may
		// still be copying it.
		out := rie.Out.Await(func(s string) bool { return callbackLogLines(s) > i }, 5*time.Second)
		if n := callbackLogLines(out); n != i+1 {
			t.Errorf("%s: %d callback lines after %d invocations, with the bootstrap stopped", c.name, n, i+1)
		}
		// Its spans are in, all of them inside the invocation.
		spans, _ := rc.Snapshot()
		mine := spans[seen:]
		seen = len(spans)
		if len(mine) == 0 {
			t.Errorf("%s: no span exported before the answer", c.name)
		}
		for _, s := range otlptest.Outside(mine, sent, answered) {
			t.Errorf("%s: span %s [%s] ran %s to %s, outside the invocation (%s to %s): work of another invocation, or after the answer",
				c.name, s.GetName(), otlptest.ID(s), stamp(s.GetStartTimeUnixNano()), stamp(s.GetEndTimeUnixNano()),
				sent.Format(time.StampMicro), answered.Format(time.StampMicro))
		}
		var tx, readAhead int
		for _, s := range mine {
			switch v, _ := otlptest.Attr(s, string(tracing.AttrReadAhead)); {
			case s.GetName() == "DynamoDB.TransactWriteItems":
				tx++
			case s.GetName() == "DynamoDB.GetItem" && v == "true":
				readAhead++
			}
		}
		if c.claim && (tx != 1 || readAhead != 1) {
			t.Errorf("%s: %d transaction and %d read-ahead spans exported before the answer, want 1 and 1:\n%s",
				c.name, tx, readAhead, dump(mine))
		}
		if i < len(calls)-1 {
			time.Sleep(freezePause)
		}
	}
	// Thawed once more, the bootstrap has nothing left to do: no line and
	// no span appears.
	before := rie.Out.String()
	rie.Thaw(t, frozen)
	time.Sleep(time.Second)
	if spans, _ := rc.Snapshot(); len(spans) != seen {
		t.Errorf("%d spans exported after the last answer:\n%s", len(spans)-seen, dump(spans[seen:]))
	}
	out := rie.Out.String()
	if extra := strings.TrimPrefix(out, before); strings.Contains(extra, "{") {
		t.Errorf("the bootstrap wrote after its last answer:\n%s", extra)
	}
	if strings.Contains(out, "read-ahead failed") {
		t.Errorf("a read-ahead failed:\n%s", out)
	}
	checkEMFLines(t, out, len(calls))
	if n := countItems(t, testenv.DynamoClient(t, endpoint), table)["TICKET#"]; n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
	if t.Failed() {
		t.Logf("RIE and bootstrap output:\n%s", out)
	}
}

// stamp is an OTLP time (nanoseconds since the epoch) for a message.
func stamp(ns uint64) string {
	return time.Unix(0, int64(ns)).Format(time.StampMicro) //nolint:gosec // far inside int64
}
