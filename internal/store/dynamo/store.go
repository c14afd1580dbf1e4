package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// Client is the part of *dynamodb.Client the adapter uses.
type Client interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	// Items' consistent reads (writes.go).
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	// The delivery store's calls (delivery.go, and writes.go's Wake).
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	// The operator's listing of final delivery states (delivery.go).
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Options tune the adapter; zero values take the defaults.
type Options struct {
	// CallTimeout bounds each DynamoDB call (DefaultCallTimeout), well
	// inside the Lambda timeout; a call that runs out answers busy.
	CallTimeout time.Duration
	// ConflictRetries is how many times a TransactionConflict is retried
	// (default 10).
	ConflictRetries int
	// ConflictBackoff and ConflictBackoffMax shape the full-jitter backoff
	// between those retries (defaults 20 ms and 1 s): the ceilings 20, 40,
	// 80 … 640 ms, then 1 s, add up to about 5 s at worst and 2.6 s on
	// average, inside the 10 s Lambda timeout; the caller's deadline cuts
	// them short in any case and the answer is then busy.
	ConflictBackoff, ConflictBackoffMax time.Duration
	// NoReadAhead sends each claim's transaction alone. By default a
	// strongly consistent GetItem of the operation goes out beside it
	// (dynamostore.Options.ReadAhead), so that a repeat is answered at the
	// latency of one read instead of a whole transaction's: in a region a
	// transaction's p50 is about three times a read's. The read costs one
	// request and one read unit more per claim, new operation or repeat.
	NoReadAhead bool
	// OnReadAheadError is told of every read-ahead that failed
	// (dynamostore.Options.OnReadAheadError; ReadAheadClass classifies
	// its error). The composition roots count and log it
	// (metrics.ReadAheadReporter).
	OnReadAheadError func(ctx context.Context, err error)
}

// DefaultCallTimeout is the deadline of each DynamoDB call when
// Options.CallTimeout is not set: the claim store's.
const DefaultCallTimeout = dynamostore.DefaultCallTimeout

// defaults sets the call timeout, which this store's own reads and
// updates use too; the conflict settings are the claim store's, which
// defaults them (dynamostore.Options).
func (o *Options) defaults() {
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
}

// Compile-time checks: Store is the domain's store and its user directory.
var (
	_ core.Store = (*Store)(nil)
	_ core.Users = (*Store)(nil)
)

// Store is the DynamoDB adapter. It implements core.Store and core.Users.
type Store struct {
	client Client
	table  string
	opt    Options
	// claims makes Create's claim: the one TransactWriteItems of the
	// product.
	claims *dynamostore.Store
}

// New returns a Store on table.
func New(client Client, table string, opt Options) *Store {
	opt.defaults()
	return &Store{client: client, table: table, opt: opt, claims: dynamostore.New(client, table, dynamostore.Options{
		Attributes: &operationAttributes, CallTimeout: opt.CallTimeout, ConflictRetries: opt.ConflictRetries,
		ConflictBackoff: opt.ConflictBackoff, ConflictBackoffMax: opt.ConflictBackoffMax, ReadAhead: !opt.NoReadAhead,
		OnReadAheadError: opt.OnReadAheadError,
	})}
}

// Wait blocks until the requests of every claim have ended, including
// those the claim answered without waiting for (dynamostore.Store.Wait):
// for the callback function, whose handler waits so after each request
// because Lambda freezes the process when it returns
// (docs/lambda-runtime.md); for a process that stops cleanly (the local
// server closes its store so); and for tests and benchmarks that count
// requests per callback.
func (s *Store) Wait() { s.claims.Wait() }

// call runs one DynamoDB call under its own deadline and maps its error.
func (s *Store) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.CallTimeout)
	defer cancel()
	return dynamostore.MapError(f(ctx)) // busy (idem.ErrBusy) for what the SDK deems transient
}

// Ticket implements core.Store: the ticket's typed fields, its delivery,
// and in Attrs every other attribute of its item but the store's own
// (what item writes set on it since; nil for a ticket without any, such
// as one written before item writes existed).
func (s *Store) Ticket(ctx context.Context, id string) (core.Ticket, error) {
	item, err := s.get(ctx, prefixTicket+id)
	if err != nil {
		return core.Ticket{}, err
	}
	t, err := parseTicket(item)
	if err != nil {
		return core.Ticket{}, err
	}
	if t.Attrs, err = ticketAttrs(item); err != nil {
		return core.Ticket{}, err
	}
	return t, nil
}

// User implements core.Users: the USER#<externalUserId> item.
func (s *Store) User(ctx context.Context, externalID string) (core.User, error) {
	item, err := s.get(ctx, prefixUser+externalID)
	if err != nil {
		return core.User{}, err
	}
	return parseUser(item)
}

// get reads one item with a strongly consistent read. GetItem is
// eventually consistent by default: a get_ticket right after the
// create_ticket that wrote the ticket could answer ticket_not_found, and a
// model told so creates the ticket again, the duplicate this product
// exists to prevent. Users are read the same way, so a user just added is
// not refused for a moment. A consistent read costs one read unit instead
// of a half for an item this small; users are cached, tickets read rarely.
func (s *Store) get(ctx context.Context, pk string) (map[string]types.AttributeValue, error) {
	var out *dynamodb.GetItemOutput
	err := s.call(ctx, func(ctx context.Context) (err error) {
		out, err = s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      &s.table,
			Key:            map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: pk}},
			ConsistentRead: aws.Bool(true),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, core.ErrNotFound
	}
	return out.Item, nil
}

// PutUser writes a USER# item: for seeding a table and tests.
func (s *Store) PutUser(ctx context.Context, u core.User) error {
	if u.ExternalID == "" || u.TenantID == "" || u.UserID == "" {
		return errors.New("dynamo: a user needs an external id, a tenant_id and a user_id")
	}
	return s.put(ctx, userItem(u))
}

func (s *Store) put(ctx context.Context, item map[string]types.AttributeValue) error {
	return s.call(ctx, func(ctx context.Context) error {
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item})
		return err
	})
}

// Claims implements core.Store: the claims of package idem's DynamoDB
// store, with the product's writes as its items.
func (s *Store) Claims() idem.Store[core.Writes] { return claims{s} }

// claims is the Store's idem.Store: the one place its claims are made and
// answered.
type claims struct{ s *Store }

// Claim implements idem.Store through package idem's DynamoDB store: ONE
// TransactWriteItems puts the record (completed, with its result) if the
// key is free, checks that the key the call has under the other key
// policy (rec.AltKey) holds no live operation of the call's tenant and
// arguments (one that does answers the call, as a repeat), puts each
// ticket, with its delivery record, if its id is new, and then makes
// each of w.Items (itemActions): a put of a new item (an effect's with
// its delivery record), a conditional update, a condition check. Either
// all items are written or none. The answer is dynamostore's as it is: a
// ticket id that exists, an item that exists for a PutNew, or a
// condition that fails refuses the claim (idem.Refused), its
// RefusedError's index counting the tickets first, then the items
// (core.Writes.Refused). Writes the store cannot make (core.CheckItemWrites,
// an attribute of its own, a ticket created and written at once, more
// than dynamostore.MaxWrites actions) are an error before any request.
//
// A strongly consistent GetItem of the operation goes out beside the
// transaction (unless Options.NoReadAhead), so a repeat is answered by
// the read, at one read's latency, when it finds a live operation other
// than the one this call writes and not about to expire; otherwise the
// transaction answers, its failed claim carrying the stored operation. A
// new operation or a repeat thus costs two requests and waits for one
// round trip. A TransactionConflict is retried with full jitter, at most
// Options.ConflictRetries times, then answered busy.
func (c claims) Claim(ctx context.Context, rec idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	s := c.s
	if n := len(w.Tickets) + len(w.Items); n > dynamostore.MaxWrites {
		return nil, fmt.Errorf("dynamo: %d tickets and items: one transaction holds at most %d beside the claim", n, dynamostore.MaxWrites)
	}
	traceparent := w.Traceparent
	items := make([]types.TransactWriteItem, 0, len(w.Tickets)+len(w.Items))
	for _, t := range w.Tickets {
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:           &s.table,
			Item:                withTraceparent(ticketItem(t), t, traceparent),
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}})
	}
	if len(w.Items) > 0 { // a ticket's create has none: its path stays as short
		for i, iw := range w.Items {
			// DynamoDB refuses two actions on one item in a transaction.
			if slices.ContainsFunc(w.Tickets, func(t core.Ticket) bool { return core.TicketKey(t.ID) == iw.Key }) {
				return nil, fmt.Errorf("dynamo: item write %d: %s is a ticket the same claim creates", i, iw.Key)
			}
		}
		more, err := s.itemActions(w.Items, traceparent)
		if err != nil {
			return nil, err
		}
		items = append(items, more...)
	}
	return s.claims.Claim(ctx, rec, items, now)
}

// attrTraceparent is the ticket item's W3C traceparent of the span that
// created it (docs/contract.md, Stored items), written in the ticket's
// Put, so in the same transaction. It costs the item 66 bytes: the
// 11-byte name and the 55-byte value ("00-" + 32 hex trace id + "-" + 16
// hex span id + "-" + 2 hex flags). Only a ticket with a delivery record
// carries it: the delivery is what links back to it.
const attrTraceparent = "traceparent"

// IsReadAhead reports whether ctx is the context of the claim's
// read-ahead GetItem, which the claim store marks so
// (dynamostore.IsReadAhead): the tracing of the AWS SDK marks that
// request's span by it.
func IsReadAhead(ctx context.Context) bool { return dynamostore.IsReadAhead(ctx) }

// withTraceparent adds traceparent to item when t has a delivery record
// and traceparent is set.
func withTraceparent(item map[string]types.AttributeValue, t core.Ticket, traceparent string) map[string]types.AttributeValue {
	if t.Delivery != nil && traceparent != "" {
		item[attrTraceparent] = stringAttr(traceparent)
	}
	return item
}

// The classes of a failed read-ahead (metrics.ReadAheadClasses).
const (
	readAheadAccessDenied = "access_denied"
	readAheadThrottled    = "throttled"
	readAheadTimeout      = "timeout"
	readAheadOther        = "other"
)

// ReadAheadClass classifies a failed read-ahead's error (as
// Options.OnReadAheadError receives it): access_denied when DynamoDB
// refused the role (AccessDeniedException: a template whose role does not
// allow the read), throttled for throttling and capacity errors, timeout
// for a deadline or network timeout, other for anything else.
func ReadAheadClass(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDeniedException":
			return readAheadAccessDenied
		case "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded":
			return readAheadThrottled
		}
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
		return readAheadTimeout
	}
	return readAheadOther
}
