package inregion

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startProxy serves a proxy to upstream adding model's delay (nil: none)
// for the rest of the test, and returns it and its URL.
func startProxy(t *testing.T, upstream string, model *Model) (*Proxy, string) {
	t.Helper()
	p, err := NewProxy(upstream, model)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// Through the proxy without a model, DynamoDB Local answers as it does
// directly; the proxy counts every request by operation and computes its
// capacity by AWS's billing rules, which agree with the ConsumedCapacity
// DynamoDB Local reports for single-item operations. A cancelled
// transaction has no reported figure and is charged as the rules say.
func TestProxyCountsAndCapacity(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	p, url := startProxy(t, endpoint, nil)
	c := testenv.DynamoClient(t, url)
	ctx := context.Background()
	total := types.ReturnConsumedCapacityTotal
	big := strings.Repeat("x", 1500) // a 1.5 KB item: 2 WCU, 1 RCU

	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, ReturnConsumedCapacity: total,
		Item: map[string]types.AttributeValue{"pk": testenv.S("a"), "v": testenv.S(big)}}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "missing"} {
		if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total,
			Key: map[string]types.AttributeValue{"pk": testenv.S(key)}}); err != nil {
			t.Fatal(err)
		}
	}
	tx := func(first string) error {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ReturnConsumedCapacity: total, TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &table, Item: map[string]types.AttributeValue{"pk": testenv.S(first), "v": testenv.S(big)},
				ConditionExpression: aws.String("attribute_not_exists(pk)"), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{Put: &types.Put{TableName: &table, Item: map[string]types.AttributeValue{"pk": testenv.S(first + "-ticket")},
				ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		}})
		return err
	}
	if err := tx("b"); err != nil {
		t.Fatal(err)
	}
	var cancelled *types.TransactionCanceledException
	if err := tx("a"); !errors.As(err, &cancelled) {
		t.Fatalf("transaction on a held key: %v, want TransactionCanceledException", err)
	}
	if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, ReturnConsumedCapacity: total, ReturnValues: types.ReturnValueAllNew,
		Key: map[string]types.AttributeValue{"pk": testenv.S("b")}, UpdateExpression: aws.String("SET w = :w"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": testenv.S("done")}}); err != nil {
		t.Fatal(err)
	}

	st := p.Stats()
	t.Logf("stats: %+v", st)
	want := map[string]int{"PutItem": 1, "GetItem": 2, "TransactWriteItems": 2, "UpdateItem": 1}
	for op, n := range want {
		if st.Requests[op] != n {
			t.Errorf("%s requests = %d, want %d (all: %v)", op, st.Requests[op], n, st.Requests)
		}
	}
	if st.Total() != 6 || st.Cancelled != 1 {
		t.Errorf("total %d, cancelled %d; want 6 and 1", st.Total(), st.Cancelled)
	}
	// DynamoDB Local's figure for a transaction is not always AWS's
	// documented one (Developer Guide, "Capacity management for
	// transactions": three 500-byte items written in one transaction take 6
	// WCU, 2 per item): 2.9.30 reports 4 WCU for a transaction of one small
	// item, where the rule gives 2 (TestInRegion's capacity checks show it
	// in docs/benchmarks.md). The single-item operations agree with the
	// rules.
	if st.Agreed < 4 || st.Computed != 6 {
		t.Errorf("agreed %d, computed %d; want the 4 single-item requests agreeing, all 6 computed", st.Agreed, st.Computed)
	}
	for _, d := range st.Disagreed {
		if !strings.HasPrefix(d, "TransactWriteItems: ") {
			t.Errorf("the rules disagree with DynamoDB Local on a single-item operation: %s", d)
		}
		t.Logf("%s", d)
	}
	// PutItem 2 + transaction 2×(2+1) + cancelled 2×(2+1) + update 2 WCU;
	// GetItem 1 + 1 (a miss still costs a strongly consistent read).
	if st.Capacity != (Capacity{RCU: 2, WCU: 2 + 6 + 6 + 2}) {
		t.Errorf("capacity = %+v, want 2 RCU and 16 WCU", st.Capacity)
	}
}

// The proxy adds the model's delay at one drawn quantile per request: the
// put's figures for a GetItem, the 5-item transaction's for a committed
// transaction and the failed-condition ones for a cancelled one; table
// management is forwarded without delay. Upstream is a fake DynamoDB that
// answers each operation as the test says; the delays are checked against
// a second model with the same seed, not against a clock.
func TestProxyDelaysByOperationAndOutcome(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if strings.Contains(string(body), `"held"`) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","CancellationReasons":[{"Code":"ConditionalCheckFailed"}]}`)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer upstream.Close()
	const seed = 42
	p, url := startProxy(t, upstream.URL, NewModel(seed))
	send := func(op, body string) int {
		req, _ := http.NewRequest(http.MethodPost, url+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	twin := NewModel(seed)
	var want time.Duration
	for _, c := range []struct {
		op, body string
		q        *Quantiles
		status   int
	}{
		{"GetItem", `{"Key":{"pk":{"S":"a"}}}`, &PutItem, 200},
		{"TransactWriteItems", `{"TransactItems":[{"Put":{"Item":{"pk":{"S":"new"}}}}]}`, &TransactWrite5, 200},
		{"TransactWriteItems", `{"TransactItems":[{"Put":{"Item":{"pk":{"S":"held"}}}}]}`, &TransactWrite5Failed, 400},
		{"DescribeTable", `{}`, nil, 200},
	} {
		before := p.Stats()
		sent := time.Now()
		if got := send(c.op, c.body); got != c.status {
			t.Fatalf("%s: status %d, want %d", c.op, got, c.status)
		}
		answered := time.Now()
		var d time.Duration
		if c.q != nil {
			u := twin.drawFor(isTransaction(c.op))
			d = c.q.At(u)
			// Half on the way there at the committed figure, the rest on
			// the way back: the total is the outcome's figure unless the
			// first half already exceeds it.
			if first := TransactWrite5.At(u) / 2; c.q == &TransactWrite5Failed && first > d {
				d = first
			}
		}
		want += d
		got := p.Stats().Sub(before)
		if got.Delay != d {
			t.Errorf("%s: delay %v, want %v", c.op, got.Delay, d)
		}
		if got.Slept < d {
			t.Errorf("%s: slept %v, less than the delay %v", c.op, got.Slept, d)
		}
		// Its span is the request's own: its delay, its sleep and
		// DynamoDB Local's time, within the time the client waited.
		spans := p.Spans(before.Total())
		if len(spans) != 1 || spans[0].Delay != got.Delay || spans[0].Slept != got.Slept || spans[0].Upstream != got.Upstream ||
			spans[0].Start.Before(sent) || spans[0].End.After(answered) || spans[0].End.Sub(spans[0].Start) < spans[0].Slept+spans[0].Upstream {
			t.Errorf("%s: spans %+v; want one, of delay %v slept %v upstream %v, within the call", c.op, spans, got.Delay, got.Slept, got.Upstream)
		}
	}
	st := p.Stats()
	if st.Delay != want || st.Total() != 4 || st.Cancelled != 1 || st.Requests["TransactWriteItems"] != 2 {
		t.Errorf("stats %+v; want delay %v, 4 requests, 1 cancelled", st, want)
	}
	if n := len(p.Spans(0)); n != st.Total() {
		t.Errorf("%d spans for %d requests", n, st.Total())
	}
}

func TestNewProxyRefusesABadEndpoint(t *testing.T) {
	for _, ep := range []string{"", "127.0.0.1:8000", "https://127.0.0.1:8000", "http://"} {
		if _, err := NewProxy(ep, nil); err == nil {
			t.Errorf("NewProxy(%q): no error", ep)
		}
	}
}

func TestOperation(t *testing.T) {
	for in, want := range map[string]string{"DynamoDB_20120810.GetItem": "GetItem", "": "unknown", "DynamoDB_20120810.": "unknown"} {
		if got := Operation(in); got != want {
			t.Errorf("Operation(%q) = %q, want %q", in, got, want)
		}
	}
}

// A request its client abandons during the delay still reaches the table
// and is counted, as a request sent to DynamoDB is executed whether or not
// its client waits for the answer (a store that answers a repeat from a
// parallel read and drops the transaction still pays for the transaction).
func TestProxyCarriesAnAbandonedRequest(t *testing.T) {
	var hits atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, `{}`)
	}))
	defer upstream.Close()
	p, err := NewProxy(upstream.URL, NewModel(1))
	if err != nil {
		t.Fatal(err)
	}
	// The client gives up once the whole request has arrived, and the proxy
	// starts only after the server has seen it go: whatever the machine's
	// load, the request reaches the proxy and its client is gone.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the request: %v", err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		cancel()
		// The server sees the client go (it ends r's context) before the
		// proxy starts, so the proxy's own check of it cannot race.
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
			t.Error("the server never saw the client go")
		}
		p.ServeHTTP(w, r)
	}))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/", strings.NewReader(`{}`))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.TransactWriteItems")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("the client got an answer after giving up; want it gone first")
	}
	// The proxy finishes the request after the client has gone; the wait is
	// bounded so that a proxy that drops it fails instead of hanging.
	for deadline := time.Now().Add(10 * time.Second); p.Stats().Total() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if st := p.Stats(); hits.Load() != 1 || st.Requests["TransactWriteItems"] != 1 || st.Abandoned != 1 {
		t.Errorf("upstream saw %d requests; stats %+v; want 1 request, counted and abandoned", hits.Load(), st)
	}
}

// Add and Sub are inverse: what two spans counted together, less the
// first, is the second.
func TestStatsAddSub(t *testing.T) {
	a := Stats{Requests: map[string]int{"GetItem": 2}, Cancelled: 1, Capacity: Capacity{RCU: 1}, Computed: 2, Agreed: 1,
		Disagreed: []string{"x"}, Delay: time.Millisecond, Slept: 2 * time.Millisecond, Upstream: 3 * time.Millisecond}
	b := Stats{Requests: map[string]int{"GetItem": 1, "PutItem": 1}, Abandoned: 1, Capacity: Capacity{RCU: 0.5, WCU: 1}, Computed: 2, Agreed: 2,
		Disagreed: []string{"y"}, Delay: 4 * time.Millisecond, Slept: 5 * time.Millisecond, Upstream: 6 * time.Millisecond}
	sum := a.Add(b)
	if sum.Total() != 4 || sum.Capacity != (Capacity{RCU: 1.5, WCU: 1}) || len(sum.Disagreed) != 2 || sum.Delay != 5*time.Millisecond {
		t.Errorf("a.Add(b) = %+v", sum)
	}
	if got := sum.Sub(a); fmt.Sprint(got) != fmt.Sprint(b) {
		t.Errorf("a.Add(b).Sub(a) = %+v, want %+v", got, b)
	}
	if a.Requests["GetItem"] != 2 || len(a.Disagreed) != 1 {
		t.Errorf("Add changed its receiver: %+v", a)
	}
}
