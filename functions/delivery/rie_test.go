package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/streamtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	hookKey = "delivery-test-hook-key"
	email   = "agent@acme.com"
	token   = "ZENDESK-TOKEN-NEVER-LOGGED"
)

// streamTable creates a table as dynamo.CreateTable defines it (with the
// stream the delivery function reads), and returns its name and stream ARN.
func streamTable(t testing.TB, endpoint string) (string, string) {
	t.Helper()
	name := testenv.CreateTable(t, endpoint)
	return name, streamtest.ARN(t, endpoint, name)
}

func batchFailures(t *testing.T, answer []byte) []string {
	t.Helper()
	var resp events.DynamoDBEventResponse
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil || resp.BatchItemFailures == nil {
		t.Fatalf("answer %s is not an events.DynamoDBEventResponse: %v", answer, err)
	}
	var seqs []string
	for _, f := range resp.BatchItemFailures {
		seqs = append(seqs, f.ItemIdentifier)
	}
	return seqs
}

// rieTable starts DynamoDB Local with a table whose stream is on and
// which holds user-a, and returns its endpoint, name, stream and store.
func rieTable(t *testing.T) (endpoint, table, streamARN string, store *dynamo.Store) {
	t.Helper()
	endpoint = testenv.DynamoDB(t)
	client := testenv.DynamoClient(t, endpoint)
	table, streamARN = streamTable(t, endpoint)
	store = dynamo.New(client, table, dynamo.Options{CallTimeout: 10 * time.Second})
	if err := store.PutUser(context.Background(), core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	return endpoint, table, streamARN, store
}

// startDelivery builds the delivery bootstrap and runs it under the RIE
// on table, with the destination's settings in dest; it returns the
// invoke URL and the function's output.
func startDelivery(t *testing.T, endpoint, table string, dest map[string]string) (string, *testenv.Buffer) {
	t.Helper()
	r := startDeliveryRuntime(t, endpoint, table, dest)
	return r.URL, r.Out
}

// startDeliveryRuntime is startDelivery, returning the emulator for a
// test that freezes the bootstrap.
func startDeliveryRuntime(t *testing.T, endpoint, table string, dest map[string]string) *testenv.Runtime {
	t.Helper()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	testenv.BuildFunction(t, "./functions/delivery", "lambda.norpc,nosqlite", runtime.GOARCH, bootstrap)
	vars := map[string]string{
		"TABLE_NAME":                table,
		"AWS_ENDPOINT_URL_DYNAMODB": endpoint,
		"DELIVERY_TIMEOUT":          "3s",
		// The template's Timeout: the sweep claims nothing once less than
		// one lease plus one call timeout is left.
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "90",
	}
	maps.Copy(vars, dest)
	return testenv.StartRuntime(t, bootstrap, vars)
}

// pendingInserts is the stream's event holding one pending insert of
// each of ids, and no other insert of them.
func pendingInserts(t *testing.T, endpoint, streamARN string, ids []string) []byte {
	t.Helper()
	ev, n := streamtest.Event(t, endpoint, streamARN, ids)
	if n != len(ids) {
		t.Fatalf("the stream holds %d pending ticket inserts, want %d", n, len(ids))
	}
	return ev
}

// TestDeliveryUnderRIE runs the built delivery bootstrap under the Lambda
// Runtime Interface Emulator against DynamoDB Local (its stream enabled)
// and the fake helpdesk: the path a deployed stack takes, minus AWS.
func TestDeliveryUnderRIE(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and starts DynamoDB Local and the RIE")
	}
	endpoint, table, streamARN, store := rieTable(t)
	ctx := context.Background()
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{Email: email, Token: token})

	secret, _ := json.Marshal(map[string]string{"email": email, "token": token})
	invokeURL, output := startDelivery(t, endpoint, table, map[string]string{
		"DELIVERY_KIND":   "zendesk",
		"DELIVERY_URL":    fake.URL(),
		"DELIVERY_SECRET": string(secret),
	})

	t.Run("stream", func(t *testing.T) {
		ids := createThroughCallback(t, startCallback(t, endpoint, table), 3)
		ev := pendingInserts(t, endpoint, streamARN, ids)
		for round := range 2 { // the second is the stream delivering the same records again
			if f := batchFailures(t, testenv.Invoke(t, invokeURL, ev)); len(f) != 0 {
				t.Errorf("round %d: batch item failures %v", round, f)
			}
			for _, id := range ids {
				if h := fake.Held(id); h != 1 {
					t.Errorf("round %d: helpdesk holds %d tickets for %s, want 1", round, h, id)
				}
				r, err := store.Delivery(ctx, id)
				if err != nil || r.State != delivery.StateDelivered || r.ExternalID == "" || r.ExternalURL == "" {
					t.Errorf("round %d: %s: %+v %v; want delivered with the helpdesk's id and URL", round, id, r, err)
				}
			}
		}
		if got := fake.Requests(fakehelpdesk.ZendeskCreate); got != len(ids) {
			t.Errorf("helpdesk received %d creates, want %d: nothing is sent twice", got, len(ids))
		}
	})

	t.Run("events", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "events", "delivery-stream.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("events/delivery-stream.json is not an events.DynamoDBEvent: %v", err)
		}
		// Store the items of the event's images, as the callback's
		// transaction wrote them.
		var ticket string
		var plain struct {
			Records []struct {
				Change struct {
					NewImage json.RawMessage `json:"NewImage"`
				} `json:"dynamodb"`
			} `json:"Records"`
		}
		if err := json.Unmarshal(raw, &plain); err != nil {
			t.Fatal(err)
		}
		client := testenv.DynamoClient(t, endpoint)
		for _, r := range plain.Records {
			item, err := attributevalue.UnmarshalMapJSON(r.Change.NewImage)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
				t.Fatal(err)
			}
			if pk := item[dynamo.PartitionKey].(*types.AttributeValueMemberS).Value; strings.HasPrefix(pk, "TICKET#") {
				ticket = strings.TrimPrefix(pk, "TICKET#")
			}
		}
		before := fake.Total()
		for round := range 2 {
			if f := batchFailures(t, testenv.Invoke(t, invokeURL, raw)); len(f) != 0 {
				t.Errorf("round %d: batch item failures %v", round, f)
			}
		}
		if fake.Held(ticket) != 1 || fake.Total() != before+1 {
			t.Errorf("helpdesk holds %d for %s and %d new in all; want 1 and 1", fake.Held(ticket), ticket, fake.Total()-before)
		}
		if r, err := store.Delivery(ctx, ticket); err != nil || r.State != delivery.StateDelivered {
			t.Errorf("%s: %+v %v; want delivered", ticket, r, err)
		}
	})

	t.Run("schedule", func(t *testing.T) {
		env := deliverytest.NewEnv(t, store, true)
		left := env.Create(`{"title":"Left behind by the stream"}`)
		env.Release(left, time.Now().Add(-time.Minute)) // pending, due in the past
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "events", "delivery-schedule.json"))
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Moved int `json:"moved"`
		}
		if err := json.Unmarshal(testenv.Invoke(t, invokeURL, raw), &res); err != nil || res.Moved != 1 {
			t.Errorf("sweep answered %+v (%v), want moved 1", res, err)
		}
		if fake.Held(left) != 1 {
			t.Errorf("helpdesk holds %d for %s, want 1", fake.Held(left), left)
		}
		if r, _ := store.Delivery(ctx, left); r.State != delivery.StateDelivered {
			t.Errorf("%s: %s, want delivered", left, r.State)
		}
	})

	out := output.String()
	if strings.Contains(out, token) || strings.Contains(out, string(secret)) {
		t.Errorf("the helpdesk token is in the function's output:\n%s", out)
	}
	if !strings.Contains(out, `"state":"delivered"`) {
		t.Errorf("no delivery log line in the output:\n%s", out)
	}
}

// startCallback runs the built callback bootstrap under its own emulator,
// configured as template.yaml configures it with a destination
// (DELIVERY_KIND set), and returns its invoke URL.
func startCallback(t *testing.T, endpoint, table string) string {
	t.Helper()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	testenv.BuildFunction(t, "./functions/callback", "lambda.norpc,nosqlite", runtime.GOARCH, bootstrap)
	url, _, _ := testenv.StartRIE(t, bootstrap, map[string]string{
		"TABLE_NAME": table, "HOOK_KEY": hookKey, "AWS_ENDPOINT_URL_DYNAMODB": endpoint, "DELIVERY_KIND": "zendesk",
	})
	return url
}

// createThroughCallback creates n tickets through the callback function
// (function URL events, as AIVAX sends them) and returns their ids.
func createThroughCallback(t *testing.T, callbackURL string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, createOnce(t, callbackURL, fmt.Sprintf("Stream ticket %d", i), fmt.Sprintf("stream-%d-%d", time.Now().UnixNano(), i)))
	}
	return ids
}

// createOnce sends one create_ticket callback with the given title and
// request id (a repeat of a callback carries the same) and returns the
// ticket id it answers.
func createOnce(t *testing.T, callbackURL, title, requestID string) string {
	t.Helper()
	body := fmt.Sprintf(`{"type":"tool_call","function":{"name":"create_ticket","content":{"title":%q}},`+
		`"context":{"externalUserId":"user-a","metadata":{"request_id":%q}}}`, title, requestID)
	resp := streamtest.Callback(t, callbackURL, hookKey, body)
	var got struct {
		Status   string `json:"status"`
		TicketID string `json:"ticket_id"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil || got.Status != "created" {
		t.Fatalf("create_ticket: %d %s", resp.StatusCode, resp.Body)
	}
	return got.TicketID
}

// TestLinearDeliveryUnderRIE: the built delivery bootstrap, configured as
// template.yaml configures DeliveryKind linear (DELIVERY_TEAM_ID, the key
// as {"api_key"}), delivers tickets read from DynamoDB Local's stream to
// the fake Linear: one issue per ticket, whose identifier get_ticket's
// record carries; a repeated callback and the stream's redelivery of the
// same records create no second issue.
func TestLinearDeliveryUnderRIE(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and starts DynamoDB Local and the RIE")
	}
	endpoint, table, streamARN, store := rieTable(t)
	ctx := context.Background()
	const key = "lin_api_RIE-KEY-NEVER-LOGGED"
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{LinearKey: key})
	invokeURL, output := startDelivery(t, endpoint, table, map[string]string{
		"DELIVERY_KIND":    "linear",
		"DELIVERY_URL":     fake.LinearURL(),
		"DELIVERY_TEAM_ID": fake.Config().LinearTeamID,
		"DELIVERY_SECRET":  `{"api_key":"` + key + `"}`,
	})

	callback := startCallback(t, endpoint, table)
	ids := createThroughCallback(t, callback, 3)
	// The agent's callback for the first ticket, repeated: the same ticket.
	reqID := fmt.Sprintf("repeat-%d", time.Now().UnixNano())
	first := createOnce(t, callback, "Repeated", reqID)
	if again := createOnce(t, callback, "Repeated", reqID); again != first {
		t.Fatalf("the repeated callback answered ticket %s, the first %s", again, first)
	}
	ids = append(ids, first)
	ev := pendingInserts(t, endpoint, streamARN, ids)
	for round := range 2 { // the second is the stream delivering the same records again
		if f := batchFailures(t, testenv.Invoke(t, invokeURL, ev)); len(f) != 0 {
			t.Errorf("round %d: batch item failures %v", round, f)
		}
	}
	issues := fake.LinearIssues()
	for _, id := range ids {
		if h := fake.Held(id); h != 1 {
			t.Errorf("Linear holds %d issues with id %s, want 1", h, id)
		}
		r, err := store.Delivery(ctx, id)
		if err != nil || r.State != delivery.StateDelivered || !strings.HasPrefix(r.ExternalID, fake.Config().LinearTeamKey+"-") || r.ExternalURL == "" {
			t.Errorf("%s: %+v %v; want delivered with the issue's identifier and url", id, r, err)
		}
	}
	if len(issues) != len(ids) || fake.Requests(fakehelpdesk.LinearCreate) != len(ids) {
		t.Errorf("Linear holds %d issues after %d creates, want %d and %d", len(issues), fake.Requests(fakehelpdesk.LinearCreate), len(ids), len(ids))
	}
	if out := output.String(); strings.Contains(out, key) || !strings.Contains(out, `"state":"delivered"`) {
		t.Errorf("the function's output shows the key, or no delivery line:\n%s", out)
	}
}
