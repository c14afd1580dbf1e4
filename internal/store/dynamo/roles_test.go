package dynamo_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/iam"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// TestRolesAllowTheFollowUps makes the follow-ups' requests through
// recording proxies in front of DynamoDB Local, as the callback function
// makes them (a comment's and a close's claims: the items' Puts, the
// ticket's Update; Items' BatchGetItem; Ticket) and as the delivery
// function does (Due, Claim, Record, Delivery of an effect, Neighbours,
// Wake), and authorizes each against its function's role as template.yaml
// writes it (package iam). The functions' own paths are
// internal/testkit/iam's TestRolesAllowWhatTheFunctionsSend; these are
// the store's calls the follow-up tools add.
func TestRolesAllowTheFollowUps(t *testing.T) {
	acct := iam.Account{Partition: "aws", Region: testenv.Region, ID: "123456789012"}
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	keys := iam.Keys{Tables: map[string]string{"": dynamo.PartitionKey},
		Indexes: map[string]string{dynamo.DeliveryDueIndex: dynamo.DeliveryShard}}
	cbRec, dlRec := iam.NewRecorder(t, endpoint, acct, keys), iam.NewRecorder(t, endpoint, acct, keys)
	cb := dynamo.New(testenv.DynamoClient(t, cbRec.URL()), table, dynamo.Options{})
	dl := dynamo.New(testenv.DynamoClient(t, dlRec.URL()), table, dynamo.Options{})
	ctx := context.Background()
	now := time.Now()

	// The callback: a ticket, a comment on it, its close, and get_ticket's
	// reads.
	newTicket(t, cb, "t1", now)
	comment := []core.ItemWrite{
		{Op: core.PutNew, Key: "COMMENT#c1", Set: core.Item{"ticket_id": "t1", "body": "more"},
			Effect: &core.Effect{Kind: "comment", ID: "c1", TicketID: "t1", Payload: []byte(`{"type":"comment.created"}`), DueAt: now}},
		{Op: core.Update, Key: "TICKET#t1", Append: map[string]string{core.AttrFollowUps: "COMMENT#c1"},
			If: []core.Cond{{Op: core.Exists}, {Op: core.Equals, Attr: core.AttrTenantID, Value: "tenant-a"},
				{Op: core.EqualsOrAbsent, Attr: "status", Value: "open"}, {Op: core.SizeBelow, Attr: core.AttrFollowUps, Value: 100}}},
	}
	closing := []core.ItemWrite{
		{Op: core.Update, Key: "TICKET#t1", Set: core.Item{"status": "closed", "close_id": "z1"},
			Append: map[string]string{core.AttrFollowUps: "CLOSE#z1"},
			If:     []core.Cond{{Op: core.Exists}, {Op: core.EqualsOrAbsent, Attr: "status", Value: "open"}}},
		{Op: core.PutNew, Key: "CLOSE#z1", Set: core.Item{"ticket_id": "t1"},
			Effect: &core.Effect{Kind: "close", ID: "z1", TicketID: "t1", Payload: []byte(`{"type":"ticket.closed"}`), DueAt: now.Add(time.Hour)}},
	}
	for _, w := range [][]core.ItemWrite{comment, closing} {
		if err := claimWrites(ctx, t, cb, core.Writes{Items: w}, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cb.Ticket(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if items, err := cb.Items(ctx, []string{"TICKET#t1", "COMMENT#c1", "CLOSE#z1"}); err != nil || len(items) != 3 {
		t.Fatalf("Items: %v, %v", items, err)
	}
	cb.Wait()

	// The delivery function: the comment from the sweep's query to its
	// record, its order, and the close woken.
	if ids, err := dl.Due(ctx, now, 10); err != nil || !slices.Contains(ids, "COMMENT#c1") {
		t.Fatalf("Due = %v, %v", ids, err)
	}
	if _, _, _, err := dl.Neighbours(ctx, "COMMENT#c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := dl.Claim(ctx, "COMMENT#c1", "w", now, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := dl.Record(ctx, "COMMENT#c1", "w", delivery.Update{State: delivery.StateDelivered, Attempts: 1, ExternalID: "1", DeliveredAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := dl.Delivery(ctx, "CLOSE#z1"); err != nil {
		t.Fatal(err)
	}
	if err := dl.Wake(ctx, "CLOSE#z1", now); err != nil {
		t.Fatal(err)
	}
	if r, err := dl.Delivery(ctx, "CLOSE#z1"); err != nil || r.DueAt.After(now) {
		t.Fatalf("the close not woken: %+v, %v", r, err)
	}

	arn := "arn:aws:dynamodb:" + acct.Region + ":" + acct.ID + ":table/" + table
	stack := iam.Stack{
		Partition: acct.Partition, Region: acct.Region, Account: acct.ID, StackName: "roles-test",
		Parameters: map[string]string{"DeliveryKind": "zendesk"},
		Attributes: map[string]string{
			"TicketsTable.Arn":            arn,
			"TicketsTable.StreamArn":      arn + "/stream/2026-01-01T00:00:00.000",
			"CallbackLogGroup.Arn":        "arn:aws:logs:" + acct.Region + ":" + acct.ID + ":log-group:/aws/lambda/roles-test-callback:*",
			"DeliveryLogGroup.Arn":        "arn:aws:logs:" + acct.Region + ":" + acct.ID + ":log-group:/aws/lambda/roles-test-delivery:*",
			"DeliveryDeadLetterQueue.Arn": "arn:aws:sqs:" + acct.Region + ":" + acct.ID + ":roles-test-dlq",
		},
	}
	tmpl := testenv.Template(t)
	for _, fn := range []struct {
		role string
		rec  *iam.Recorder
		// must is what the calls above must have sent (each a substring
		// of a request kind), so that the check cannot pass on a path not
		// taken.
		must []string
	}{
		{"CallbackFunctionRole", cbRec, []string{
			"dynamodb:PutItem on " + arn + " with dynamodb:LeadingKeys=COMMENT#*",
			"dynamodb:PutItem on " + arn + " with dynamodb:LeadingKeys=CLOSE#*",
			"dynamodb:UpdateItem on " + arn + " with dynamodb:LeadingKeys=TICKET#*",
			"dynamodb:BatchGetItem on " + arn + " with dynamodb:LeadingKeys=CLOSE#*,COMMENT#*,TICKET#*",
			"dynamodb:GetItem on " + arn + " with dynamodb:LeadingKeys=TICKET#*",
		}},
		{"DeliveryFunctionRole", dlRec, []string{
			"dynamodb:Query on " + arn + "/index/" + dynamo.DeliveryDueIndex,
			"dynamodb:GetItem on " + arn + " with dynamodb:LeadingKeys=COMMENT#*",
			"dynamodb:GetItem on " + arn + " with dynamodb:LeadingKeys=CLOSE#*",
			"dynamodb:GetItem on " + arn + " with dynamodb:LeadingKeys=TICKET#*",
			"dynamodb:UpdateItem on " + arn + " with dynamodb:LeadingKeys=COMMENT#*",
			"dynamodb:UpdateItem on " + arn + " with dynamodb:LeadingKeys=CLOSE#*",
		}},
	} {
		stmts, err := iam.RoleStatements(tmpl, fn.role, stack)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range fn.rec.Errors() {
			t.Errorf("%s: a request the recorder could not read: %s", fn.role, e)
		}
		kinds := map[string]bool{}
		for _, q := range fn.rec.Requests() {
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
		for _, m := range fn.must {
			if !slices.ContainsFunc(slices.Collect(maps.Keys(kinds)), func(k string) bool { return strings.Contains(k, m) }) {
				t.Errorf("%s: no request %q was recorded", fn.role, m)
			}
		}
	}
}
