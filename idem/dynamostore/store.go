// Package dynamostore is the DynamoDB idem.Store: the claim of an
// operation key and the caller's own items commit in ONE
// TransactWriteItems, or none of them does.
//
// The transaction's first item is a Put of the record (its result
// included) on the condition
//
//	attribute_not_exists(pk) OR expires_at < :now
//
// so a record whose expiry has passed is treated as absent however late
// TTL deletes it. When the record names an idem.Record.AltKey (Guard
// always does: the call's key under the other policy), the second item is
// a ConditionCheck of the record under that key, on the condition
//
//	attribute_not_exists(pk) OR expires_at < :now OR fingerprint <> :fp OR tenant_id <> :tenant
//
// which fails exactly when a live record of the same tenant and arguments
// holds the call under the other policy: a repeat then finds its
// operation whichever policy claimed it. The caller's Put, Update, Delete
// and ConditionCheck items follow, up to MaxWrites of them (DynamoDB
// takes at most 100 items per transaction, the claim and the check being
// two). When either key holds the call, its failed condition returns the
// stored item (ReturnValuesOnConditionCheckFailure ALL_OLD; the claim's
// own key is looked at first): a repeat costs the same single request,
// and the record it returns is checked like any other (by the Guard). The
// check adds one item to every transaction: 2 write units more per new
// operation, by DynamoDB's rule for transactions (2 per KB per item).
//
// With Options.ReadAhead a strongly consistent GetItem of the record goes
// out beside the transaction, and a repeat is answered by the read, at
// one read's latency, for one request and one read unit more per claim.
// The read looks at the call's own key only: a repeat whose operation
// was claimed under the other policy is answered by the transaction.
//
// # DynamoDB's rules
//
//   - TTL: the table needs a string partition key (Attributes.PartitionKey)
//     and TTL enabled on Attributes.ExpiresAt (epoch seconds), or expired
//     records are never deleted. TTL deletes lazily, sometimes days late:
//     the claim's condition treats an expired record as absent anyway.
//   - Item size: DynamoDB keeps an item of at most 400 KB, so the
//     record, its result included, must fit; DynamoDB refuses a larger
//     one with a ValidationException, and the call is idem.Failed with
//     nothing written.
//   - Transaction size: one TransactWriteItems holds at most 100 items,
//     the claim and the check of the other policy's key being two, so a
//     Claim carries at most MaxWrites (98) of the caller's; more are
//     refused before any request (idem.Failed).
//   - UTF-8 results: the result is stored as a string attribute, so it
//     must be valid UTF-8 text (JSON text is). DynamoDB would replace
//     other bytes and replay them changed, so Claim refuses them before
//     any request (idem.Failed, nothing written).
//
// Records can share a table with the caller's own items, told apart by
// Attributes.Prefix.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// MaxWrites is how many items of the caller's a Claim can carry: DynamoDB
// takes at most 100 items in one TransactWriteItems, and the claim and
// the check of the other policy's key (idem.Record.AltKey) are two. It
// holds whether or not the record names an AltKey.
const MaxWrites = 98

// Client is the part of *dynamodb.Client the store uses.
type Client interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Options tune the store; zero values take the defaults.
type Options struct {
	// Attributes names the record's attributes (DefaultAttributes when nil).
	Attributes *Attributes
	// CallTimeout bounds each DynamoDB call (DefaultCallTimeout); a call
	// that runs out is busy.
	CallTimeout time.Duration
	// ConflictRetries is how many times a transaction conflict is retried
	// (default 10).
	ConflictRetries int
	// ConflictBackoff and ConflictBackoffMax shape the full-jitter backoff
	// between those retries (defaults 20 ms and 1 s). The caller's context
	// cuts them short; the answer is then busy.
	ConflictBackoff, ConflictBackoffMax time.Duration
	// ReadAhead sends a strongly consistent GetItem of the record beside
	// each transaction, so that a repeat is answered at the latency of one
	// read: a live record found by the read, other than the one this very
	// call writes and expiring more than ReadAheadMargin after now,
	// answers at once (its owner and fingerprint are checked as always);
	// otherwise the transaction's answer is awaited. The read is of the
	// call's own key only: a record of other arguments there, when the
	// record names an idem.Record.AltKey, and a call whose operation was
	// claimed under the other policy's key, are answered by the
	// transaction, which checks that key too. Each Claim then sends two
	// requests instead of one.
	ReadAhead bool
	// ReadAheadMargin keeps the read from answering for a record about to
	// expire (default 1 minute): TTL may delete such a record between the
	// read and the transaction, and the transaction would then commit.
	ReadAheadMargin time.Duration
	// OnReadAheadError, when set, is told of every read-ahead that failed
	// (denied, throttled, timed out, or a record it could not parse),
	// with the claim's context (its values; its cancellation removed) and
	// the read's error, mapped like every error of the store (MapError:
	// the SDK's error stays in its chain). The failed read is never the
	// claim's answer: the transaction answers. It is called from the
	// read's own goroutine, possibly after Claim has returned (Wait waits
	// for it), so it must be safe for concurrent use. Without it a failed
	// read is dropped without a trace.
	OnReadAheadError func(ctx context.Context, err error)
}

// DefaultCallTimeout is the deadline of each DynamoDB call when
// Options.CallTimeout is not set.
const DefaultCallTimeout = 2 * time.Second

func (o *Options) defaults() {
	if o.Attributes == nil {
		o.Attributes = &DefaultAttributes
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.ConflictRetries <= 0 {
		o.ConflictRetries = 10
	}
	if o.ConflictBackoff <= 0 {
		o.ConflictBackoff = 20 * time.Millisecond
	}
	if o.ConflictBackoffMax <= 0 {
		o.ConflictBackoffMax = time.Second
	}
	if o.ReadAheadMargin <= 0 {
		o.ReadAheadMargin = time.Minute
	}
}

// Compile-time check.
var _ idem.Store[[]types.TransactWriteItem] = (*Store)(nil)

// Store is the DynamoDB idem.Store. The caller's writes are
// TransactWriteItems items; one whose TableName is nil is written to the
// store's table.
type Store struct {
	client Client
	table  string
	attr   Attributes
	opt    Options
	// behind counts the read-ahead claims' requests still running (see
	// Wait).
	behind inflight
}

// inflight counts goroutines still running, for Wait.
type inflight struct {
	mu   sync.Mutex
	n    int
	done *sync.Cond
}

func (f *inflight) add(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done == nil {
		f.done = sync.NewCond(&f.mu)
	}
	f.n += d
	if f.n == 0 {
		f.done.Broadcast()
	}
}

func (f *inflight) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n > 0 {
		f.done.Wait()
	}
}

// New returns a Store of records in table.
func New(client Client, table string, opt Options) *Store {
	opt.defaults()
	return &Store{client: client, table: table, attr: *opt.Attributes, opt: opt}
}

// Claim implements idem.Store with one TransactWriteItems (see the
// package doc). A transaction conflict is retried with full jitter, at
// most Options.ConflictRetries times, then answered busy.
func (s *Store) Claim(ctx context.Context, rec idem.Record, writes []types.TransactWriteItem, now time.Time) (*idem.Record, error) {
	if err := rec.Check(now); err != nil {
		return nil, err
	}
	if err := s.attr.check(); err != nil {
		return nil, err
	}
	if len(writes) > MaxWrites {
		return nil, fmt.Errorf("dynamostore: %d writes: a transaction holds the claim, the check of the other policy's key and at most %d more", len(writes), MaxWrites)
	}
	if !utf8.Valid(rec.Result) {
		// The result is a string attribute: DynamoDB would store other
		// bytes as U+FFFD and replay them changed.
		return nil, errors.New("dynamostore: the result is not valid UTF-8 text, which DynamoDB cannot store byte for byte")
	}
	items := make([]types.TransactWriteItem, 0, 2+len(writes))
	items = append(items, types.TransactWriteItem{Put: &types.Put{
		TableName:                           &s.table,
		Item:                                s.attr.Item(rec),
		ConditionExpression:                 aws.String("attribute_not_exists(#pk) OR #exp < :now"),
		ExpressionAttributeNames:            map[string]string{"#pk": s.attr.PartitionKey, "#exp": s.attr.ExpiresAt},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(now.Unix())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	if rec.AltKey != "" && rec.AltKey != rec.Key {
		items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName:           &s.table,
			Key:                 s.attr.Key(rec.AltKey),
			ConditionExpression: aws.String("attribute_not_exists(#pk) OR #exp < :now OR #fp <> :fp OR #tenant <> :tenant"),
			ExpressionAttributeNames: map[string]string{"#pk": s.attr.PartitionKey, "#exp": s.attr.ExpiresAt,
				"#fp": s.attr.Fingerprint, "#tenant": s.attr.Tenant},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.Unix()),
				":fp": str(rec.Fingerprint), ":tenant": str(rec.Tenant)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}
	lead := len(items) // the store's own items, ahead of the caller's
	for _, w := range writes {
		items = append(items, s.withTable(w))
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: items}
	if !s.opt.ReadAhead {
		return s.transact(ctx, in, lead, rec, nil, nil)
	}
	return s.readAhead(ctx, rec, in, lead, now)
}

// withTable is w with the store's table where its action names none; the
// caller's item is not modified.
func (s *Store) withTable(w types.TransactWriteItem) types.TransactWriteItem {
	w.Put = named(w.Put, &s.table, func(p *types.Put) **string { return &p.TableName })
	w.Update = named(w.Update, &s.table, func(u *types.Update) **string { return &u.TableName })
	w.Delete = named(w.Delete, &s.table, func(d *types.Delete) **string { return &d.TableName })
	w.ConditionCheck = named(w.ConditionCheck, &s.table, func(c *types.ConditionCheck) **string { return &c.TableName })
	return w
}

// named is action with table as its table name where it names none: a
// copy, so the caller's action is not modified. The four actions of a
// TransactWriteItem are distinct SDK types, each with a TableName; name
// points at it.
func named[A any](action *A, table *string, name func(*A) **string) *A {
	if action == nil || *name(action) != nil {
		return action
	}
	c := *action
	*name(&c) = table
	return &c
}

// call runs one DynamoDB call under its own deadline and maps its error.
func (s *Store) call(ctx context.Context, f func(context.Context) error) error {
	return s.callLead(ctx, 1, f)
}

// callLead is call for a transaction whose first lead items are the
// store's own (see mapError).
func (s *Store) callLead(ctx context.Context, lead int, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.CallTimeout)
	defer cancel()
	return mapError(f(ctx), lead)
}

// transact sends the transaction of rec's claim, whose first lead items
// are the store's own, retrying conflicts until stop is closed (nil: never):
// once a read-ahead has answered, nobody waits for a retry's answer, and
// the record the read found fails its claim anyway. sent, when not nil,
// is closed as the first attempt is handed to the client.
func (s *Store) transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput, lead int, rec idem.Record, stop <-chan struct{}, sent chan<- struct{}) (*idem.Record, error) {
	for attempt := 0; ; attempt++ {
		err := s.callLead(ctx, lead, func(ctx context.Context) error {
			if attempt == 0 && sent != nil {
				close(sent)
			}
			_, err := s.client.TransactWriteItems(ctx, in)
			return err
		})
		var held claimHeld
		switch {
		case err == nil:
			return nil, nil
		case errors.As(err, &held):
			return s.holder(held, rec)
		case errors.Is(err, errConflict) && attempt < s.opt.ConflictRetries:
			if werr := s.backoff(ctx, attempt, stop); werr != nil {
				return nil, MapError(werr)
			}
		case errors.Is(err, errConflict):
			return nil, fmt.Errorf("%w: transaction conflict after %d attempts", idem.ErrBusy, attempt+1)
		default:
			return nil, err
		}
	}
}

// holder is the record that holds rec's call, of those whose conditions
// failed: the claim's own record, unless it has other arguments or
// another tenant and the other policy's key holds a record of rec's
// (whose check fails only then).
func (s *Store) holder(held claimHeld, rec idem.Record) (*idem.Record, error) {
	var own *idem.Record
	if item := held.items[0]; item != nil {
		r, err := s.attr.Parse(item)
		if err != nil {
			return nil, err
		}
		own = &r
		if r.Tenant == rec.Tenant && r.Fingerprint == rec.Fingerprint {
			return own, nil
		}
	}
	if len(held.items) > 1 && held.items[1] != nil {
		r, err := s.attr.Parse(held.items[1])
		if err != nil {
			return nil, err
		}
		return &r, nil
	}
	if own == nil {
		// A condition failed, so a record holds a key, but DynamoDB sent
		// none back: nothing was written, and without the record there is
		// no result to replay. Failed, never Created.
		return nil, errors.New("dynamostore: the claim's condition failed but DynamoDB returned no item (ReturnValuesOnConditionCheckFailure ALL_OLD)")
	}
	return own, nil
}

// errStopped ends the retries of a transaction whose answer nobody waits
// for.
var errStopped = errors.New("dynamostore: a read-ahead answered the claim")

// backoff sleeps a random time up to min(cap, base·2^attempt); it ends
// early when ctx ends or stop is closed.
func (s *Store) backoff(ctx context.Context, attempt int, stop <-chan struct{}) error {
	ceiling := s.opt.ConflictBackoff << min(attempt, 10)
	if ceiling > s.opt.ConflictBackoffMax || ceiling <= 0 {
		ceiling = s.opt.ConflictBackoffMax
	}
	timer := time.NewTimer(rand.N(ceiling) + time.Millisecond) //nolint:gosec // jitter spreads retries; it needs no unpredictability
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopped
	case <-timer.C:
		return nil
	}
}

// readAheadKey marks the context of the read-ahead's GetItem.
type readAheadKey struct{}

// IsReadAhead reports whether ctx is the context of a read-ahead: the
// GetItem a claim sends beside its transaction (Options.ReadAhead). The
// store marks that request's context so, and the SDK hands the same
// context to every middleware of the request: an instrumentation of the
// client (a tracing or metrics middleware in the client's APIOptions)
// tells the read-ahead from the store's other requests by it, without
// looking at keys.
func IsReadAhead(ctx context.Context) bool {
	v, _ := ctx.Value(readAheadKey{}).(bool)
	return v
}

type answer struct {
	held *idem.Record
	err  error
}

// readAhead sends the transaction and a strongly consistent read of the
// record at once. The transaction's answer is final whenever it comes
// first. A read that comes first answers only when it is decisive (see
// decides), and then without waiting for the transaction's answer, only
// for the transaction to have been handed to the client (it was started
// first, so this costs nothing in practice); else the transaction is
// awaited.
//
// Whichever of the two is not awaited is not cancelled either: it runs
// to its end in the background, on ctx without its cancellation and
// bounded by CallTimeout (Wait waits for it), so a claim that starts
// always sends both requests, even when its caller stops waiting as soon
// as it has the answer. A caller whose ctx ends first gets ErrBusy: the
// outcome is unknown, and a retry with the same data gets the stored
// result. A transaction the read answered ahead of
// writes nothing, because its claim condition fails on the record the
// read found, which lives past the margin; its conflicts are not
// retried, since nobody waits for its answer.
func (s *Store) readAhead(ctx context.Context, rec idem.Record, in *dynamodb.TransactWriteItemsInput, lead int, now time.Time) (*idem.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, MapError(err) // nothing sent
	}
	bg := context.WithoutCancel(ctx)
	tx := make(chan answer, 1)
	stop, sent := make(chan struct{}), make(chan struct{})
	s.behind.add(1)
	go func() {
		defer s.behind.add(-1)
		held, err := s.transact(bg, in, lead, rec, stop, sent)
		tx <- answer{held, err}
	}()
	read := make(chan answer, 1)
	s.behind.add(1)
	go func() {
		defer s.behind.add(-1)
		held, err := s.Get(context.WithValue(bg, readAheadKey{}, true), rec.Key)
		if err != nil && s.opt.OnReadAheadError != nil {
			s.opt.OnReadAheadError(bg, err)
		}
		read <- answer{held, err}
	}()
	select {
	case a := <-tx:
		return a.held, a.err
	case r := <-read:
		if r.err == nil && r.held != nil && s.decides(*r.held, rec, now) {
			close(stop)
			<-sent
			return r.held, nil
		}
	case <-ctx.Done():
		return nil, MapError(ctx.Err())
	}
	select {
	case a := <-tx:
		return a.held, a.err
	case <-ctx.Done():
		return nil, MapError(ctx.Err())
	}
}

// Wait blocks until the requests of every read-ahead claim have ended,
// including those a claim answered without waiting for (see readAhead):
// for a process frozen between requests, such as a Lambda function,
// which must wait so before each invocation returns (a request left in
// flight would stop mid-way and end on a later thaw, past its call
// timeout); for tests and benchmarks that count requests per call; and
// for a process that shuts down cleanly. Claims may run meanwhile; Wait
// returns once none is left behind.
func (s *Store) Wait() { s.behind.wait() }

// decides reports whether a record found by the read answers the call:
// it is live at now and past the margin, and it is not the record this
// call's own transaction writes (that one answers created, which only
// the transaction can say), nor, when mine names an AltKey, a record of
// other arguments (the call's operation may be held under that key,
// which only the transaction checks). The item keeps both times to the
// second, so mine is compared at that precision.
func (s *Store) decides(found, mine idem.Record, now time.Time) bool {
	if !found.Live(now) || found.ExpiresAt.Before(now.Add(s.opt.ReadAheadMargin)) {
		return false
	}
	if mine.AltKey != "" && mine.AltKey != mine.Key && (found.Tenant != mine.Tenant || found.Fingerprint != mine.Fingerprint) {
		// A record of other arguments: the call's own operation may be
		// held under the other policy's key, which only the transaction
		// checks.
		return false
	}
	own := found.State == mine.State && found.Tenant == mine.Tenant && found.Owner == mine.Owner &&
		found.Function == mine.Function && found.Fingerprint == mine.Fingerprint &&
		found.CreatedAt.Equal(mine.CreatedAt.Truncate(time.Second)) && found.ExpiresAt.Equal(mine.ExpiresAt.Truncate(time.Second)) &&
		string(found.Result) == string(mine.Result)
	return !own
}

// Get reads the record of key with a strongly consistent read: nil when
// there is none. An expired record is returned as stored; Record.Live
// tells.
func (s *Store) Get(ctx context.Context, key string) (*idem.Record, error) {
	var out *dynamodb.GetItemOutput
	err := s.call(ctx, func(ctx context.Context) (err error) {
		out, err = s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &s.table, Key: s.attr.Key(key), ConsistentRead: aws.Bool(true),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	rec, err := s.attr.Parse(out.Item)
	if err != nil {
		return nil, err
	}
	return &rec, nil
}
