package bench

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
	"github.com/aivax-examples/idempotent-callback/internal/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

// canonicalArgs is what the service stores as a ticket's arguments.
var canonicalArgs = func() string {
	c, err := opkey.Canonical([]byte(arguments))
	if err != nil {
		panic(err)
	}
	return c
}()

// rawOperation is the operation and ticket of one callback as the store
// writes them, built directly: hex SHA-256 keys and fingerprint of the
// real lengths, a UUID ticket id, the stored result and the canonical
// arguments.
type rawOperation struct {
	key, fingerprint, ticketID, result string
	now                                time.Time
}

func newRawOperation(seed string) rawOperation {
	sum := sha256.Sum256([]byte(seed))
	id := uuid.NewString()
	return rawOperation{
		key: hex.EncodeToString(sum[:]), fingerprint: hex.EncodeToString(sum[:]), ticketID: id,
		result: `{"status":"created","ticket_id":"` + id + `"}`, now: time.Now(),
	}
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// transactItems is the TransactWriteItems input the store sends for op:
// the same two items, attributes and conditions (internal/store/dynamo).
func (op rawOperation) transactItems(table string) *dynamodb.TransactWriteItemsInput {
	return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"pk": str("OP#" + op.key), "state": str("completed"), "tenant_id": str(benchUser.TenantID),
				"user_id": str(benchUser.UserID), "function": str(core.CreateTicket), "fingerprint": str(op.fingerprint),
				"created_at": str(op.now.UTC().Format(time.RFC3339)), "expires_at": num(op.now.Add(24 * time.Hour).Unix()),
				"result": str(op.result),
			},
			ConditionExpression:                 aws.String("attribute_not_exists(pk) OR expires_at < :now"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(op.now.Unix())},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		{Put: &types.Put{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"pk": str("TICKET#" + op.ticketID), "tenant_id": str(benchUser.TenantID), "user_id": str(benchUser.UserID),
				"operation_key": str(op.key), "arguments": str(canonicalArgs),
				"created_at": str(op.now.UTC().Format(time.RFC3339Nano)),
			},
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}},
	}}
}

// BenchmarkDynamoDB: on DynamoDB Local, the full callback path against one
// bare TransactWriteItems of the same two items from the same client, for
// a new operation and for a repeat (the failed claim returns the stored
// item), alternated (see compare). The user cache is warm, as in a warm
// Lambda. ddb-calls/callback counts HTTP requests to DynamoDB per
// callback of the full path.
func BenchmarkDynamoDB(b *testing.B) {
	endpoint := testenv.DynamoDB(b)
	table := testenv.CreateTable(b, endpoint)
	client, calls := countingClient(endpoint)
	store := dynamo.New(client, table, dynamo.Options{})
	ctx := context.Background()
	if err := store.PutUser(ctx, benchUser); err != nil {
		b.Fatal(err)
	}
	h := newHandler(store, usercache.New(store, time.Hour, 16))
	ids := requestIDs("ddb")
	ddbCalls = atomic.Int64{}
	if code, body := serve(h, ids()); outcome(code, body) != "created" { // warms the user cache and the JIT
		b.Fatalf("%d %s", code, body)
	}
	rawNew := func() {
		_, err := client.TransactWriteItems(ctx, newRawOperation(ids()).transactItems(table))
		if err != nil {
			b.Fatal(err)
		}
	}
	held := newRawOperation(ids())
	if _, err := client.TransactWriteItems(ctx, held.transactItems(table)); err != nil {
		b.Fatal(err)
	}
	rawRepeat := func() {
		op := held
		op.ticketID, op.now = uuid.NewString(), time.Now() // as a repeated callback: a fresh ticket id
		_, err := client.TransactWriteItems(ctx, op.transactItems(table))
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			b.Fatalf("repeat of a held key: %v, want TransactionCanceledException", err)
		}
	}
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
	fullCalls := func(f func()) func() {
		return func() {
			before := calls.Load()
			f()
			ddbCalls.Add(calls.Load() - before)
		}
	}
	compare(b, "new", rawNew, fullCalls(fullNew), 200)
	compare(b, "repeat", rawRepeat, fullCalls(fullRepeat), 200)
}

// BenchmarkSQLite: on a SQLite file (WAL, synchronous=FULL, as the local
// server opens it), the full callback path against BEGIN IMMEDIATE, the
// same three inserts (claim, operation with its result, ticket), prepared
// once as the store's are, COMMIT, on the same database handle; and for a
// repeat BEGIN IMMEDIATE, the same SELECT of the operation, ROLLBACK. The
// full path also reads the claim before it writes.
func BenchmarkSQLite(b *testing.B) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.sqlite"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	h := newHandler(store, usersOf(benchUser))
	db := store.DB()
	ids := requestIDs("sqlite")
	// The same three inserts, prepared once as the store prepares its own.
	var inserts []*sql.Stmt
	for _, q := range []string{
		`INSERT INTO claims (operation_key, generation, claimed_at) VALUES (?, ?, ?)`,
		`INSERT INTO operations (key, generation, state, tenant_id, user_id, function, fingerprint, result, created_at, expires_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		`INSERT INTO tickets (ticket_id, operation_key, generation, tenant_id, user_id, arguments, created_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?)`,
	} {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		inserts = append(inserts, st)
	}
	rawInsert := func(op rawOperation) {
		tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the store's DSN sets _txlock=immediate
		if err != nil {
			b.Fatal(err)
		}
		created := op.now.UTC().Format(time.RFC3339Nano)
		for i, args := range [][]any{
			{op.key, 1, created},
			{op.key, 1, "completed", benchUser.TenantID, benchUser.UserID, core.CreateTicket, op.fingerprint,
				op.result, created, op.now.Add(24 * time.Hour).Unix()},
			{op.ticketID, op.key, 1, benchUser.TenantID, benchUser.UserID, canonicalArgs, created},
		} {
			if _, err := tx.StmtContext(ctx, inserts[i]).ExecContext(ctx, args...); err != nil {
				_ = tx.Rollback()
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	rawNew := func() { rawInsert(newRawOperation(ids())) }
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
	selectOp, err := db.PrepareContext(ctx, `SELECT key, state, tenant_id, user_id, function, fingerprint, result, created_at, expires_at
		FROM operations WHERE key = ?`)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = selectOp.Close() })
	held := newRawOperation(ids())
	rawInsert(held)
	rawRepeat := func() {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		var key, state, tenant, user, function, fingerprint, result, created string
		var expires int64
		if err := tx.StmtContext(ctx, selectOp).QueryRowContext(ctx, held.key).Scan(&key, &state, &tenant, &user,
			&function, &fingerprint, &result, &created, &expires); err != nil {
			b.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			b.Fatal(err)
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
