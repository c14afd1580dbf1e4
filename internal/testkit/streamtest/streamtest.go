// Package streamtest plays Lambda's side of the two functions for tests
// that run them under the runtime interface emulator: the function URL
// event of a signed callback, and the DynamoDB stream event the delivery
// function receives, read from DynamoDB Local's stream and filtered as
// template.yaml's FilterCriteria filters it.
package streamtest

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// Callback sends body to the callback function at url as AIVAX does (a
// function URL event with a fresh nonce of hookKey) and returns the
// function's response.
func Callback(t *testing.T, url, hookKey, body string) events.LambdaFunctionURLResponse {
	t.Helper()
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
	if err := json.Unmarshal(testenv.Invoke(t, url, ev), &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// Client reads the streams of DynamoDB Local at endpoint.
func Client(endpoint string) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region: testenv.Region, BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("testenv", "testenv", ""),
	})
}

// ARN is the one stream of table, listed through endpoint.
func ARN(t testing.TB, endpoint, table string) string {
	t.Helper()
	list, err := Client(endpoint).ListStreams(context.Background(), &dynamodbstreams.ListStreamsInput{TableName: &table})
	if err != nil || len(list.Streams) != 1 {
		t.Fatalf("ListStreams: %v, %d streams", err, len(list.Streams))
	}
	return aws.ToString(list.Streams[0].StreamArn)
}

// Event reads the stream streamARN through endpoint as Lambda's event
// source mapping does (DescribeStream, GetShardIterator and GetRecords on
// each shard), keeps the records template.yaml's filter passes (INSERT of
// a TICKET#, COMMENT# or CLOSE# item whose delivery_state is pending)
// until they hold the insert of each of tickets, and returns the
// events.DynamoDBEvent built from them and how many of tickets it holds.
// tickets are outbox ids: a ticket's bare id, or a follow-up's item key
// ("COMMENT#<comment_id>", "CLOSE#<close_id>").
func Event(t *testing.T, endpoint, streamARN string, tickets []string) ([]byte, int) {
	t.Helper()
	ctx := context.Background()
	sc := Client(endpoint)
	want := map[string]bool{}
	for _, id := range tickets {
		want[id] = true
	}
	var ev events.DynamoDBEvent
	found := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
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
			for iter := it.ShardIterator; iter != nil; {
				out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
				if err != nil {
					t.Fatalf("GetRecords: %v", err)
				}
				for _, r := range out.Records {
					rec := Record(t, r, streamARN)
					if !PassesFilter(rec) {
						continue
					}
					ev.Records = append(ev.Records, rec)
					if want[strings.TrimPrefix(rec.Change.Keys[dynamo.PartitionKey].String(), "TICKET#")] {
						found++
					}
				}
				if len(out.Records) == 0 {
					break // caught up with an open shard
				}
				iter = out.NextShardIterator
			}
		}
		if found >= len(tickets) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream: %d of %d ticket inserts after 30s", found, len(tickets))
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b, found
}

// Record converts a record of the streams API into the record Lambda
// delivers, images through the SDK's attribute value package.
func Record(t testing.TB, r streamtypes.Record, streamARN string) events.DynamoDBEventRecord {
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

// PassesFilter is template.yaml's FilterCriteria pattern: an INSERT of a
// TICKET#, COMMENT# or CLOSE# item written pending.
func PassesFilter(r events.DynamoDBEventRecord) bool {
	pk, ok := r.Change.Keys[dynamo.PartitionKey]
	if r.EventName != "INSERT" || !ok || pk.DataType() != events.DataTypeString {
		return false
	}
	if !slices.ContainsFunc([]string{"TICKET#", "COMMENT#", "CLOSE#"}, func(p string) bool { return strings.HasPrefix(pk.String(), p) }) {
		return false
	}
	st, ok := r.Change.NewImage["delivery_state"]
	return ok && st.DataType() == events.DataTypeString && st.String() == "pending"
}
