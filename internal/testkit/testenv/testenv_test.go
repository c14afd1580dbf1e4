package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The design relies on this: when one write of a transaction fails its
// condition and asks for ReturnValuesOnConditionCheckFailure=ALL_OLD, the
// TransactionCanceledException carries, per item, the reason code and, for
// the failing one, the item as it was; and nothing of the transaction is
// written.
func TestTransactConditionFailureReturnsOldItem(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	if again := testenv.DynamoDB(t); again != endpoint {
		t.Fatalf("second DynamoDB() = %q, want the same endpoint %q", again, endpoint)
	}
	table := testenv.CreateTable(t, endpoint)
	client := testenv.DynamoClient(t, endpoint)
	ctx := context.Background()

	existing := map[string]types.AttributeValue{
		"pk":    testenv.S("OP#k1"),
		"state": testenv.S("done"),
		"n":     &types.AttributeValueMemberN{Value: "7"},
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: existing}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}

	failing := map[string]types.TransactWriteItem{
		"Put": {Put: &types.Put{
			TableName:                           &table,
			Item:                                map[string]types.AttributeValue{"pk": testenv.S("OP#k1"), "state": testenv.S("pending")},
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		"ConditionCheck": {ConditionCheck: &types.ConditionCheck{
			TableName:                           &table,
			Key:                                 map[string]types.AttributeValue{"pk": testenv.S("OP#k1")},
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		"Update": {Update: &types.Update{
			TableName:                           &table,
			Key:                                 map[string]types.AttributeValue{"pk": testenv.S("OP#k1")},
			UpdateExpression:                    aws.String("SET #s = :p"),
			ConditionExpression:                 aws.String("#s = :p"),
			ExpressionAttributeNames:            map[string]string{"#s": "state"},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":p": testenv.S("pending")},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
	}
	for name, op := range failing {
		t.Run(name, func(t *testing.T) {
			otherKey := "TICKET#" + name
			_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
				TransactItems: []types.TransactWriteItem{
					{Put: &types.Put{
						TableName:           &table,
						Item:                map[string]types.AttributeValue{"pk": testenv.S(otherKey)},
						ConditionExpression: aws.String("attribute_not_exists(pk)"),
					}},
					op,
				},
			})
			var tce *types.TransactionCanceledException
			if !errors.As(err, &tce) {
				t.Fatalf("TransactWriteItems error = %v (%T), want TransactionCanceledException", err, err)
			}
			if len(tce.CancellationReasons) != 2 {
				t.Fatalf("CancellationReasons = %d, want 2: %+v", len(tce.CancellationReasons), tce.CancellationReasons)
			}
			if r := tce.CancellationReasons[0]; aws.ToString(r.Code) != "None" || r.Item != nil {
				t.Errorf("reason[0] = code %q item %v, want None and no item", aws.ToString(r.Code), r.Item)
			}
			r := tce.CancellationReasons[1]
			if aws.ToString(r.Code) != "ConditionalCheckFailed" {
				t.Errorf("reason[1].Code = %q, want ConditionalCheckFailed (message %q)", aws.ToString(r.Code), aws.ToString(r.Message))
			}
			if got := attrS(r.Item["state"]); got != "done" {
				t.Errorf("reason[1].Item[state] = %q, want the old item's %q; item %v", got, "done", r.Item)
			}
			if n, ok := r.Item["n"].(*types.AttributeValueMemberN); !ok || n.Value != "7" {
				t.Errorf("reason[1].Item[n] = %#v, want N 7", r.Item["n"])
			}
			if attrS(r.Item["pk"]) != "OP#k1" {
				t.Errorf("reason[1].Item[pk] = %v, want OP#k1", r.Item["pk"])
			}
			// Nothing of the transaction was written.
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table,
				Key: map[string]types.AttributeValue{"pk": testenv.S(otherKey)}, ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatalf("GetItem: %v", err)
			}
			if out.Item != nil {
				t.Errorf("the other Put of the canceled transaction was written: %v", out.Item)
			}
		})
	}

	// Without ReturnValuesOnConditionCheckFailure no item comes back.
	t.Run("NoReturnValues", func(t *testing.T) {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{{Put: &types.Put{
				TableName:           &table,
				Item:                map[string]types.AttributeValue{"pk": testenv.S("OP#k1")},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}}},
		})
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) || len(tce.CancellationReasons) != 1 {
			t.Fatalf("error = %v, want TransactionCanceledException with 1 reason", err)
		}
		if r := tce.CancellationReasons[0]; aws.ToString(r.Code) != "ConditionalCheckFailed" || r.Item != nil {
			t.Errorf("reason = code %q item %v, want ConditionalCheckFailed and no item", aws.ToString(r.Code), r.Item)
		}
	})
}

func attrS(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// Tables from CreateTable are distinct and usable at once, also in parallel.
func TestCreateTableUnique(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			name := testenv.CreateTable(t, endpoint)
			mu.Lock()
			defer mu.Unlock()
			if seen[name] {
				t.Errorf("table name %q returned twice", name)
			}
			seen[name] = true
			if _, err := testenv.DynamoClient(t, endpoint).PutItem(context.Background(), &dynamodb.PutItemInput{
				TableName: &name, Item: map[string]types.AttributeValue{"pk": testenv.S("x")},
			}); err != nil {
				t.Errorf("PutItem on new table: %v", err)
			}
		})
	}
}

// A table from CreateTable has the product's key schema and TTL, as
// dynamo.CreateTable defines them.
func TestCreateTableSchema(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	name := testenv.CreateTable(t, endpoint)
	client := testenv.DynamoClient(t, endpoint)
	ctx := context.Background()
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
	if err != nil {
		t.Fatal(err)
	}
	ks := out.Table.KeySchema
	if len(ks) != 1 || *ks[0].AttributeName != dynamo.PartitionKey || ks[0].KeyType != types.KeyTypeHash {
		t.Errorf("KeySchema = %+v, want only %s HASH", ks, dynamo.PartitionKey)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil {
		t.Fatal(err)
	}
	d := ttl.TimeToLiveDescription
	if d == nil || d.AttributeName == nil || *d.AttributeName != dynamo.TTLAttribute || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Errorf("TTL = %+v, want %s ENABLED", d, dynamo.TTLAttribute)
	}
}

func TestFreePortAndRepoRoot(t *testing.T) {
	if p := testenv.FreePort(t); p <= 0 || p > 65535 {
		t.Errorf("FreePort = %d", p)
	}
	root := testenv.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("RepoRoot %q has no go.mod: %v", root, err)
	}
}

var reportRE = regexp.MustCompile(`(?m)^REPORT RequestId: \S+\tInit Duration: [0-9.]+ ms\tDuration: [0-9.]+ ms\t`)

// aws-lambda-rie runs a custom runtime on the ports it is given and prints a
// REPORT line with Init Duration for the first invoke (the flags testenv
// documents).
func TestRIE(t *testing.T) {
	testenv.RIE(t) // skip (or fail under CI) before building when the emulator is missing
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-o", bootstrap, "./testdata/echoruntime")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build echoruntime: %v\n%s", err, out)
	}

	url, stdout, _ := testenv.StartRIE(t, bootstrap, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rie output:\n%s", stdout.String())
		}
	})

	invoke := func(body string) string {
		t.Helper()
		var lastErr error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			resp, err := http.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				lastErr = err // not listening yet
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("invoke: status %d: %s", resp.StatusCode, b)
			}
			return string(b)
		}
		t.Fatalf("invoke: %v", lastErr)
		return ""
	}
	for i, body := range []string{`{"a":1}`, `{"a":2}`} {
		if got, want := invoke(body), `{"echo":`+body+`}`; got != want {
			t.Errorf("invoke %d = %s, want %s", i, got, want)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(stdout.String(), "REPORT RequestId:") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := stdout.String()
	if n := len(reportRE.FindAllString(out, -1)); n != 1 {
		t.Errorf("REPORT lines with Init Duration = %d, want 1 (first invoke only); stdout:\n%s", n, out)
	}
	if n := strings.Count(out, "REPORT RequestId:"); n != 2 {
		t.Errorf("REPORT lines = %d, want 2; stdout:\n%s", n, out)
	}
	if !strings.Contains(out, "echoruntime: handling") {
		t.Errorf("function stdout not in rie stdout:\n%s", out)
	}
}
