//go:build linux

package iam_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/iam"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/streamtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The fixed account the template's intrinsics and the recorded requests
// resolve to.
var acct = iam.Account{Partition: "aws", Region: testenv.Region, ID: "123456789012"}

const (
	hookKeyParam  = "/aivax/callback/hook-key" // the template's defaults
	deliveryParam = "/aivax/callback/delivery"
	hookKey       = "roles-test-hook-key"
	zdEmail       = "agent@acme.com"
	zdToken       = "ROLES-TEST-TOKEN"
)

// TestRolesAllowWhatTheFunctionsSend runs the built callback and delivery
// bootstraps under the Lambda emulator against DynamoDB Local, each
// through its own recording proxy (and its own recording fake SSM), along
// the product's paths: the callback reads its hook key from SSM, creates
// a ticket (the claim's transaction and its read-ahead), repeats it
// (answered by the read-ahead), reads users, reads a ticket (get_ticket)
// and misses one; the stream is read as Lambda's event source mapping
// reads it, with the delivery function's role (ListStreams,
// DescribeStream, GetShardIterator, GetRecords), and the delivery
// function reads its secret from SSM, delivers the stream's tickets
// (claim, settle) and sweeps one the stream did not carry. The follow-ups
// too: the callback adds a comment to the ticket and closes it, and the
// delivery function takes their stream records before the ticket's (they
// wait, reading their items and the ticket), then the ticket's, and moves
// on from the ticket to each follow-up (the ticket's list read, each
// woken, claimed and recorded). Every request
// recorded is then authorized against its function's role as
// template.yaml writes it (package iam: the statements with their
// intrinsics resolved for a fixed partition, region and account, and
// DeliveryKind zendesk so that the delivery resources exist), one
// transaction item at a time. Each denied request fails the test.
//
// The operator's command (cmd/deliveries) is not covered: the docs
// documents no permissions for it, and it runs with the operator's own
// credentials.
//
// It fails on a template whose callback role allows dynamodb:GetItem only
// on USER# and TICKET# items, as the read-ahead's GetItem of the
// operation item is then denied:
//
//	CallbackFunctionRole: dynamodb:GetItem on arn:aws:dynamodb:us-east-1:123456789012:table/<table>
//	with dynamodb:LeadingKeys=OP#*: denied by default (no statement allows it)
func TestRolesAllowWhatTheFunctionsSend(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both bootstraps and starts DynamoDB Local and the RIE")
	}
	endpoint := testenv.DynamoDB(t)
	client := testenv.DynamoClient(t, endpoint)
	table := testenv.CreateTable(t, endpoint)
	desc, err := client.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil || desc.Table.LatestStreamArn == nil {
		t.Fatalf("table %s has no stream: %v", table, err)
	}
	store := dynamo.New(client, table, dynamo.Options{CallTimeout: 10 * time.Second})
	if err := store.PutUser(context.Background(), core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	keys := iam.Keys{Tables: map[string]string{"": dynamo.PartitionKey},
		Indexes: map[string]string{dynamo.DeliveryDueIndex: "delivery_shard"}}
	cbDDB, dlDDB := iam.NewRecorder(t, endpoint, acct, keys), iam.NewRecorder(t, endpoint, acct, keys)
	cbSSM := iam.NewSSM(t, acct, map[string]string{hookKeyParam: hookKey})
	secret, _ := json.Marshal(map[string]string{"email": zdEmail, "token": zdToken})
	dlSSM := iam.NewSSM(t, acct, map[string]string{deliveryParam: string(secret)})
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{Email: zdEmail, Token: zdToken})

	dir := t.TempDir()
	cbBin, dlBin := filepath.Join(dir, "callback"), filepath.Join(dir, "delivery")
	testenv.BuildFunction(t, "./functions/callback", "lambda.norpc,nosqlite", runtime.GOARCH, cbBin)
	testenv.BuildFunction(t, "./functions/delivery", "lambda.norpc,nosqlite", runtime.GOARCH, dlBin)
	cbURL, _, _ := testenv.StartRIE(t, cbBin, map[string]string{
		"TABLE_NAME": table, "HOOK_KEY_PARAMETER": hookKeyParam, "DELIVERY_KIND": "zendesk",
		"AWS_ENDPOINT_URL_DYNAMODB": cbDDB.URL(), "AWS_ENDPOINT_URL_SSM": cbSSM.URL(),
	})
	dlURL, _, _ := testenv.StartRIE(t, dlBin, map[string]string{
		"TABLE_NAME": table, "DELIVERY_KIND": "zendesk", "DELIVERY_URL": fake.URL(),
		"DELIVERY_SECRET_PARAMETER": deliveryParam, "DELIVERY_TIMEOUT": "3s", "AWS_LAMBDA_FUNCTION_TIMEOUT": "90",
		"AWS_ENDPOINT_URL_DYNAMODB": dlDDB.URL(), "AWS_ENDPOINT_URL_SSM": dlSSM.URL(),
	})

	// The callback: a new call, its repeat, a ticket read, a miss, an
	// unknown user.
	reqID := fmt.Sprintf("roles-%d", time.Now().UnixNano())
	create := `{"type":"tool_call","function":{"name":"create_ticket","content":{"title":"Role check"}},` +
		`"context":{"externalUserId":"user-a","metadata":{"request_id":"` + reqID + `"}}}`
	first := callback(t, cbURL, create)
	if first.Status != "created" || first.Deduplicated || first.TicketID == "" {
		t.Fatalf("create_ticket: %+v", first)
	}
	if again := callback(t, cbURL, create); again.TicketID != first.TicketID || !again.Deduplicated {
		t.Fatalf("repeat: %+v, want ticket %s deduplicated", again, first.TicketID)
	}
	get := func(id string) string {
		return `{"type":"tool_call","function":{"name":"get_ticket","content":{"ticket_id":"` + id + `"}},` +
			`"context":{"externalUserId":"user-a","metadata":null}}`
	}
	if got := callback(t, cbURL, get(first.TicketID)); got.Status != "found" {
		t.Fatalf("get_ticket: %+v", got)
	}
	if got := callback(t, cbURL, get("00000000-0000-4000-8000-000000000000")); got.Status != "rejected" {
		t.Fatalf("get_ticket of a missing ticket: %+v", got)
	}
	callback(t, cbURL, strings.Replace(create, "user-a", "user-nobody", 1))
	// The follow-ups: a comment on the ticket (its item, its delivery
	// record and the ticket's follow-up list in one transaction), then its
	// close.
	followUp := func(fn, args string) answer {
		return callback(t, cbURL, `{"type":"tool_call","function":{"name":"`+fn+`","content":`+args+`},`+
			`"context":{"externalUserId":"user-a","metadata":{"request_id":"`+reqID+`-`+fn+`"}}}`)
	}
	comment := followUp("add_comment", `{"ticket_id":"`+first.TicketID+`","body":"It fails on my phone too."}`)
	if comment.Status != "created" || comment.CommentID == "" {
		t.Fatalf("add_comment: %+v", comment)
	}
	if closed := followUp("close_ticket", `{"ticket_id":"`+first.TicketID+`","resolution":"Works now."}`); closed.Status != "closed" {
		t.Fatalf("close_ticket: %+v", closed)
	}
	// get_ticket of a ticket with follow-ups reads them with its ticket.
	if got := callback(t, cbURL, get(first.TicketID)); got.Status != "found" {
		t.Fatalf("get_ticket after its follow-ups: %+v", got)
	}
	tk, err := store.Ticket(context.Background(), first.TicketID)
	if err != nil {
		t.Fatal(err)
	}
	followUps := tk.Attrs.List(core.AttrFollowUps)
	if len(followUps) != 2 || followUps[0] != "COMMENT#"+comment.CommentID {
		t.Fatalf("the ticket's follow-ups %v, want the comment and the close", followUps)
	}

	// The stream, read with the delivery role as the event source mapping
	// reads it, then delivered: the follow-ups' records first (they wait
	// for the ticket: their items and the ticket's read), then the
	// ticket's, whose delivery moves on to each follow-up in turn (its
	// list read, each woken, claimed, sent and recorded).
	ev, _ := streamtest.Event(t, dlDDB.URL(), streamtest.ARN(t, dlDDB.URL(), table), append([]string{first.TicketID}, followUps...))
	tickets, rest := splitByTicket(t, ev)
	for _, batch := range [][]byte{rest, tickets} {
		if f := invoke(t, dlURL, batch); !strings.Contains(f, `"batchItemFailures":[]`) {
			t.Errorf("stream batch: %s, want no failures", f)
		}
	}
	if fake.Held(first.TicketID) != 1 {
		t.Errorf("the helpdesk holds %d of %s, want 1", fake.Held(first.TicketID), first.TicketID)
	}
	if got, want := fake.Order(first.TicketID), []string{"create", "comment:" + comment.CommentID, "close:" + strings.TrimPrefix(followUps[1], "CLOSE#")}; !slices.Equal(got, want) {
		t.Errorf("the helpdesk holds %v of %s, want %v", got, first.TicketID, want)
	}
	// A ticket the stream did not carry: the scheduled sweep delivers it.
	left := callback(t, cbURL, strings.Replace(create, reqID, reqID+"-left", 1))
	schedule, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "events", "delivery-schedule.json"))
	if err != nil {
		t.Fatal(err)
	}
	invoke(t, dlURL, schedule)
	if fake.Held(left.TicketID) != 1 {
		t.Errorf("the helpdesk holds %d of %s after the sweep, want 1", fake.Held(left.TicketID), left.TicketID)
	}
	store.Wait()

	tmpl := testenv.Template(t)
	streamARN, err := dlDDB.Stream(*desc.Table.LatestStreamArn)
	if err != nil {
		t.Fatal(err)
	}
	stack := iam.Stack{
		Partition: acct.Partition, Region: acct.Region, Account: acct.ID, StackName: "roles-test",
		Parameters: map[string]string{"DeliveryKind": "zendesk"},
		Attributes: map[string]string{
			"TicketsTable.Arn":            "arn:aws:dynamodb:" + acct.Region + ":" + acct.ID + ":table/" + table,
			"TicketsTable.StreamArn":      streamARN,
			"CallbackLogGroup.Arn":        "arn:aws:logs:" + acct.Region + ":" + acct.ID + ":log-group:/aws/lambda/roles-test-callback:*",
			"DeliveryLogGroup.Arn":        "arn:aws:logs:" + acct.Region + ":" + acct.ID + ":log-group:/aws/lambda/roles-test-delivery:*",
			"DeliveryDeadLetterQueue.Arn": "arn:aws:sqs:" + acct.Region + ":" + acct.ID + ":roles-test-dlq",
		},
	}
	for _, fn := range []struct {
		role     string
		requests []iam.Request
		errs     []string
		// must is what the runs above must have sent (each a substring of
		// a request kind), so that the check cannot pass on a path not
		// taken.
		must []string
	}{
		{"CallbackFunctionRole", append(cbSSM.Requests(), cbDDB.Requests()...), cbDDB.Errors(), []string{
			"ssm:GetParameter on arn:aws:ssm:us-east-1:123456789012:parameter" + hookKeyParam,
			"kms:Decrypt on arn:aws:kms:",
			"dynamodb:GetItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=USER#*",
			"dynamodb:GetItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=OP#*",
			"dynamodb:GetItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=TICKET#*",
			"dynamodb:PutItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=OP#*",
			"dynamodb:PutItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=TICKET#*",
			"dynamodb:ConditionCheckItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=OP#*",
			"dynamodb:PutItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=COMMENT#*",
			"dynamodb:PutItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=CLOSE#*",
			"dynamodb:UpdateItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=TICKET#*",
			"dynamodb:BatchGetItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=COMMENT#*",
		}},
		{"DeliveryFunctionRole", append(dlSSM.Requests(), dlDDB.Requests()...), dlDDB.Errors(), []string{
			"ssm:GetParameter on arn:aws:ssm:us-east-1:123456789012:parameter" + deliveryParam,
			"kms:Decrypt on arn:aws:kms:",
			"dynamodb:ListStreams on " + stack.Attributes["TicketsTable.Arn"] + "/stream/*",
			"dynamodb:DescribeStream on " + streamARN,
			"dynamodb:GetShardIterator on " + streamARN,
			"dynamodb:GetRecords on " + streamARN,
			"dynamodb:UpdateItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=TICKET#*",
			"dynamodb:Query on " + stack.Attributes["TicketsTable.Arn"] + "/index/" + dynamo.DeliveryDueIndex,
			// The follow-ups: each claimed, woken and recorded (UpdateItem),
			// read with its ticket for their order (GetItem).
			"dynamodb:GetItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=TICKET#*",
			"dynamodb:GetItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=COMMENT#*",
			"dynamodb:GetItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=CLOSE#*",
			"dynamodb:UpdateItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=COMMENT#*",
			"dynamodb:UpdateItem on " + stack.Attributes["TicketsTable.Arn"] + " with dynamodb:LeadingKeys=CLOSE#*",
		}},
	} {
		stmts, err := iam.RoleStatements(tmpl, fn.role, stack)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range fn.errs {
			t.Errorf("%s: a request the recorder could not read: %s", fn.role, e)
		}
		kinds := map[string]bool{}
		for _, q := range fn.requests {
			k := iam.Kind(q)
			if kinds[k] {
				continue
			}
			kinds[k] = true
			d, by, err := iam.Evaluate(stmts, q)
			switch {
			case err != nil:
				t.Errorf("%s: %s: %v", fn.role, k, err)
			case d != iam.Allowed:
				t.Errorf("%s: %s: %s", fn.role, k, d)
			default:
				t.Logf("%s: %s: allowed by %s", fn.role, k, by)
			}
		}
		list := slices.Sorted(func(yield func(string) bool) {
			for k := range kinds {
				if !yield(k) {
					return
				}
			}
		})
		for _, m := range fn.must {
			if !slices.ContainsFunc(list, func(k string) bool { return strings.Contains(k, m) }) {
				t.Errorf("%s: no request %q was recorded; the kinds recorded:\n%s", fn.role, m, strings.Join(list, "\n"))
			}
		}
	}
}

// answer is the part of a callback's answer the test reads.
type answer struct {
	Status       string `json:"status"`
	TicketID     string `json:"ticket_id"`
	CommentID    string `json:"comment_id"`
	Deduplicated bool   `json:"deduplicated"`
}

// splitByTicket splits a stream event in two: the records of TICKET#
// items, and the others.
func splitByTicket(t *testing.T, ev []byte) (tickets, rest []byte) {
	t.Helper()
	var all, tk, other events.DynamoDBEvent
	if err := json.Unmarshal(ev, &all); err != nil {
		t.Fatal(err)
	}
	for _, r := range all.Records {
		if strings.HasPrefix(r.Change.Keys[dynamo.PartitionKey].String(), "TICKET#") {
			tk.Records = append(tk.Records, r)
		} else {
			other.Records = append(other.Records, r)
		}
	}
	a, err := json.Marshal(tk)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// callback sends body to the callback function as AIVAX does and
// returns its answer.
func callback(t *testing.T, url, body string) answer {
	t.Helper()
	var a answer
	_ = json.Unmarshal([]byte(streamtest.Callback(t, url, hookKey, body).Body), &a)
	return a
}

func invoke(t *testing.T, url string, ev []byte) string {
	t.Helper()
	return string(testenv.Invoke(t, url, ev))
}
