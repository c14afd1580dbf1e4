package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo/tableschema"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	hookKey = "delivery-test-hook-key"
	email   = "agent@acme.com"
	token   = "ZENDESK-TOKEN-NEVER-LOGGED"
)

// streamTable creates a table as tableschema defines it (with the stream
// the delivery function reads), and returns its name and stream ARN.
func streamTable(t testing.TB, client *dynamodb.Client) (string, string) {
	t.Helper()
	name := fmt.Sprintf("delivery-rie-%d-%d", os.Getpid(), time.Now().UnixNano())
	in := tableschema.CreateTable(name)
	ctx := context.Background()
	if _, err := client.CreateTable(ctx, in); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() { _, _ = client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &name}) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
		if err != nil {
			t.Fatal(err)
		}
		if out.Table.TableStatus == types.TableStatusActive && out.Table.LatestStreamArn != nil {
			return name, *out.Table.LatestStreamArn
		}
		if time.Now().After(deadline) {
			t.Fatalf("table %s not active with a stream", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
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

// TestDeliveryUnderRIE runs the built delivery bootstrap under the Lambda
// Runtime Interface Emulator against DynamoDB Local (its stream enabled)
// and the fake helpdesk: the path a deployed stack takes, minus AWS.
func TestDeliveryUnderRIE(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and starts DynamoDB Local and the RIE")
	}
	endpoint := testenv.DynamoDB(t)
	client := testenv.DynamoClient(t, endpoint)
	table, streamARN := streamTable(t, client)
	store := dynamo.New(client, table, dynamo.Options{CallTimeout: 10 * time.Second})
	ctx := context.Background()
	if err := store.PutUser(ctx, core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{Email: email, Token: token})

	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	testenv.BuildFunction(t, "./functions/delivery", "lambda.norpc,nosqlite", runtime.GOARCH, bootstrap)
	secret, _ := json.Marshal(map[string]string{"email": email, "token": token})
	invokeURL, output, _ := testenv.StartRIE(t, bootstrap, map[string]string{
		"TABLE_NAME":                table,
		"AWS_ENDPOINT_URL_DYNAMODB": endpoint,
		"DELIVERY_KIND":             "zendesk",
		"DELIVERY_URL":              fake.URL(),
		"DELIVERY_SECRET":           string(secret),
		"DELIVERY_TIMEOUT":          "3s",
		// The template's Timeout: the sweep claims nothing once less than
		// one lease plus one call timeout is left.
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "90",
	})

	t.Run("stream", func(t *testing.T) {
		ids := createThroughCallback(t, startCallback(t, endpoint, table), 3)
		ev, n := streamEvent(t, endpoint, streamARN, ids)
		if n != len(ids) {
			t.Fatalf("the stream holds %d pending ticket inserts, want %d", n, len(ids))
		}
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
		for _, r := range plain.Records {
			item, err := attributevalue.UnmarshalMapJSON(r.Change.NewImage)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
				t.Fatal(err)
			}
			if pk := item[tableschema.PartitionKey].(*types.AttributeValueMemberS).Value; strings.HasPrefix(pk, "TICKET#") {
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
	{
		body := fmt.Sprintf(`{"type":"tool_call","function":{"name":"create_ticket","content":{"title":%q}},`+
			`"context":{"externalUserId":"user-a","metadata":{"request_id":%q}}}`, title, requestID)
		nc, err := nonce.Generate(hookKey, nonce.DefaultMinCost)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := json.Marshal(events.LambdaFunctionURLRequest{
			Version: "2.0", RawPath: "/callback", Body: body,
			Headers: map[string]string{strings.ToLower(httpapi.NonceHeader): nc, "content-type": "application/json"},
			RequestContext: events.LambdaFunctionURLRequestContext{
				HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodPost, Path: "/callback"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		var resp events.LambdaFunctionURLResponse
		if err := json.Unmarshal(testenv.Invoke(t, callbackURL, ev), &resp); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Status   string `json:"status"`
			TicketID string `json:"ticket_id"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &got); err != nil || got.Status != "created" {
			t.Fatalf("create_ticket: %d %s", resp.StatusCode, resp.Body)
		}
		return got.TicketID
	}
}

// streamEvent reads the table's stream as Lambda's event source mapping
// does (DescribeStream, GetShardIterator, GetRecords), keeps the records
// the template's filter passes (INSERT of a TICKET# item whose
// delivery_state is pending) until it has one for each of ids, and builds
// the events.DynamoDBEvent the function receives from them.
func streamEvent(t *testing.T, endpoint, streamARN string, ids []string) ([]byte, int) {
	t.Helper()
	ctx := context.Background()
	sc := streamsClient(endpoint)
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var ev events.DynamoDBEvent
	found := 0
	deadline := time.Now().Add(30 * time.Second)
	for found < len(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("stream: %d of %d ticket inserts after 30s", found, len(ids))
		}
		ev.Records, found = nil, 0
		desc, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &streamARN})
		if err != nil {
			t.Fatalf("DescribeStream: %v", err)
		}
		for _, sh := range desc.StreamDescription.Shards {
			it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: &streamARN,
				ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatalf("GetShardIterator: %v", err)
			}
			iter := it.ShardIterator
			for iter != nil {
				out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
				if err != nil {
					t.Fatalf("GetRecords: %v", err)
				}
				for _, r := range out.Records {
					rec := lambdaRecord(t, r, streamARN)
					if !passesFilter(rec) {
						continue
					}
					ev.Records = append(ev.Records, rec)
					if want[strings.TrimPrefix(rec.Change.Keys[tableschema.PartitionKey].String(), "TICKET#")] {
						found++
					}
				}
				if len(out.Records) == 0 {
					break // caught up with an open shard
				}
				iter = out.NextShardIterator
			}
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b, found
}

// streamsClient reads the streams of DynamoDB Local at endpoint.
func streamsClient(endpoint string) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region: testenv.Region, BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("testenv", "testenv", ""),
	})
}

// lambdaRecord converts a record of the streams API into the record
// Lambda delivers, images through the SDK's attribute value package.
func lambdaRecord(t testing.TB, r streamtypes.Record, streamARN string) events.DynamoDBEventRecord {
	t.Helper()
	image := func(m map[string]streamtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
		if m == nil {
			return nil
		}
		av, err := attributevalue.FromDynamoDBStreamsMap(m)
		if err != nil {
			t.Fatal(err)
		}
		b, err := attributevalue.MarshalMapJSON(av)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]events.DynamoDBAttributeValue
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	c := r.Dynamodb
	return events.DynamoDBEventRecord{
		AWSRegion: testenv.Region, EventID: aws.ToString(r.EventID), EventName: string(r.EventName),
		EventSource: "aws:dynamodb", EventVersion: aws.ToString(r.EventVersion), EventSourceArn: streamARN,
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: aws.ToTime(c.ApproximateCreationDateTime)},
			Keys:                        image(c.Keys), NewImage: image(c.NewImage),
			SequenceNumber: aws.ToString(c.SequenceNumber), SizeBytes: aws.ToInt64(c.SizeBytes),
			StreamViewType: string(c.StreamViewType),
		},
	}
}

// passesFilter is template.yaml's FilterCriteria pattern.
func passesFilter(r events.DynamoDBEventRecord) bool {
	pk, ok := r.Change.Keys[tableschema.PartitionKey]
	if r.EventName != "INSERT" || !ok || pk.DataType() != events.DataTypeString || !strings.HasPrefix(pk.String(), "TICKET#") {
		return false
	}
	st, ok := r.Change.NewImage["delivery_state"]
	return ok && st.DataType() == events.DataTypeString && st.String() == "pending"
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
	endpoint := testenv.DynamoDB(t)
	client := testenv.DynamoClient(t, endpoint)
	table, streamARN := streamTable(t, client)
	store := dynamo.New(client, table, dynamo.Options{CallTimeout: 10 * time.Second})
	ctx := context.Background()
	if err := store.PutUser(ctx, core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	const key = "lin_api_RIE-KEY-NEVER-LOGGED"
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{LinearKey: key})
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	testenv.BuildFunction(t, "./functions/delivery", "lambda.norpc,nosqlite", runtime.GOARCH, bootstrap)
	invokeURL, output, _ := testenv.StartRIE(t, bootstrap, map[string]string{
		"TABLE_NAME":                  table,
		"AWS_ENDPOINT_URL_DYNAMODB":   endpoint,
		"DELIVERY_KIND":               "linear",
		"DELIVERY_URL":                fake.LinearURL(),
		"DELIVERY_TEAM_ID":            fake.Config().LinearTeamID,
		"DELIVERY_SECRET":             `{"api_key":"` + key + `"}`,
		"DELIVERY_TIMEOUT":            "3s",
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "90",
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
	ev, n := streamEvent(t, endpoint, streamARN, ids)
	if n != len(ids) {
		t.Fatalf("the stream holds %d pending ticket inserts, want %d", n, len(ids))
	}
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
