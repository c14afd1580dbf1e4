package dynamo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
)

// TestPendingTicketID reads stream images of items as DynamoDB Local
// stores them (a stream's new image is the item in DynamoDB JSON): a
// ticket pending delivery gives its id; the same ticket once delivered,
// its operation item, a ticket without delivery, a removal and a user
// give none; an image that does not decode is an error.
func TestPendingTicketID(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	now := time.Now()
	create := func(key, id string, d *core.DeliveryStatus) {
		t.Helper()
		op := idem.Record{Key: key, State: idem.StateCompleted, Tenant: "tenant-a", Owner: "alice",
			Function: core.CreateTicket, Fingerprint: strings.Repeat("f", 64), Result: []byte(`{}`),
			CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		tk := core.Ticket{ID: id, TenantID: "tenant-a", UserID: "alice", OperationKey: key,
			Arguments: `{"title":"Printer"}`, CreatedAt: now, Delivery: d}
		if existing, err := s.Claims().Claim(ctx, op, core.Writes{Tickets: []core.Ticket{tk}}, now); err != nil || existing != nil {
			t.Fatalf("create %s: %v, %v", id, existing, err)
		}
	}
	image := func(pk string) []byte {
		t.Helper()
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table,
			Key: map[string]types.AttributeValue{dynamo.PartitionKey: &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Fatalf("GetItem %s: %v", pk, err)
		}
		b, err := attributevalue.MarshalMapJSON(out.Item)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pendingKey, plainKey := strings.Repeat("a", 64), strings.Repeat("b", 64)
	create(pendingKey, "t-pending", &core.DeliveryStatus{State: core.DeliveryPending, DueAt: now.Truncate(time.Second)})
	create(plainKey, "t-plain", nil)
	if err := s.PutUser(ctx, core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	pending := image("TICKET#t-pending")

	if id, ok, err := dynamo.PendingTicketID(pending); err != nil || !ok || id != "t-pending" {
		t.Fatalf("pending ticket %s: %q %v %v; want t-pending", pending, id, ok, err)
	}
	// Delivered: the same ticket, no longer pending.
	if _, err := s.Claim(ctx, "t-pending", "w", now.Add(time.Second), now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "t-pending", "w", delivery.Update{State: delivery.StateDelivered, Attempts: 1,
		ExternalID: "1", DeliveredAt: now}); err != nil {
		t.Fatal(err)
	}
	for name, img := range map[string][]byte{
		"delivered ticket":         image("TICKET#t-pending"),
		"ticket without delivery":  image("TICKET#t-plain"),
		"operation item":           image("OP#" + pendingKey),
		"user item":                image("USER#user-a"),
		"user item marked pending": []byte(`{"pk":{"S":"USER#x"},"delivery_state":{"S":"pending"}}`),
		"ticket without an id":     []byte(`{"pk":{"S":"TICKET#"},"delivery_state":{"S":"pending"}}`),
		"removal":                  nil,
		"null image":               []byte("null"),
	} {
		if id, ok, err := dynamo.PendingTicketID(img); err != nil || ok || id != "" {
			t.Errorf("%s %s: %q %v %v; want not pending, no error", name, img, id, ok, err)
		}
	}
	for name, img := range map[string][]byte{
		"not JSON":            []byte(`{"pk":`),
		"not DynamoDB":        []byte(`{"pk":"TICKET#t-1"}`),
		"pk of wrong type":    []byte(`{"pk":{"BOOL":true},"delivery_state":{"S":"pending"}}`),
		"state of wrong type": []byte(`{"pk":{"S":"TICKET#t-1"},"delivery_state":{"L":[]}}`),
	} {
		if id, ok, err := dynamo.PendingTicketID(img); err == nil || ok || id != "" {
			t.Errorf("%s %s: %q %v %v; want an error", name, img, id, ok, err)
		}
	}
}
