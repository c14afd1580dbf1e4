package dynamo

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// fakeClient answers TransactWriteItems from a script of errors; it is for
// injecting faults only. What the store does on success is proven on
// DynamoDB Local (store_test.go). The claim's read-ahead GetItem finds
// nothing, as for a new key, so the transaction's answer is the one the
// store gives; calls counts the transactions only, gets the reads.
type fakeClient struct {
	Client
	errs  []error
	calls atomic.Int32
	gets  atomic.Int32
	block bool // wait for the context instead of answering
	// after, when set, runs after each answer: a test cancels its context
	// there, at a known point instead of after a sleep.
	after func()
}

func (f *fakeClient) TransactWriteItems(ctx context.Context, _ *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	i := int(f.calls.Add(1)) - 1
	if f.after != nil {
		defer f.after()
	}
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if i < len(f.errs) && f.errs[i] != nil {
		return nil, f.errs[i]
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func (f *fakeClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.gets.Add(1)
	return &dynamodb.GetItemOutput{}, nil
}

func cancelled(codes ...string) error {
	reasons := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		reasons[i] = types.CancellationReason{Code: aws.String(c)}
	}
	return &types.TransactionCanceledException{Message: aws.String("cancelled"), CancellationReasons: reasons}
}

func testOp() (idem.Record, core.Ticket, time.Time) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return idem.Record{Key: "k", State: idem.StateCompleted, Tenant: "t", Owner: "u", Function: "create_ticket",
			Fingerprint: "f", Result: []byte(`{}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		core.Ticket{ID: "id", TenantID: "t", UserID: "u", OperationKey: "k", Arguments: "{}", CreatedAt: now}, now
}

func TestCreateFaults(t *testing.T) {
	fast := Options{CallTimeout: 50 * time.Millisecond, ConflictRetries: 3, ConflictBackoff: time.Millisecond, ConflictBackoffMax: 2 * time.Millisecond}
	tests := []struct {
		name      string
		client    *fakeClient
		wantBusy  bool
		wantErr   bool
		wantCalls int32
	}{
		{"conflict retried then written", &fakeClient{errs: []error{cancelled("TransactionConflict", "None"), cancelled("None", "TransactionConflict")}}, false, false, 3},
		{"conflicts beyond the retries answer busy", &fakeClient{errs: []error{cancelled("TransactionConflict"), cancelled("TransactionConflict"), cancelled("TransactionConflict"), cancelled("TransactionConflict")}}, true, true, 4},
		{"TransactionConflictException retried", &fakeClient{errs: []error{&types.TransactionConflictException{Message: aws.String("x")}}}, false, false, 2},
		{"throttled reason is busy, not retried here", &fakeClient{errs: []error{cancelled("ThrottlingError", "None")}}, true, true, 1},
		{"provisioned throughput exceeded is busy", &fakeClient{errs: []error{&types.ProvisionedThroughputExceededException{Message: aws.String("x")}}}, true, true, 1},
		{"request limit exceeded is busy", &fakeClient{errs: []error{&types.RequestLimitExceeded{Message: aws.String("x")}}}, true, true, 1},
		{"throttling exception is busy", &fakeClient{errs: []error{&types.ThrottlingException{Message: aws.String("x")}}}, true, true, 1},
		{"SDK retries exhausted is busy", &fakeClient{errs: []error{&retry.MaxAttemptsError{Attempt: 3, Err: errors.New("connection reset")}}}, true, true, 1},
		{"a call past its deadline is busy", &fakeClient{block: true}, true, true, 1},
		{"ticket id taken: the write is refused, not busy", &fakeClient{errs: []error{cancelled("None", "ConditionalCheckFailed")}}, false, true, 1},
		{"validation error is internal", &fakeClient{errs: []error{cancelled("ValidationError", "None")}}, false, true, 1},
		{"unknown error is internal", &fakeClient{errs: []error{errors.New("boom")}}, false, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.client, "table", fast)
			op, tk, now := testOp()
			existing, err := s.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{tk}}, now)
			if existing != nil {
				t.Fatalf("existing = %+v, want nil", existing)
			}
			if (err != nil) != tt.wantErr || errors.Is(err, core.ErrBusy) != tt.wantBusy {
				t.Fatalf("err = %v, want error %v busy %v", err, tt.wantErr, tt.wantBusy)
			}
			if got := tt.client.calls.Load(); got != tt.wantCalls {
				t.Fatalf("calls = %d, want %d", got, tt.wantCalls)
			}
			s.Wait()
			if got := tt.client.gets.Load(); got != 1 {
				t.Fatalf("reads = %d, want 1: the read-ahead, once, whatever the transaction's retries", got)
			}
		})
	}
}

// A caller context cancelled during the conflict backoff answers busy at
// once, without more attempts. The context is cancelled as the first
// attempt answers, so the backoff that follows always sees it.
func TestCreateCancelledContextIsBusy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &fakeClient{errs: []error{cancelled("TransactionConflict"), cancelled("TransactionConflict")}, after: cancel}
	s := New(c, "table", Options{ConflictRetries: 5, ConflictBackoff: time.Second, ConflictBackoffMax: time.Second})
	op, tk, now := testOp()
	_, err := s.Claims().Claim(ctx, op, core.Writes{Tickets: []core.Ticket{tk}}, now)
	if !errors.Is(err, core.ErrBusy) {
		t.Fatalf("err = %v, want busy", err)
	}
	if c.calls.Load() != 1 {
		t.Fatalf("calls = %d, want 1", c.calls.Load())
	}
}

// The claim's failed condition carries the stored operation: it is parsed
// back into the record the service replays, with no second read.
func TestClaimFailedReturnsStoredOperation(t *testing.T) {
	op, tk, now := testOp()
	op.State = idem.StatePending
	op.Result = nil
	e := &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
		{Code: aws.String("ConditionalCheckFailed"), Item: operationItem(op)}, {Code: aws.String("None")}}}
	s := New(&fakeClient{errs: []error{e}}, "table", Options{})
	got, err := s.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{tk}}, now)
	if err != nil || got == nil {
		t.Fatalf("Create = %v, %v", got, err)
	}
	if got.Key != op.Key || got.State != idem.StatePending || got.Owner != op.Owner || !got.ExpiresAt.Equal(op.ExpiresAt) || got.Result != nil {
		t.Fatalf("parsed %+v, want %+v", *got, op)
	}
}

func TestParseUserRefusesIncompleteItems(t *testing.T) {
	if _, err := parseUser(map[string]types.AttributeValue{attrPK: stringAttr("USER#x"), "tenant_id": stringAttr("t")}); err == nil {
		t.Fatal("user without user_id accepted")
	}
	u, err := parseUser(userItem(core.User{ExternalID: "x", TenantID: "t", UserID: "u", Disabled: true}))
	if err != nil || u.ExternalID != "x" || !u.Disabled {
		t.Fatalf("round trip: %+v, %v", u, err)
	}
}
