package dynamo

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// Client is the part of *dynamodb.Client the adapter uses.
type Client interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	// The delivery store's calls (delivery.go).
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
// for tests and benchmarks that count requests per callback.
func (s *Store) Wait() { s.claims.Wait() }

// call runs one DynamoDB call under its own deadline and maps its error.
func (s *Store) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.CallTimeout)
	defer cancel()
	return mapError(f(ctx))
}

// Ticket implements core.Store.
func (s *Store) Ticket(ctx context.Context, id string) (core.Ticket, error) {
	item, err := s.get(ctx, prefixTicket+id)
	if err != nil {
		return core.Ticket{}, err
	}
	return parseTicket(item)
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
