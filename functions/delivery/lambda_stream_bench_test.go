package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/benchtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/streamtest"
)

// lambdaPollInterval is how often Lambda's event source mapping polls a
// DynamoDB stream's shard: about four times a second.
const lambdaPollInterval = 250 * time.Millisecond

// lambdaMaxRecords is the most records one GetRecords call returns.
const lambdaMaxRecords = 1000

// burstTickets is the size of the burst benchmark's burst.
const burstTickets = 1000

// burstCommitters is how many callers commit the burst side by side.
const burstCommitters = 8

// esmSettings are the stream event source mapping's settings, as
// template.yaml sets them.
type esmSettings struct {
	batchSize int
	parallel  int           // ParallelizationFactor: batches of one shard at once
	window    time.Duration // MaximumBatchingWindowInSeconds
}

// templateESM reads the TicketStream event's settings from template.yaml.
func templateESM(b testing.TB) esmSettings {
	b.Helper()
	num := func(key string) int {
		v := plainAt(b, "Resources", "DeliveryFunction", "Properties", "Events", "TicketStream", "Properties", key)
		n, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil {
			b.Fatalf("template.yaml: TicketStream %s = %v: %v", key, v, err)
		}
		return n
	}
	return esmSettings{batchSize: num("BatchSize"), parallel: num("ParallelizationFactor"),
		window: time.Duration(num("MaximumBatchingWindowInSeconds")) * time.Second}
}

// BenchmarkDeliveryStreamLambda is the stream path as a deployed stack
// sees it: callbacks commit b.N tickets back to back on DynamoDB Local
// (stream enabled) while a poller does what Lambda's event source mapping
// does with template.yaml's settings (lambdaPoller), handing each batch to
// the delivery function's handler, which sends to the fake helpdesk
// answering every create in 50 ms. Reports tickets delivered per second,
// the latency from commit to delivered (p50, p99) and helpdesk calls per
// ticket.
func BenchmarkDeliveryStreamLambda(b *testing.B) {
	s := streamUnderLambda(b, b.N, 1)
	s.report(b)
}

// BenchmarkDeliveryStreamBurst: burstTickets tickets committed at once
// (burstCommitters callers side by side, as after an incident), delivered
// through the stream as BenchmarkDeliveryStreamLambda does. Reports the
// drain time (from the first commit to the last ticket delivered), how
// long the commits themselves took, the latency from commit to delivered
// (p50, p99) and helpdesk calls per ticket. Each iteration is one burst on a fresh table; run it with
// -benchtime 1x.
func BenchmarkDeliveryStreamBurst(b *testing.B) {
	var drain, commit time.Duration
	var all streamRun
	for range b.N {
		s := streamUnderLambda(b, burstTickets, burstCommitters)
		drain += s.drain
		commit += s.commit
		all.merge(s)
	}
	all.report(b)
	b.ReportMetric(drain.Seconds()/float64(b.N), "drain-s")
	b.ReportMetric(commit.Seconds()/float64(b.N), "commit-s")
	b.ReportMetric(burstTickets, "tickets/burst")
}

// streamRun is what one run of streamUnderLambda measured.
type streamRun struct {
	tickets   int
	latencies []time.Duration // commit to delivered, one per ticket
	elapsed   time.Duration   // first commit to last delivered, summed over runs
	drain     time.Duration   // first commit to last delivered
	commit    time.Duration   // first commit to last commit
	calls     int             // helpdesk calls made
}

func (s *streamRun) merge(o streamRun) {
	s.tickets += o.tickets
	s.latencies = append(s.latencies, o.latencies...)
	s.elapsed += o.elapsed
	s.calls += o.calls
}

func (s streamRun) report(b *testing.B) {
	benchtest.ReportFigures(b, s.tickets, s.elapsed, s.latencies, s.calls)
}

// streamUnderLambda commits n tickets with committers callers side by side
// on a fresh stream-enabled table, delivers them through lambdaPoller and
// the delivery handler (as deployed: the default lease and the Zendesk
// adapter's default timeout), and checks that the helpdesk holds each
// exactly once. The benchmark's timer runs from the first commit to the
// last ticket delivered.
func streamUnderLambda(b *testing.B, n, committers int) streamRun {
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newStreamRig(b)
	endpoint, streamARN, store, fake, timed, h := r.endpoint, r.streamARN, r.store, r.fake, r.timed, r.h
	var seq atomic.Int64
	run := time.Now().UnixNano()
	svc := deliverytest.NewService(store, true, func() string { return fmt.Sprintf("sl-%d-%d", run, seq.Add(1)) })

	pollErr := make(chan error, 1)
	go func() { pollErr <- lambdaPoller(ctx, endpoint, streamARN, h, templateESM(b)) }()

	var mu sync.Mutex
	committed := make(map[string]time.Time, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	b.StartTimer()
	for range committers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				out := createTicket(ctx, svc, fmt.Sprintf("r%d-%d", run, i))
				mu.Lock()
				committed[coretest.TicketID(out)] = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	committedAll := time.Since(start)
	for deadline := time.Now().Add(2 * time.Minute); timed.Delivered() < n; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-pollErr:
			b.Fatalf("stream poller: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d delivered after two minutes", timed.Delivered(), n)
		}
	}
	b.StopTimer()
	cancel()
	if err := <-pollErr; err != nil {
		b.Fatalf("stream poller: %v", err)
	}
	if fake.Total() != n {
		b.Fatalf("the helpdesk holds %d tickets, want %d", fake.Total(), n)
	}
	for id := range committed {
		if fake.Held(id) != 1 {
			b.Fatalf("the helpdesk holds %d tickets under %s, want 1", fake.Held(id), id)
		}
	}
	lat, last := timed.Latencies(committed)
	return streamRun{tickets: n, latencies: lat, elapsed: last.Sub(start), drain: last.Sub(start), commit: committedAll,
		calls: fake.Requests(fakehelpdesk.ZendeskCreate) + fake.Requests(fakehelpdesk.ZendeskLookup)}
}

// lambdaPoller does for every shard of the stream what Lambda's event
// source mapping does, until ctx ends: it polls the shard every
// lambdaPollInterval (GetRecords, up to lambdaMaxRecords records), keeps
// the records that pass the template's filter, and spreads them over
// es.parallel lanes by partition key, so that one key's records stay in
// order in one lane. Each lane invokes the handler with one batch at a
// time (up to es.batchSize records, as soon as it has records, or once it
// has waited es.window for a batch to fill), so up to es.parallel batches
// of a shard run at once. A batch with item failures is an error: in this
// benchmark every ticket is delivered at the first try.
func lambdaPoller(ctx context.Context, endpoint, streamARN string, h *deliverylambda.Handler, es esmSettings) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lanes := make([]chan events.DynamoDBEventRecord, es.parallel)
	var wg sync.WaitGroup
	for i := range lanes {
		lanes[i] = make(chan events.DynamoDBEventRecord, lambdaMaxRecords)
		wg.Go(func() { lane(ctx, cancel, lanes[i], h, es) })
	}
	defer wg.Wait()
	sc := streamtest.Client(endpoint)
	iters := map[string]*string{}
	tick := time.NewTicker(lambdaPollInterval)
	defer tick.Stop()
	for {
		if err := openShards(ctx, sc, streamARN, iters); err != nil {
			return settle(ctx, err)
		}
		for id, iter := range iters {
			if iter == nil {
				continue
			}
			out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(lambdaMaxRecords)})
			if err != nil {
				return settle(ctx, err)
			}
			iters[id] = out.NextShardIterator
			for _, r := range out.Records {
				rec := toLambda(r, streamARN)
				if !streamtest.PassesFilter(rec) {
					continue
				}
				select {
				case lanes[laneOf(rec, es.parallel)] <- rec:
				case <-ctx.Done():
					return settle(ctx, nil)
				}
			}
		}
		select {
		case <-ctx.Done():
			return settle(ctx, nil)
		case <-tick.C:
		}
	}
}

// settle is the poller's result once ctx ended or a call failed: a lane's
// failure if there was one, else err unless ctx was cancelled.
func settle(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return cause
	}
	return ignoreCancel(ctx, err)
}

// laneOf is the lane of a record: its partition key's hash, as the event
// source mapping keeps one key's records in order.
func laneOf(r events.DynamoDBEventRecord, lanes int) int {
	h := fnv.New32a()
	pk := r.Change.Keys[dynamo.PartitionKey]
	_, _ = h.Write([]byte(pk.String()))
	return int(h.Sum32() % uint32(lanes))
}

// lane invokes h with the records of in, one batch at a time, until ctx
// ends; a batch that cannot be built or has item failures cancels ctx
// with the cause.
func lane(ctx context.Context, cancel context.CancelCauseFunc, in <-chan events.DynamoDBEventRecord, h *deliverylambda.Handler, es esmSettings) {
	for {
		var batch []events.DynamoDBEventRecord
		select {
		case <-ctx.Done():
			return
		case r := <-in:
			batch = append(batch, r)
		}
		var window <-chan time.Time // nil: take what is there, wait for nothing
		if es.window > 0 {
			window = time.After(es.window)
		}
	fill:
		for len(batch) < es.batchSize {
			if window == nil {
				select {
				case r := <-in:
					batch = append(batch, r)
				default:
					break fill
				}
				continue
			}
			select {
			case r := <-in:
				batch = append(batch, r)
			case <-window:
				break fill
			case <-ctx.Done():
				return
			}
		}
		raw, err := json.Marshal(events.DynamoDBEvent{Records: batch})
		if err != nil {
			cancel(err)
			return
		}
		res, err := h.Handle(ctx, raw)
		if err != nil {
			cancel(err)
			return
		}
		if f := res.(events.DynamoDBEventResponse).BatchItemFailures; len(f) > 0 && ctx.Err() == nil {
			cancel(fmt.Errorf("batch item failures %v", f))
			return
		}
	}
}

// createTicket makes one create_ticket callback under requestID, again
// with the same request id while the answer is busy or in progress, as a
// caller retries (a loaded DynamoDB Local can time a commit out); it
// panics on any other answer than created or deduplicated. It runs on the
// committers' goroutines, where Fatal may not be called.
func createTicket(ctx context.Context, svc *core.Service, requestID string) core.Outcome {
	for range 50 {
		out := svc.Answer(ctx, core.Call{Function: core.CreateTicket, Content: json.RawMessage(`{"title":"bench"}`),
			ExternalUserID: deliverytest.User, RequestID: requestID})
		switch out.Kind {
		case core.KindCreated, core.KindDuplicate:
			return out
		case core.KindBusy, core.KindInProgress:
			time.Sleep(100 * time.Millisecond)
			continue
		}
		panic(fmt.Sprintf("create: %v %v", out.Kind, out.Err))
	}
	panic("create: still busy after 50 tries")
}
