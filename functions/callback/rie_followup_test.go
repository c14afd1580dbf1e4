package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// TestFollowUpsUnderRIE runs add_comment and close_ticket on the real
// bootstrap under the Lambda emulator against DynamoDB Local, through
// both doors as function URL events: each call's repeat through the other
// door is deduplicated, another tenant's ticket is not found, a closed
// ticket takes no comment, a second close is already_closed, and
// get_ticket right after each answer shows it. The table then holds one
// comment and one close.
func TestFollowUpsUnderRIE(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and starts DynamoDB Local and the RIE")
	}
	dev, issuerURL := testIssuer(t)
	const host = "followups.lambda-url.eu-west-1.on.aws"
	audience := "https://" + host + "/mcp"
	endpoint := testenv.DynamoDB(t)
	table := tableWithUserA(t, endpoint)
	client := testenv.DynamoClient(t, endpoint)
	seed := dynamo.New(client, table, dynamo.Options{CallTimeout: 10 * time.Second})
	if err := seed.PutUser(context.Background(), core.User{ExternalID: "user-c", TenantID: "tenant-b", UserID: "carol"}); err != nil {
		t.Fatal(err)
	}
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	testenv.BuildBootstrap(t, "lambda.norpc,nosqlite", runtime.GOARCH, bootstrap)
	invokeURL, output, _ := testenv.StartRIE(t, bootstrap, map[string]string{
		"TABLE_NAME": table, "HOOK_KEY": rieHookKey, "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
		"MCP_ISSUER": issuerURL, "MCP_AUDIENCE": audience,
	})
	proxy := urlProxy(t, invokeURL, host)

	callback := func(user, fn, args, requestID string) (int, map[string]any) {
		t.Helper()
		n, err := nonce.Generate(rieHookKey, nonce.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		code, b := callbacktest.Send(t, http.MethodPost, proxy+"/callback", n, `{"type":"tool_call","function":{"name":`+
			callbacktest.Quote(fn)+`,"content":`+args+`},"context":{"externalUserId":`+callbacktest.Quote(user)+
			`,"metadata":{"request_id":`+callbacktest.Quote(requestID)+`}}}`)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %d %s\n%s", fn, code, b, output.String())
		}
		return code, m
	}
	sessions := map[string]*mcp.ClientSession{}
	callMCP := func(user, fn string, args map[string]any, requestID string) (bool, map[string]any) {
		t.Helper()
		cs := sessions[user]
		if cs == nil {
			token, err := dev.Token("sub", user, audience, nil, time.Now(), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			c := mcp.NewClient(&mcp.Implementation{Name: "followups-rie", Version: "1"}, nil)
			if cs, err = c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: proxy + "/mcp",
				HTTPClient: &http.Client{Transport: bearerTransport(token)}, DisableStandaloneSSE: true, MaxRetries: -1}, nil); err != nil {
				t.Fatalf("connect: %v\n%s", err, output.String())
			}
			t.Cleanup(func() { _ = cs.Close() })
			sessions[user] = cs
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: fn, Arguments: args,
			Meta: mcp.Meta{"io.github.aivax-examples/request_id": requestID}})
		if err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return res.IsError, m
	}
	code := func(m map[string]any) any {
		e, _ := m["error"].(map[string]any)
		return e["code"]
	}
	getTicket := func(user, ticket string) map[string]any {
		t.Helper()
		status, m := callback(user, core.GetTicket, `{"ticket_id":`+callbacktest.Quote(ticket)+`}`, "get")
		tk, _ := m["ticket"].(map[string]any)
		if status != 200 || tk == nil {
			t.Fatalf("get_ticket: %d %v", status, m)
		}
		return tk
	}

	status, created := callback("user-a", core.CreateTicket, `{"title":"Cannot sign in"}`, "rie-r-1")
	ticket, _ := created["ticket_id"].(string)
	if status != 200 || ticket == "" {
		t.Fatalf("create_ticket: %d %v", status, created)
	}
	commentArgs := `{"ticket_id":` + callbacktest.Quote(ticket) + `,"body":"It fails on my phone too."}`
	status, first := callback("user-a", core.AddComment, commentArgs, "rie-c-1")
	if status != 200 || first["status"] != "created" || first["deduplicated"] != false {
		t.Fatalf("add_comment: %d %v", status, first)
	}
	if isErr, again := callMCP("user-a", core.AddComment, map[string]any{"ticket_id": ticket, "body": "It fails on my phone too."}, "rie-c-1"); isErr ||
		again["comment_id"] != first["comment_id"] || again["deduplicated"] != true {
		t.Fatalf("its repeat over MCP: %v (isError %v)", again, isErr)
	}
	if comments, _ := getTicket("user-a", ticket)["comments"].([]any); len(comments) != 1 {
		t.Fatalf("get_ticket right after the comment: %v", comments)
	}
	if status, m := callback("user-c", core.AddComment, commentArgs, "rie-c-2"); status != 200 || code(m) != core.CodeTicketNotFound {
		t.Fatalf("another tenant's comment: %d %v; want ticket_not_found", status, m)
	}
	if isErr, closed := callMCP("user-a", core.CloseTicket, map[string]any{"ticket_id": ticket, "resolution": "Password reset."}, "rie-x-1"); isErr ||
		closed["status"] != "closed" || closed["deduplicated"] != false {
		t.Fatalf("close_ticket over MCP: %v (isError %v)", closed, isErr)
	}
	if status, m := callback("user-a", core.CloseTicket, `{"ticket_id":`+callbacktest.Quote(ticket)+`,"resolution":"Password reset."}`, "rie-x-1"); status != 200 ||
		m["deduplicated"] != true {
		t.Fatalf("its repeat through the callback: %d %v", status, m)
	}
	if status, m := callback("user-a", core.CloseTicket, `{"ticket_id":`+callbacktest.Quote(ticket)+`}`, "rie-x-2"); status != 200 || m["already_closed"] != true {
		t.Fatalf("a second close: %d %v; want already_closed", status, m)
	}
	if status, m := callback("user-a", core.AddComment, `{"ticket_id":`+callbacktest.Quote(ticket)+`,"body":"After."}`, "rie-c-3"); status != 200 || code(m) != core.CodeTicketClosed {
		t.Fatalf("a comment after the close: %d %v; want ticket_closed", status, m)
	}
	if tk := getTicket("user-a", ticket); tk["status"] != "closed" || tk["resolution"] != "Password reset." {
		t.Fatalf("get_ticket right after the close: %v", tk)
	}
	counts := countItems(t, client, table)
	if counts["COMMENT#"] != 1 || counts["CLOSE#"] != 1 || counts["TICKET#"] != 1 {
		t.Fatalf("items by kind %v; want one ticket, one comment, one close", counts)
	}
	if strings.Contains(output.String(), "It fails on my phone") {
		t.Error("the function's output carries a comment's body")
	}
}
