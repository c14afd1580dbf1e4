package dynamostore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
)

// retention is the retention of these tests' records.
const retention = 24 * time.Hour

// call is a call of create_order: owners alice and carol are in
// tenant-a, bob in tenant-b.
func call(owner, requestID, args string) idem.Call {
	tenant := "tenant-a"
	if owner == "bob" {
		tenant = "tenant-b"
	}
	return idem.Call{Tenant: tenant, Owner: owner, RequestID: requestID, Function: "create_order", Arguments: []byte(args)}
}

// wantStatus fails the test unless o has status s.
func wantStatus(t testing.TB, o idem.Outcome, s idem.Status) {
	t.Helper()
	if o.Status != s {
		t.Fatalf("status = %v (err %v), want %v", o.Status, o.Err, s)
	}
}

// cancelling is a client that ends a claim's context when the claim's
// transaction carries an effect item registered by items: it calls the
// context's CancelFunc and answers as the SDK does when the caller's
// context ends before the request is sent. No code of the caller's runs
// inside a DynamoDB transaction, so the client is where the conformance
// suite's Fixture.Cancel ends the context.
type cancelling struct {
	dynamostore.Client
	mu      sync.Mutex
	cancels map[string]context.CancelFunc // by the effect item's pk
}

// items returns the effect item of id and registers cancel for it.
func (c *cancelling) items(id string, cancel context.CancelFunc) []types.TransactWriteItem {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancels == nil {
		c.cancels = map[string]context.CancelFunc{}
	}
	c.cancels["EFFECT#"+id] = cancel
	return []types.TransactWriteItem{effectItem(id)}
}

func (c *cancelling) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	var cancel context.CancelFunc
	for _, it := range in.TransactItems {
		if it.Put == nil {
			continue
		}
		if pk, ok := it.Put.Item["pk"].(*types.AttributeValueMemberS); ok && c.cancels[pk.Value] != nil {
			cancel = c.cancels[pk.Value]
		}
	}
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		return nil, fmt.Errorf("operation error DynamoDB: TransactWriteItems, canceled: %w", context.Canceled)
	}
	return c.Client.TransactWriteItems(ctx, in, opts...)
}
