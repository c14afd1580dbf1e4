package dynamostore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
)

// marking records, per operation, how many requests came with a context
// dynamostore.IsReadAhead marks and how many without.
type marking struct {
	dynamostore.Client
	mu   sync.Mutex
	seen map[string][2]int // operation → [unmarked, marked]
}

func (m *marking) note(ctx context.Context, op string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.seen[op]
	if dynamostore.IsReadAhead(ctx) {
		n[1]++
	} else {
		n[0]++
	}
	m.seen[op] = n
}

func (m *marking) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	m.note(ctx, "TransactWriteItems")
	return m.Client.TransactWriteItems(ctx, in, opts...)
}

func (m *marking) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	m.note(ctx, "GetItem")
	return m.Client.GetItem(ctx, in, opts...)
}

// The store marks the read-ahead it sends, and only it: with ReadAhead
// each claim's GetItem carries the mark (IsReadAhead) and its transaction
// does not; a Get of the caller's, and every request without ReadAhead,
// carries none.
func TestReadAheadIsMarked(t *testing.T) {
	client, name := table(t)
	for _, readAhead := range []bool{false, true} {
		m := &marking{Client: client, seen: map[string][2]int{}}
		store := dynamostore.New(m, name, dynamostore.Options{ReadAhead: readAhead})
		guard := &idem.Guard[[]types.TransactWriteItem]{Store: store, Retention: time.Hour}
		rid := "mark-" + map[bool]string{false: "plain", true: "ahead"}[readAhead]
		for _, want := range []idem.Status{idem.Created, idem.Replayed} {
			wantStatus(t, do(guard, call("alice", rid, `{}`), `{"order_id":"`+rid+`"}`), want)
		}
		store.Wait()
		if _, err := store.Get(context.Background(), "no-such-key"); err != nil {
			t.Fatal(err)
		}
		wantGets := [2]int{1, 0} // the caller's Get only
		if readAhead {
			wantGets = [2]int{1, 2} // and one read-ahead per claim
		}
		if got := m.seen["GetItem"]; got != wantGets {
			t.Errorf("read ahead %v: GetItem [unmarked marked] %v, want %v", readAhead, got, wantGets)
		}
		if got := m.seen["TransactWriteItems"]; got != [2]int{2, 0} {
			t.Errorf("read ahead %v: TransactWriteItems [unmarked marked] %v, want [2 0]", readAhead, got)
		}
	}
	if dynamostore.IsReadAhead(context.Background()) {
		t.Error("a bare context is marked")
	}
}
