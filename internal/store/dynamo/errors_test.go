package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// failingDynamoDB is an HTTP server that answers every DynamoDB call with
// a 500 InternalServerError, as the service does in an outage; it counts
// the TransactWriteItems requests (a claim's read-ahead GetItem fails
// beside each one, and is not counted).
func failingDynamoDB(t *testing.T) (*dynamodb.Client, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") {
			n.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}`))
	}))
	t.Cleanup(srv.Close)
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
		// A retry quota that is already spent, as after a burst of failures:
		// the first retry finds no token.
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 5
			o.RateLimiter = ratelimit.NewTokenRateLimit(0)
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		}),
	})
	return client, &n
}

// When the SDK's retry quota runs out on a retryable 5xx it returns a
// joined error that is not a MaxAttemptsError. The outcome is unknown:
// busy, with the SDK's error kept in the chain.
func TestRetryQuotaExhaustedOnServerErrorIsBusy(t *testing.T) {
	client, n := failingDynamoDB(t)
	s := New(client, "table", Options{CallTimeout: 5 * time.Second})
	op, tk, now := testOp()
	_, err := s.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{tk}}, now)
	var attempts *retry.MaxAttemptsError
	var quota ratelimit.QuotaExceededError
	var api smithy.APIError
	switch {
	case !errors.Is(err, core.ErrBusy):
		t.Fatalf("Create: %v, want busy", err)
	case errors.As(err, &attempts):
		t.Fatalf("the SDK returned a MaxAttemptsError (%v); this test is about the quota", err)
	case !errors.As(err, &quota) || !errors.As(err, &api) || api.ErrorCode() != "InternalServerError":
		t.Fatalf("busy without the SDK's errors in the chain: %v", err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("requests = %d, want 1 (no retry token)", got)
	}
	_, err = s.Ticket(context.Background(), "id")
	if !errors.Is(err, core.ErrBusy) {
		t.Errorf("Ticket: %v, want busy", err)
	}
	if _, err := s.User(context.Background(), "user-a"); !errors.Is(err, core.ErrBusy) {
		t.Errorf("User: %v, want busy", err)
	}
}

// Every busy keeps the error it was made from.
func TestBusyKeepsTheCause(t *testing.T) {
	cause := &retry.MaxAttemptsError{Attempt: 3, Err: errors.New("connection reset")}
	err := dynamostore.MapError(cause)
	var got *retry.MaxAttemptsError
	if !errors.Is(err, core.ErrBusy) || !errors.As(err, &got) || got != cause {
		t.Fatalf("MapError = %v: want busy wrapping the SDK's error", err)
	}
	s := New(&fakeClient{errs: []error{cancelled("None", "ConditionalCheckFailed")}}, "table", Options{})
	op, tk, now := testOp()
	var refused *idem.RefusedError
	if _, err := s.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{tk}}, now); errors.Is(err, core.ErrBusy) || !errors.As(err, &refused) || refused.Index != 0 {
		t.Fatalf("ticket condition failed: %v, want the ticket's write refused (idem.RefusedError, index 0), not busy", err)
	}
}

// readRecorder records the GetItem requests.
type readRecorder struct {
	Client
	inputs []*dynamodb.GetItemInput
}

func (r *readRecorder) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.inputs = append(r.inputs, in)
	return &dynamodb.GetItemOutput{}, nil
}

// Tickets and users are read with strongly consistent reads: a get_ticket
// right after create_ticket must find the ticket, and a user just added
// must not be refused.
func TestReadsAreConsistent(t *testing.T) {
	r := &readRecorder{}
	s := New(r, "table", Options{})
	_, _ = s.Ticket(context.Background(), "id")
	_, _ = s.User(context.Background(), "user-a")
	if len(r.inputs) != 2 {
		t.Fatalf("GetItem calls = %d, want 2", len(r.inputs))
	}
	for _, in := range r.inputs {
		if in.ConsistentRead == nil || !*in.ConsistentRead {
			t.Errorf("GetItem %v without ConsistentRead", in.Key[attrPK])
		}
	}
}

// TestReadAheadClass: the error classes of a failed read-ahead.
func TestReadAheadClass(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&smithy.GenericAPIError{Code: "AccessDeniedException"}, "access_denied"},
		{fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "ThrottlingException"}), "throttled"},
		{&smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}, "throttled"},
		{&smithy.GenericAPIError{Code: "RequestLimitExceeded"}, "throttled"},
		{fmt.Errorf("busy: %w", context.DeadlineExceeded), "timeout"},
		{&smithy.GenericAPIError{Code: "ResourceNotFoundException"}, "other"},
		{errors.New("anything"), "other"},
	} {
		if got := ReadAheadClass(c.err); got != c.want {
			t.Errorf("ReadAheadClass(%v) = %q, want %q", c.err, got, c.want)
		}
		if !slices.Contains(metrics.ReadAheadClasses, c.want) {
			t.Errorf("%q is not one of the metric's classes %v", c.want, metrics.ReadAheadClasses)
		}
	}
}
