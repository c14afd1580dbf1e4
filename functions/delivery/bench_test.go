package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/streamtest"
)

// BenchmarkDeliveryStreamPath: callbacks commit tickets on DynamoDB Local
// (stream enabled) while a poller does what Lambda's event source mapping
// does for one shard (GetRecords, the template's filter, batches of up to
// 10, one batch at a time) and hands each batch to the delivery handler,
// which sends to the fake helpdesk answering every create in 50 ms.
// Reports tickets delivered per second, the latency from commit to
// delivered (p50, p99) and helpdesk calls per ticket. Lambda's own polling
// interval (up to a second in AWS) is not part of it.
func BenchmarkDeliveryStreamPath(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newStreamRig(b)
	endpoint, streamARN, store, fake, timed, h := r.endpoint, r.streamARN, r.store, r.fake, r.timed, r.h

	n := 0
	svc := deliverytest.NewService(store, true, func() string { n++; return fmt.Sprintf("sb-%d-%d", time.Now().UnixNano(), n) })

	pollErr := make(chan error, 1)
	go func() { pollErr <- pollStream(ctx, endpoint, streamARN, h) }()

	committed := map[string]time.Time{}
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		out := svc.Answer(ctx, core.Call{Function: core.CreateTicket, Content: json.RawMessage(`{"title":"bench"}`),
			ExternalUserID: deliverytest.User, RequestID: fmt.Sprintf("r%d-%d", start.UnixNano(), i)})
		if out.Kind != core.KindCreated {
			b.Fatalf("create: %v %v", out.Kind, out.Err)
		}
		committed[coretest.TicketID(out)] = time.Now()
	}
	for deadline := time.Now().Add(2 * time.Minute); timed.Delivered() < b.N; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-pollErr:
			b.Fatalf("stream poller: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d delivered after two minutes", timed.Delivered(), b.N)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if fake.Total() != b.N {
		b.Fatalf("helpdesk holds %d tickets, want %d", fake.Total(), b.N)
	}
	timed.Report(b, committed, elapsed, fake.Requests(fakehelpdesk.ZendeskCreate)+fake.Requests(fakehelpdesk.ZendeskLookup))
}

// pollStream follows every shard of the stream from its start until ctx
// ends, handing the filtered records to h in batches of up to 10.
func pollStream(ctx context.Context, endpoint, streamARN string, h *deliverylambda.Handler) error {
	sc := streamtest.Client(endpoint)
	iters := map[string]*string{}
	for ctx.Err() == nil {
		if err := openShards(ctx, sc, streamARN, iters); err != nil {
			return ignoreCancel(ctx, err)
		}
		idle := true
		for id, iter := range iters {
			if iter == nil {
				continue
			}
			out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10)})
			if err != nil {
				return ignoreCancel(ctx, err)
			}
			iters[id] = out.NextShardIterator
			var ev events.DynamoDBEvent
			for _, r := range out.Records {
				if rec := toLambda(r, streamARN); streamtest.PassesFilter(rec) {
					ev.Records = append(ev.Records, rec)
				}
			}
			if len(out.Records) > 0 {
				idle = false
			}
			if len(ev.Records) == 0 {
				continue
			}
			raw, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			res, err := h.Handle(ctx, raw)
			if err != nil {
				return ignoreCancel(ctx, err)
			}
			if f := res.(events.DynamoDBEventResponse).BatchItemFailures; len(f) > 0 && ctx.Err() == nil {
				return fmt.Errorf("batch item failures %v", f)
			}
		}
		if idle {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

func ignoreCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// toLambda is streamtest.Record without a testing.T.
func toLambda(r streamtypes.Record, streamARN string) events.DynamoDBEventRecord {
	return streamtest.Record(panicTB{}, r, streamARN)
}

// panicTB turns a conversion failure of the poller into a panic: it runs
// outside the benchmark's goroutine, where Fatal may not be called.
type panicTB struct{ testing.TB }

func (panicTB) Helper()                      {}
func (panicTB) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (panicTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// openShards adds to iters an iterator from the start of each shard of the
// stream that has none yet.
func openShards(ctx context.Context, sc *dynamodbstreams.Client, streamARN string, iters map[string]*string) error {
	desc, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &streamARN})
	if err != nil {
		return err
	}
	for _, sh := range desc.StreamDescription.Shards {
		id := aws.ToString(sh.ShardId)
		if _, ok := iters[id]; ok {
			continue
		}
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: &streamARN,
			ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return err
		}
		iters[id] = it.ShardIterator
	}
	return nil
}
