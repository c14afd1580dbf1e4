package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// canonicalArgs is what the service stores as a ticket's arguments.
var canonicalArgs = func() string {
	c, err := idem.Canonical([]byte(callbacktest.Arguments))
	if err != nil {
		panic(err)
	}
	return c
}()

// storeCall is what one create_ticket callback hands the store: the
// operation (real key, fingerprint and stored core.TicketResult) and its ticket.
func storeCall(requestID string) (idem.Record, core.Ticket, time.Time) {
	now := time.Now()
	key, fp := idem.Key(idem.PolicyArguments, benchUser.TenantID, requestID, core.CreateTicket, canonicalArgs)
	alt, _ := idem.Key(idem.PolicyRequest, benchUser.TenantID, requestID, core.CreateTicket, canonicalArgs)
	id := uuid.NewString()
	result, err := json.Marshal(core.TicketResult{Status: "created", TicketID: id})
	if err != nil {
		panic(err)
	}
	op := idem.Record{Key: key, AltKey: alt, State: idem.StateCompleted, Tenant: benchUser.TenantID, Owner: benchUser.UserID,
		Function: core.CreateTicket, Fingerprint: fp, Result: result,
		CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour).Truncate(time.Second)}
	t := core.Ticket{ID: id, TenantID: benchUser.TenantID, UserID: benchUser.UserID, OperationKey: key,
		Arguments: canonicalArgs, CreatedAt: now}
	return op, t, now
}

// storeOnly returns the store's own Create for a new operation each call
// (new) and for a repeat of one held key (repeat): the baseline the full
// callback path is compared with.
func storeOnly(b *testing.B, store core.Store, ids func() string) (newOp, repeat func()) {
	ctx := context.Background()
	newOp = func() {
		op, t, now := storeCall(ids())
		if existing, err := store.Claims().Claim(ctx, op, core.Writes{Tickets: []core.Ticket{t}}, now); err != nil || existing != nil {
			b.Fatalf("store.Create of a new key: %v, %v", existing, err)
		}
	}
	held := ids()
	op, t, now := storeCall(held)
	if _, err := store.Claims().Claim(ctx, op, core.Writes{Tickets: []core.Ticket{t}}, now); err != nil {
		b.Fatal(err)
	}
	repeat = func() {
		op, t, now := storeCall(held) // as a repeated callback: a fresh ticket id
		if existing, err := store.Claims().Claim(ctx, op, core.Writes{Tickets: []core.Ticket{t}}, now); err != nil || existing == nil {
			b.Fatalf("store.Create of a held key: %v, %v; want the stored operation", existing, err)
		}
	}
	return newOp, repeat
}

// BenchmarkDynamoDB: on DynamoDB Local, the full callback path against the
// store's own Create of the same operation and ticket (raw), for a new
// operation and for a repeat (the failed claim returns the stored item),
// alternated (see compare): what the handler adds to the transaction. The
// user cache is warm, as in a warm Lambda. ddb-calls/callback counts HTTP
// requests to DynamoDB per callback of the full path; raw has a client of
// its own, so that a request the full path's claim did not wait for (its
// read-ahead) is counted for the full path wherever it ends.
func BenchmarkDynamoDB(b *testing.B) {
	endpoint := testenv.DynamoDB(b)
	table := testenv.CreateTable(b, endpoint)
	client, calls := countingClient(endpoint)
	_, h := dynamoHandler(b, client, table)
	ids := requestIDs("ddb")
	ddbCalls = atomic.Int64{}
	if code, body := serve(h, ids()); outcome(code, body) != "created" { // warms the user cache and the JIT
		b.Fatalf("%d %s", code, body)
	}
	rawNew, rawRepeat := storeOnly(b, dynamo.New(testenv.DynamoClient(b, endpoint), table, dynamo.Options{}), ids)
	fullNew := func() {
		if code, body := serve(h, ids()); outcome(code, body) != "created" {
			b.Fatalf("%d %s", code, body)
		}
	}
	repeatID := ids()
	if code, body := serve(h, repeatID); code != http.StatusOK {
		b.Fatalf("%d %s", code, body)
	}
	fullRepeat := func() {
		if code, body := serve(h, repeatID); outcome(code, body) != "deduplicated" {
			b.Fatalf("%d %s", code, body)
		}
	}
	// Only the full path uses the counting client, so every request it
	// counted since the previous full callback is the full path's, its
	// claim's unawaited read-ahead request included, wherever it ended.
	mark := calls.Load()
	fullCalls := func(f func()) func() {
		return func() {
			f()
			now := calls.Load()
			ddbCalls.Add(now - mark)
			mark = now
		}
	}
	compare(b, "new", rawNew, fullCalls(fullNew), 200)
	compare(b, "repeat", rawRepeat, fullCalls(fullRepeat), 200)
}

// BenchmarkSQLite: on a SQLite file (WAL, synchronous=FULL, as the local
// server opens it), the full callback path against the store's own Create
// of the same operation and ticket (raw), for a new operation and for a
// repeat: what the handler adds to the transaction.
func BenchmarkSQLite(b *testing.B) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.sqlite"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	h := newHandler(store, usersOf(benchUser))
	ids := requestIDs("sqlite")
	rawNew, rawRepeat := storeOnly(b, store, ids)
	fullNew := func() {
		if code, body := serve(h, ids()); outcome(code, body) != "created" {
			b.Fatalf("%d %s", code, body)
		}
	}
	repeatID := ids()
	fullNew()
	if code, body := serve(h, repeatID); outcome(code, body) != "created" {
		b.Fatalf("%d %s", code, body)
	}
	fullRepeat := func() {
		if code, body := serve(h, repeatID); outcome(code, body) != "deduplicated" {
			b.Fatalf("%d %s", code, body)
		}
	}
	compare(b, "new", rawNew, fullNew, 50)
	compare(b, "repeat", rawRepeat, fullRepeat, 50)
}

// ddbCalls counts the DynamoDB requests of the full path during a
// comparison (BenchmarkDynamoDB sets it up; zero elsewhere).
var ddbCalls atomic.Int64

// compare runs raw and full alternately, each iteration once each, the
// order swapped every iteration, so that both see the same store, the same
// table size and the same machine load; it reports the mean of each as
// raw-µs and full-µs and their ratio as full/raw. ns/op is the pair.
func compare(b *testing.B, name string, raw, full func(), warmup int) {
	for i := range warmup {
		if i%2 == 0 {
			raw()
			full()
		} else {
			full()
			raw()
		}
	}
	b.Run(name, func(b *testing.B) {
		var rawTime, fullTime time.Duration
		ddbCalls.Store(0)
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if i%2 == 0 {
				raw()
			} else {
				full()
			}
			t1 := time.Now()
			if i%2 == 0 {
				full()
			} else {
				raw()
			}
			t2 := time.Now()
			if i%2 == 0 {
				rawTime, fullTime = rawTime+t1.Sub(t0), fullTime+t2.Sub(t1)
			} else {
				fullTime, rawTime = fullTime+t1.Sub(t0), rawTime+t2.Sub(t1)
			}
			i++
		}
		n := float64(b.N)
		b.ReportMetric(float64(rawTime.Microseconds())/n, "raw-µs")
		b.ReportMetric(float64(fullTime.Microseconds())/n, "full-µs")
		b.ReportMetric(float64(fullTime)/float64(rawTime), "full/raw")
		if c := ddbCalls.Load(); c > 0 {
			b.ReportMetric(float64(c)/n, "ddb-calls/callback")
		}
	})
}
