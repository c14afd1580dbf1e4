// Package inregion models DynamoDB as a Lambda function in the table's
// region sees it, for the benchmarks of internal/bench: [Proxy] is a
// loopback HTTP proxy in front of DynamoDB Local that adds to each request
// a delay drawn from published in-region latency quantiles ([Model]), on
// top of DynamoDB Local's own time, and counts the requests and the
// capacity units they consume.
//
// The quantiles are Alex DeBrie's measurements (repository
// alexdebrie/dynamodb-performance-testing, directory
// put-batch-transaction-performance, README "Results"; methodology in his
// post "DynamoDB Transactions performance testing"): 400 invocations per
// operation of a Python Lambda function (boto3) in us-east-1 timing one call
// against an on-demand table whose items hold one string attribute. They
// are one person's run in one region on one day: the model shows the shape
// of in-region latency, not a promise of it.
package inregion

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// Quantiles are one operation's published latency quantiles, in ms. The
// minimum is taken as quantile 0 and the maximum as quantile 1.
type Quantiles struct {
	Name                         string
	Min, P50, P90, P95, P99, Max float64
}

// The published quantiles (README "Results" of
// alexdebrie/dynamodb-performance-testing/put-batch-transaction-performance;
// 400 invocations each, ms).
var (
	// PutItem: one item. The model also gives it to GetItem, Query,
	// UpdateItem and DeleteItem, for which the source has no figures: a
	// single-item request to one partition, as the put is.
	PutItem = Quantiles{Name: "PutItem", Min: 5.47, P50: 7.55, P90: 11.3, P95: 13.2, P99: 16.2, Max: 29}
	// TransactWrite5: TransactWriteItems of 5 puts. The model gives it to
	// every transaction that commits (the product's have 3 items; 5 is the
	// smallest the source measured) and to TransactGetItems.
	TransactWrite5 = Quantiles{Name: "TransactWriteItems, 5 items", Min: 19.4, P50: 25.3, P90: 30.7, P95: 36.4, P99: 92.5, Max: 218}
	// TransactWrite5Failed: TransactWriteItems of 5 puts, one of whose
	// conditions fails. The model gives it to every transaction DynamoDB
	// Local answers with TransactionCanceledException.
	TransactWrite5Failed = Quantiles{Name: "TransactWriteItems, 5 items, a condition fails", Min: 19.8, P50: 25.3, P90: 30.6, P95: 34.2, P99: 84.9, Max: 254}
	// TransactWrite25: TransactWriteItems of 25 puts; not used by the
	// model (no transaction here has more than 5 items), listed so that the
	// report shows what item count costs.
	TransactWrite25 = Quantiles{Name: "TransactWriteItems, 25 items", Min: 23.5, P50: 32.1, P90: 40.5, P95: 47.2, P99: 97.5, Max: 258}
)

// Published lists the quantiles of the source, in its order.
var Published = []Quantiles{PutItem, TransactWrite5, TransactWrite5Failed, TransactWrite25}

// At is the latency at quantile u (clamped to [0, 1]), interpolated
// linearly between the published points: the inverse of a piecewise
// linear distribution function through them.
func (q Quantiles) At(u float64) time.Duration {
	points := [...]struct{ u, ms float64 }{
		{0, q.Min}, {0.50, q.P50}, {0.90, q.P90}, {0.95, q.P95}, {0.99, q.P99}, {1, q.Max},
	}
	u = min(max(u, 0), 1)
	ms := q.Max
	for i := 1; i < len(points); i++ {
		if u <= points[i].u {
			a, b := points[i-1], points[i]
			ms = a.ms + (b.ms-a.ms)*(u-a.u)/(b.u-a.u)
			break
		}
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// Model draws each request's delay from the quantiles of its operation.
// The draws come from named streams, each a generator seeded with the
// model's seed, so that the i-th draw of every stream is the same: a
// benchmark that gives each of its cases a stream ([Model.Stream]) has the
// i-th operation of every case meet the same quantile (common random
// numbers), so that the cases differ by what they do and not by their
// luck, and a run with the same seed sees the same delays. A stream holds
// one sequence per kind of request, single-item requests and
// transactions, seeded apart: the i-th transaction of every case meets
// the same quantile whatever reads go beside it (a claim that sends a
// read with its transaction), and the read and the transaction of one
// operation draw independently, as two requests to DynamoDB do.
// Concurrent requests take the draws of the current stream in the order
// they arrive.
type Model struct {
	Seed    uint64
	mu      sync.Mutex
	current string
	streams map[streamKey]*rand.Rand
}

// streamKey names one sequence of draws: a stream and a kind of request.
type streamKey struct {
	stream      string
	transaction bool
}

// NewModel returns a model whose streams are seeded with seed.
func NewModel(seed uint64) *Model {
	return &Model{Seed: seed, streams: map[streamKey]*rand.Rand{}}
}

// Stream makes the draws that follow come from the stream named name,
// which continues where it stopped (a new name starts from the seed).
func (m *Model) Stream(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.current = name
}

// draw returns a uniform quantile in [0, 1) from the current stream's
// sequence of single-item requests.
func (m *Model) draw() float64 { return m.drawFor(false) }

// drawFor returns a uniform quantile in [0, 1) from the current stream's
// sequence of transactions (transaction true) or of single-item requests.
func (m *Model) drawFor(transaction bool) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := streamKey{m.current, transaction}
	r := m.streams[k]
	if r == nil {
		inc := m.Seed ^ 0x9e3779b97f4a7c15
		if transaction {
			inc ^= 0xbf58476d1ce4e5b9 // another sequence of the same seed
		}
		r = rand.New(rand.NewPCG(m.Seed, inc)) //nolint:gosec // reproducible draws, not secrets
		m.streams[k] = r
	}
	return r.Float64()
}

// isTransaction reports whether operation draws from the transactions'
// sequence: DynamoDB's transactions are the operations named Transact….
func isTransaction(operation string) bool {
	return strings.HasPrefix(operation, "Transact")
}

// Rule is the quantiles the model draws from for one operation.
type Rule struct {
	Operation string
	Done      Quantiles // when DynamoDB answers 200
	Cancelled Quantiles // when it answers TransactionCanceledException
}

// rules are the operations the model delays. Any other operation (table
// management, Scan, the batch operations) is forwarded without a delay.
var rules = []Rule{
	{"GetItem", PutItem, PutItem},
	{"Query", PutItem, PutItem},
	{"PutItem", PutItem, PutItem},
	{"UpdateItem", PutItem, PutItem},
	{"DeleteItem", PutItem, PutItem},
	{"TransactWriteItems", TransactWrite5, TransactWrite5Failed},
	{"TransactGetItems", TransactWrite5, TransactWrite5Failed},
}

// Rules lists the operations the model delays, with their quantiles.
func Rules() []Rule { return slices.Clone(rules) }

// rule is what the model knows of operation; ok is false for the
// operations it adds no delay to.
func rule(operation string) (r Rule, ok bool) {
	i := slices.IndexFunc(rules, func(r Rule) bool { return r.Operation == operation })
	if i < 0 {
		return Rule{}, false
	}
	return rules[i], true
}

// Sequence draws n latencies of the operations qs run one after another,
// one independent draw each, and returns them sorted: what the model says
// of a sequence without sending it.
func (m *Model) Sequence(n int, qs ...Quantiles) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		for _, q := range qs {
			out[i] += q.At(m.draw())
		}
	}
	slices.Sort(out)
	return out
}
