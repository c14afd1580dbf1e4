package bench

import (
	"context"
	"maps"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/app/doors"
	"github.com/aivax-examples/idempotent-callback/internal/bench/inregion"
	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// Environment of TestInRegion besides results.InRegionEnv.
const (
	envInRegionOps  = "BENCH_INREGION_OPS"  // operations per one-at-a-time case (default 400, as many as the source's invocations)
	envInRegionSeed = "BENCH_INREGION_SEED" // seed of the model's draws (default 1)
	inRegionWorkers = 16
	inRegionDraws   = 100_000 // draws of the model's own sequence figures
)

// TestInRegion (only with BENCH_INREGION_OUT set) measures the callback path
// and the bare DynamoDB operations under it through the inregion proxy in
// front of DynamoDB Local, on two hops: the proxy adding no delay (DynamoDB
// Local as the other benchmarks see it, with the requests counted), and the
// proxy adding the in-region latency model's delay. Each hop has its own
// proxy, client, store and handler (warm user cache) on one table. Cases:
// a new operation one at a time and from 16 concurrent clients, a repeat
// (and the same repeat on a warm instance with the result cache), and the
// floors under the same hop (one bare GetItem of the operation, one
// bare conditional PutItem, one bare TransactWriteItems of the three items the
// store writes, built by the store itself) and the Powertools pattern's
// three plain writes; and the follow-ups, add_comment and close_ticket
// new and repeated, without and with a destination (followUpCases). The
// one-at-a-time cases of both hops take turns, one
// operation each, and under the model each case draws from its own stream
// of the seed, so the i-th operation of every case meets the same
// quantiles. Writes results.InRegion (JSON) to the file the
// variable names; any answer other than the expected one fails the run.
func TestInRegion(t *testing.T) {
	out := outFile(t, results.InRegionEnv)
	ops := envInt(t, envInRegionOps, 400)
	seed := uint64(envInt(t, envInRegionSeed, 1))
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)

	res := results.InRegion{Seed: seed, Ops: ops, Draws: inRegionDraws}
	for _, q := range inregion.Published {
		res.Published = append(res.Published, results.InRegionQuantiles{Name: q.Name, MinMs: q.Min, P50ms: q.P50,
			P90ms: q.P90, P95ms: q.P95, P99ms: q.P99, MaxMs: q.Max})
	}
	for _, r := range inregion.Rules() {
		res.Rules = append(res.Rules, results.InRegionRule{Operation: r.Operation, Done: r.Done.Name, Cancelled: r.Cancelled.Name})
	}
	for _, s := range []struct {
		name string
		qs   []inregion.Quantiles
	}{
		{"one TransactWriteItems", []inregion.Quantiles{inregion.TransactWrite5}},
		{"three single-item writes in sequence", []inregion.Quantiles{inregion.PutItem, inregion.PutItem, inregion.PutItem}},
		{"one GetItem", []inregion.Quantiles{inregion.PutItem}},
	} {
		d := inregion.NewModel(seed).Sequence(inRegionDraws, s.qs...)
		res.Sequences = append(res.Sequences, results.InRegionSequence{Name: s.name,
			P50ms: ms(percentile(d, 0.50)), P99ms: ms(percentile(d, 0.99))})
	}

	var hops []*hopSetup
	for _, hop := range []struct {
		kind, name string
		model      *inregion.Model
	}{
		{"local", "DynamoDB Local", nil},
		{"model", "DynamoDB Local + in-region model", inregion.NewModel(seed)},
	} {
		hops = append(hops, setupHop(t, endpoint, table, hop.kind, hop.name, hop.model))
	}
	// The one-at-a-time cases of both hops take turns, one operation each,
	// so that every case sees the same table and the same machine load
	// (other work shares this machine), then each hop's concurrent case.
	var runs []*seqRun
	for _, h := range hops {
		for _, c := range h.cases {
			runs = append(runs, &seqRun{hop: h, c: c, other: map[string]int{}})
		}
	}
	res.CapacityChecks = capacityChecks(t, hops[0])
	roundRobin(runs, ops)
	for _, h := range hops {
		hop := results.InRegionHop{Kind: h.kind, Name: h.name}
		for _, r := range runs {
			if r.hop == h {
				hop.Cases = append(hop.Cases, r.result())
			}
		}
		if h.model != nil {
			h.model.Stream(results.InRegionNewParallel)
		}
		par := parallel(h.proxy, h.store.Wait, results.InRegionNewParallel, "new operation, 16 concurrent clients", 2*ops, inRegionWorkers, "created", h.newOp)
		hop.Cases = slices.Insert(hop.Cases, 1, par)
		res.Hops = append(res.Hops, hop)
	}
	if err := results.WriteJSON(out, res); err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hops {
		for _, c := range h.Cases {
			t.Logf("%s, %s: p50 %.2f ms, p99 %.2f ms, %.0f ops/s, %.2f requests/op %v, %.2f RCU/op, %.2f WCU/op",
				h.Name, c.Name, c.P50ms, c.P99ms, c.PerSecond(), c.RequestsPerOp(), c.Requests, c.RCUPerOp(), c.WCUPerOp())
			if len(c.Other) > 0 {
				t.Errorf("%s, %s: unexpected answers %v", h.Name, c.Name, c.Other)
			}
		}
	}
}

// hopSetup is one way to DynamoDB Local: its proxy (model nil: no delay),
// and a client, store and handler of its own on the shared table.
type hopSetup struct {
	kind, name string
	model      *inregion.Model // nil on DynamoDB Local alone
	proxy      *inregion.Proxy
	store      *dynamo.Store
	newOp      func() string
	cases      []seqCase
	// For the capacity checks: the client, table, the held operation's
	// key and the store's items for a fresh callback.
	client  *dynamodb.Client
	table   string
	heldKey map[string]types.AttributeValue
	fresh   func() captured
}

// seqCase is a case measured one operation at a time: prepare (not timed)
// then run, whose answer must be want.
type seqCase struct {
	kind, name, want string
	prepare          func()
	run              func() string
}

func setupHop(t *testing.T, endpoint, table, kind, name string, model *inregion.Model) *hopSetup {
	t.Helper()
	ctx := context.Background()
	p, err := inregion.NewProxy(endpoint, model)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	client := testenv.DynamoClient(t, srv.URL)
	store, h := dynamoHandler(t, client, table)
	// The callback function's service keeps completed operations in
	// memory (doors.ResultCache); the repeat is measured without it (h) and
	// with it (cached), each handler on its own service and the same users.
	cached := newHandler(store, h.Service.Users)
	cached.Service.Cache = doors.ResultCache(0)
	ids := requestIDs("inregion-" + kind)
	newOp := func() string { return outcome(serve(h, ids())) }
	for range 20 { // warm-up: the user cache, connections, DynamoDB Local's JIT
		if o := newOp(); o != "created" {
			t.Fatalf("warm-up: %s", o)
		}
	}
	repeatID := ids()
	if o := outcome(serve(h, repeatID)); o != "created" {
		t.Fatalf("setting up the repeat: %s", o)
	}
	// The warm instance: its first repeat is answered by DynamoDB and
	// fills its cache; every measured one is answered from the cache.
	if o := outcome(serve(cached, repeatID)); o != "deduplicated" {
		t.Fatalf("warming the cached repeat: %s", o)
	}
	store.Wait()
	bare := newBareItems(t, table)
	heldKey := bare.next(repeatID).opKey()
	var next captured // the items of the next bare write, prepared untimed
	prepare := func() { next = bare.next(ids()) }

	followUps := followUpCases(t, endpoint, table, store, h, ids)

	return &hopSetup{kind: kind, name: name, model: model, proxy: p, store: store, newOp: newOp,
		client: client, table: table, heldKey: heldKey, fresh: func() captured { return bare.next(ids()) }, cases: append([]seqCase{
			{results.InRegionNew, "new operation", "created", nil, newOp},
			{results.InRegionRepeat, "repeat", "deduplicated", nil, func() string { return outcome(serve(h, repeatID)) }},
			{results.InRegionRepeatCached, "repeat on a warm instance, result cache on", "deduplicated", nil, func() string {
				return outcome(serve(cached, repeatID))
			}},
			{results.InRegionGet, "bare GetItem of the operation", "ok", nil, func() string {
				out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: heldKey, ConsistentRead: aws.Bool(true)})
				if err == nil && out.Item == nil {
					return "not found" // the floor is the read of the stored operation
				}
				return errOutcome(err)
			}},
			{results.InRegionPut, "bare conditional PutItem of an operation", "ok", prepare, func() string {
				_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: next.op,
					ConditionExpression: aws.String("attribute_not_exists(pk)")})
				return errOutcome(err)
			}},
			{results.InRegionTransact, "bare TransactWriteItems of the same three items", "ok", prepare, func() string {
				_, err := client.TransactWriteItems(ctx, next.tx)
				return errOutcome(err)
			}},
			{results.InRegionThreeWrites, "three plain writes (Powertools pattern)", "ok", prepare, func() string {
				return errOutcome(threeWrites(ctx, client, table, next))
			}},
		}, followUps...)}
}

// capacityChecks sends the floors' requests once more through h (no
// delay), asking for ReturnConsumedCapacity, and pairs the capacity the
// proxy's rules computed with what DynamoDB Local reported; the repeat's
// cancelled claim is the store's transaction on the held key.
func capacityChecks(t *testing.T, h *hopSetup) []results.InRegionCapacityCheck {
	t.Helper()
	ctx := context.Background()
	total := types.ReturnConsumedCapacityTotal
	var out []results.InRegionCapacityCheck
	check := func(request string, send func() ([]types.ConsumedCapacity, error), wantErr bool) {
		before := h.proxy.Stats()
		reported, err := send()
		if (err != nil) != wantErr {
			t.Fatalf("capacity check %q: %v", request, err)
		}
		d := h.proxy.Stats().Sub(before)
		c := results.InRegionCapacityCheck{Request: request, Rules: results.InRegionUnits{RCU: d.Capacity.RCU, WCU: d.Capacity.WCU}}
		if len(reported) > 0 {
			var u results.InRegionUnits
			for _, r := range reported {
				units := aws.ToFloat64(r.CapacityUnits)
				switch {
				case r.ReadCapacityUnits != nil || r.WriteCapacityUnits != nil:
					u.RCU += aws.ToFloat64(r.ReadCapacityUnits)
					u.WCU += aws.ToFloat64(r.WriteCapacityUnits)
				case strings.HasPrefix(request, "GetItem"):
					u.RCU += units
				default:
					u.WCU += units
				}
			}
			c.Local = &u
		}
		out = append(out, c)
	}
	one := func(c *types.ConsumedCapacity) []types.ConsumedCapacity {
		if c == nil {
			return nil
		}
		return []types.ConsumedCapacity{*c}
	}
	check("GetItem of the stored operation (strongly consistent)", func() ([]types.ConsumedCapacity, error) {
		o, err := h.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &h.table, Key: h.heldKey, ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
		if err != nil {
			return nil, err
		}
		return one(o.ConsumedCapacity), nil
	}, false)
	check("conditional PutItem of an operation item", func() ([]types.ConsumedCapacity, error) {
		o, err := h.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &h.table, Item: h.fresh().op,
			ConditionExpression: aws.String("attribute_not_exists(pk)"), ReturnConsumedCapacity: total})
		if err != nil {
			return nil, err
		}
		return one(o.ConsumedCapacity), nil
	}, false)
	// transact sends tx asking for its capacity; a cancelled transaction's
	// TransactionCanceledException carries no ConsumedCapacity.
	transact := func(tx dynamodb.TransactWriteItemsInput) ([]types.ConsumedCapacity, error) {
		tx.ReturnConsumedCapacity = total
		o, err := h.client.TransactWriteItems(ctx, &tx)
		if err != nil {
			return nil, err
		}
		return o.ConsumedCapacity, nil
	}
	check("TransactWriteItems of the store's three items (a new operation: the claim, the check of the other key policy's key, the ticket)", func() ([]types.ConsumedCapacity, error) {
		return transact(*h.fresh().tx)
	}, false)
	check("TransactWriteItems of the claim and the ticket, without the check of the other policy's key (not what the store sends)", func() ([]types.ConsumedCapacity, error) {
		tx := *h.fresh().tx
		tx.TransactItems = []types.TransactWriteItem{tx.TransactItems[0], tx.TransactItems[2]}
		return transact(tx)
	}, false)
	check("TransactWriteItems of the ticket item alone (not what the store sends)", func() ([]types.ConsumedCapacity, error) {
		tx := *h.fresh().tx
		tx.TransactItems = tx.TransactItems[2:]
		return transact(tx)
	}, false)
	check("the store's TransactWriteItems on a held key, cancelled (a repeat's claim)", func() ([]types.ConsumedCapacity, error) {
		tx := *h.fresh().tx
		items := slices.Clone(tx.TransactItems)
		put := *items[0].Put
		put.Item = maps.Clone(put.Item)
		put.Item["pk"] = h.heldKey["pk"]
		items[0].Put = &put
		tx.TransactItems = items
		return transact(tx)
	}, true)
	return out
}

func errOutcome(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// bareItems builds the items the store writes for a callback, by running
// the store's own Create against a client that records the transaction
// instead of sending it.
type bareItems struct {
	t       *testing.T
	capture *captureClient
	store   *dynamo.Store
}

func newBareItems(t *testing.T, table string) *bareItems {
	c := &captureClient{}
	return &bareItems{t: t, capture: c, store: dynamo.New(c, table, dynamo.Options{})}
}

// captured is one callback's transaction and the two items it writes
// (its third checks the operation's key under the other key policy).
type captured struct {
	tx         *dynamodb.TransactWriteItemsInput
	op, ticket map[string]types.AttributeValue
}

func (c captured) opKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": c.op["pk"]}
}

// next is what the store writes for a create_ticket callback with requestID.
func (b *bareItems) next(requestID string) captured {
	op, t, now := storeCall(requestID)
	if existing, err := b.store.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{t}}, now); err != nil || existing != nil {
		b.t.Fatalf("capturing the store's transaction: %v, %v", existing, err)
	}
	tx := b.capture.take()
	if tx == nil || len(tx.TransactItems) != 3 || tx.TransactItems[0].Put == nil || tx.TransactItems[1].ConditionCheck == nil ||
		tx.TransactItems[2].Put == nil {
		b.t.Fatalf("the store's Create wrote %+v; want one TransactWriteItems of a Put, a ConditionCheck and a Put", tx)
	}
	return captured{tx: tx, op: tx.TransactItems[0].Put.Item, ticket: tx.TransactItems[2].Put.Item}
}

// captureClient is a dynamo.Client that records a TransactWriteItems and
// answers it, and any GetItem, as DynamoDB would for a new key. Any other
// call reaches the nil embedded interface and panics: the capture expects
// none.
type captureClient struct {
	dynamo.Client
	mu sync.Mutex
	tx *dynamodb.TransactWriteItemsInput
}

func (c *captureClient) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tx = in
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func (c *captureClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

func (c *captureClient) take() *dynamodb.TransactWriteItemsInput {
	c.mu.Lock()
	defer c.mu.Unlock()
	tx := c.tx
	c.tx = nil
	return tx
}

// threeWrites is the Powertools for AWS Lambda idempotency pattern on the
// same items: a conditional put of the in-progress record, the effect
// (the ticket), and the update of the record to completed with its result.
func threeWrites(ctx context.Context, client *dynamodb.Client, table string, c captured) error {
	record := map[string]types.AttributeValue{}
	for k, v := range c.op {
		if k != "result" {
			record[k] = v
		}
	}
	record["state"] = &types.AttributeValueMemberS{Value: "in_progress"}
	now := &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Unix(), 10)}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: record,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR expires_at < :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": now}}); err != nil {
		return err
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: c.ticket,
		ConditionExpression: aws.String("attribute_not_exists(pk)")}); err != nil {
		return err
	}
	_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: c.opKey(),
		UpdateExpression:          aws.String("SET #s = :s, #r = :r"),
		ExpressionAttributeNames:  map[string]string{"#s": "state", "#r": "result"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": c.op["state"], ":r": c.op["result"]}})
	return err
}

// sample is one operation's time and the proxy's counters over it: the
// delay the model drew, the time the proxy slept for it (more on a busy
// machine), and DynamoDB Local's time.
type sample struct{ total, drawn, slept, local time.Duration }

// seqRun is one hop's case and what was measured of it.
type seqRun struct {
	hop     *hopSetup
	c       seqCase
	samples []sample
	stats   inregion.Stats // the proxy's counters over this case's operations
	other   map[string]int
}

// roundRobin runs every case n times, one operation at a time, the cases
// taking turns in an order rotated each round; the proxy's counters over
// each operation belong to it alone.
func roundRobin(runs []*seqRun, n int) {
	for i := range n {
		for k := range runs {
			r := runs[(i+k)%len(runs)]
			if r.c.prepare != nil {
				r.c.prepare()
			}
			if r.hop.model != nil {
				r.hop.model.Stream(r.c.kind) // the i-th operation of every case meets the same quantiles
			}
			before := r.hop.proxy.Stats()
			t0 := time.Now()
			o := r.c.run()
			total := time.Since(t0)
			r.hop.store.Wait() // the claim's request it answered without, untimed: counted with its operation
			d := r.hop.proxy.Stats().Sub(before)
			if o != r.c.want {
				r.other[o]++
			}
			s := waitedFor(r.hop.proxy.Spans(before.Total()), t0.Add(total))
			s.total = total
			r.samples = append(r.samples, s)
			r.stats = r.stats.Add(d)
		}
	}
}

// result summarizes the run; its operations per second are over the time
// its own operations took.
func (r *seqRun) result() results.InRegionCase {
	var busy time.Duration
	for _, s := range r.samples {
		busy += s.total
	}
	c := summarizeCase(r.c.kind, r.c.name, 1, busy, r.stats, r.other, r.samples)
	sorted := slices.Clone(r.samples)
	slices.SortFunc(sorted, func(a, b sample) int { return int(a.total - b.total) })
	c.Mean = split(sorted)
	c.Tail = split(sorted[int(0.99*float64(len(sorted))):])
	c.P99 = partsP99(r.samples)
	return c
}

// waitedFor is the time an operation that answered at answered spent in
// the requests it waited for, one after another: the last request to end
// before the answer, then the last to end before that one started, and so
// on back. A request sent beside one on that path (the read-ahead beside
// the transaction) or one the operation answered without (ending after
// it) is not counted, so the parts stay within the operation's time.
func waitedFor(spans []inregion.Span, answered time.Time) sample {
	var s sample
	for bound := answered; ; {
		last := -1
		for i, sp := range spans {
			if !sp.End.After(bound) && (last < 0 || sp.End.After(spans[last].End)) {
				last = i
			}
		}
		if last < 0 {
			return s
		}
		s.drawn += spans[last].Delay
		s.slept += spans[last].Slept
		s.local += spans[last].Upstream
		bound = spans[last].Start
	}
}

// TestWaitedFor: the split of an operation's time counts the requests it
// waited for one after another, not one sent beside them nor one it
// answered without.
func TestWaitedFor(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	span := func(from, to, delay int) inregion.Span {
		d := time.Duration(delay) * time.Millisecond
		return inregion.Span{Start: at(from), End: at(to), Delay: d, Slept: d, Upstream: time.Millisecond}
	}
	for _, c := range []struct {
		name     string
		spans    []inregion.Span
		answered int
		drawn    time.Duration
		local    time.Duration
	}{
		{"three in sequence", []inregion.Span{span(0, 10, 8), span(11, 20, 7), span(21, 30, 6)}, 31, 21 * time.Millisecond, 3 * time.Millisecond},
		{"read-ahead beside the transaction", []inregion.Span{span(0, 12, 10), span(0, 30, 27)}, 31, 27 * time.Millisecond, time.Millisecond},
		{"a repeat answered by the read-ahead", []inregion.Span{span(0, 12, 10), span(0, 30, 27)}, 13, 10 * time.Millisecond, time.Millisecond},
		{"the user's read, then both", []inregion.Span{span(0, 5, 4), span(6, 12, 5), span(6, 30, 20)}, 31, 24 * time.Millisecond, 2 * time.Millisecond},
		{"no request", nil, 5, 0, 0},
	} {
		s := waitedFor(c.spans, at(c.answered))
		if s.drawn != c.drawn || s.slept != c.drawn || s.local != c.local {
			t.Errorf("%s: drawn %v slept %v local %v; want %v, %v, %v", c.name, s.drawn, s.slept, s.local, c.drawn, c.drawn, c.local)
		}
	}
}

// partsP99 is the p99 of each part of the time on its own.
func partsP99(samples []sample) *results.InRegionSplit {
	parts := make([][]time.Duration, 5)
	for _, s := range samples {
		for i, v := range s.parts() {
			parts[i] = append(parts[i], v)
		}
	}
	q := make([]float64, len(parts))
	for i, p := range parts {
		slices.Sort(p)
		q[i] = ms(percentile(p, 0.99))
	}
	return &results.InRegionSplit{Ops: len(samples), TotalMs: q[0], DelayMs: q[1], OvershootMs: q[2], LocalMs: q[3], RestMs: q[4]}
}

// parts are the sample's total, the drawn delay, the sleep beyond it,
// DynamoDB Local's time, and the rest.
func (s sample) parts() [5]time.Duration {
	return [5]time.Duration{s.total, s.drawn, s.slept - s.drawn, s.local, s.total - s.slept - s.local}
}

// parallel runs f n times in all from workers concurrent clients; settle
// waits, untimed, for requests f answered without, so they count.
func parallel(p *inregion.Proxy, settle func(), kind, name string, n, workers int, want string, f func() string) results.InRegionCase {
	first := p.Stats()
	times, other, elapsed := fanOut(workers, want, func(w int, record func(time.Duration, string)) {
		for i := w; i < n; i += workers {
			t0 := time.Now()
			o := f()
			record(time.Since(t0), o)
		}
	})
	samples := make([]sample, len(times))
	for i, d := range times {
		samples[i] = sample{total: d}
	}
	settle()
	return summarizeCase(kind, name, workers, elapsed, p.Stats().Sub(first), other, samples)
}

func summarizeCase(kind, name string, workers int, elapsed time.Duration, st inregion.Stats, other map[string]int, samples []sample) results.InRegionCase {
	totals := make([]time.Duration, len(samples))
	for i, s := range samples {
		totals[i] = s.total
	}
	slices.Sort(totals)
	c := results.InRegionCase{Kind: kind, Name: name, Workers: workers, Ops: len(samples), Seconds: elapsed.Seconds(),
		P50ms: ms(percentile(totals, 0.50)), P99ms: ms(percentile(totals, 0.99)),
		Requests: st.Requests, Cancelled: st.Cancelled, Abandoned: st.Abandoned, RCU: st.Capacity.RCU, WCU: st.Capacity.WCU, Disagreed: st.Disagreed}
	if len(other) > 0 {
		c.Other = other
	}
	return c
}

// split is the mean of samples' times and of their parts.
func split(samples []sample) *results.InRegionSplit {
	if len(samples) == 0 {
		return nil
	}
	var sum [5]time.Duration
	for _, x := range samples {
		for i, v := range x.parts() {
			sum[i] += v
		}
	}
	n := time.Duration(len(samples))
	return &results.InRegionSplit{Ops: len(samples), TotalMs: ms(sum[0] / n), DelayMs: ms(sum[1] / n),
		OvershootMs: ms(sum[2] / n), LocalMs: ms(sum[3] / n), RestMs: ms(sum[4] / n)}
}
