package memtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/storetest"
)

// adapter is the in-memory store as the suite's Adapter.
type adapter struct{ *memtest.Store }

func (a adapter) PutOperation(_ context.Context, op idem.Record) error {
	a.Put(op)
	return nil
}

func (a adapter) CountTickets(context.Context) (int, error) {
	_, tickets := a.Count()
	return tickets, nil
}

// A change of key_policy between a call and its repeat makes no second
// ticket on the in-memory store either (the SQLite and DynamoDB stores
// run these cases in their whole conformance suite).
func TestPolicySwitch(t *testing.T) {
	storetest.RunPolicySwitch(t, storetest.Harness{
		Open: func(*testing.T, func() time.Time) (storetest.Adapter, func(*testing.T) storetest.Adapter) {
			return adapter{memtest.New()}, nil
		},
	})
}

// The faults every store meets answer the same on the in-memory store as
// on SQLite and DynamoDB (their conformance suites run the same table).
func TestFaults(t *testing.T) {
	storetest.RunFaults(t, storetest.Harness{
		Open: func(*testing.T, func() time.Time) (storetest.Adapter, func(*testing.T) storetest.Adapter) {
			return adapter{memtest.New()}, nil
		},
	})
}
