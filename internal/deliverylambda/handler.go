// Package deliverylambda is the delivery function's handler: one entry
// point that takes a DynamoDB stream batch of the tickets table (and
// delivers the outbox records it announces: tickets, and their follow-ups'
// COMMENT# and CLOSE# items) or an EventBridge scheduled event (and sweeps
// the records that are due or whose lease ran out). The state machine,
// including the order of a ticket's follow-ups, is delivery.Engine; this
// package only feeds it.
//
// Lambda freezes the process once Handle returns, so Handle returns only
// after every delivery it started has recorded its step and logged its
// line: nothing is left to run between invocations
// (docs/lambda-runtime.md).
package deliverylambda

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/trace"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// DefaultConcurrency bounds the records of one stream batch delivered at
// once (a batch holds at most 10).
const DefaultConcurrency = 10

// DefaultSweepConcurrency bounds the tickets the scheduled sweep delivers
// at once, when SweepConcurrency is zero. 32 sends in flight drain about
// 1,300 tickets a minute from a helpdesk answering in 1.5 s, several times
// a realistic backlog, while a fast helpdesk's rate limit (answered 429
// with Retry-After, which the engine honours) rather than the sweep sets
// the pace, and the claims and records stay far below what the one
// partition of the delivery-due index takes (1,000 writes a second).
const DefaultSweepConcurrency = 32

// Handler delivers outbox records with Engine. Build it with Options.Handler;
// nothing of it changes after that.
type Handler struct {
	sweepConcurrency int // Options.SweepConcurrency
	// callTimeout is the destination's timeout per call (the engine's
	// CallTimeout; delivery.DefaultCallTimeout when zero): the sweep
	// claims no ticket once less than one lease plus one call timeout is
	// left before the invocation's deadline.
	callTimeout time.Duration

	engine *delivery.Engine
	worker *delivery.Worker // the scheduled sweep's; built at its first run
	once   sync.Once
	log    *slog.Logger
	rec    metrics.Recorder
}

// Options are everything a Handler is built from, for a composition root
// that builds it in one expression.
type Options struct {
	// Engine supplies the attempts, lease, call timeout and backoff; its
	// Store, Destination and Observer are set from the fields below.
	Engine      delivery.Engine
	Store       delivery.Outbox
	Destination delivery.Destination
	Log         *slog.Logger
	Metrics     metrics.Recorder
	// SweepConcurrency bounds the tickets the scheduled sweep delivers at
	// once (DefaultSweepConcurrency when zero).
	SweepConcurrency int
}

// Handler builds the handler o describes.
func (o Options) Handler() *Handler {
	e := o.Engine
	e.Store = o.Store
	e.Destination = o.Destination
	e.Observer = stepLog{log: o.Log, rec: o.Metrics}
	return &Handler{
		sweepConcurrency: o.SweepConcurrency,
		callTimeout:      e.CallTimeout,
		engine:           &e,
		log:              o.Log,
		rec:              o.Metrics,
	}
}

// SweepResult answers a scheduled event.
type SweepResult struct {
	Moved int `json:"moved"` // outbox records (tickets, follow-ups) moved on by one step
}

// scheduledEvent is the detail-type of EventBridge's scheduled events.
const scheduledEvent = "Scheduled Event"

// envelope is what tells the two events apart.
type envelope struct {
	DetailType string            `json:"detail-type"`
	Records    []json.RawMessage `json:"Records"`
}

// streamRecord is the part of an events.DynamoDBEventRecord the handler
// reads; the new image stays raw, for dynamo.PendingTicketID (which
// returns the outbox id of any pending record, a follow-up's included).
type streamRecord struct {
	EventName string `json:"eventName"`
	Change    struct {
		SequenceNumber string          `json:"SequenceNumber"`
		NewImage       json.RawMessage `json:"NewImage"`
	} `json:"dynamodb"`
}

// Handle is the function's entry point: a stream batch is answered with
// an events.DynamoDBEventResponse, a scheduled event with a SweepResult
// (or the error of a sweep that could not query its tickets); anything
// else is an error.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("delivery: event is not a JSON object: %w", err)
	}
	switch {
	case env.DetailType == scheduledEvent:
		ctx, span := tracing.Tracer().Start(ctx, tracing.SpanSweep)
		defer span.End()
		res, err := h.Sweep(ctx)
		if err != nil {
			return nil, err
		}
		return res, nil
	case env.Records != nil:
		ctx, span := tracing.Tracer().Start(ctx, tracing.SpanStreamBatch,
			trace.WithAttributes(tracing.AttrBatchSize.Int(len(env.Records))))
		defer span.End()
		return h.Stream(ctx, env.Records), nil
	}
	return nil, fmt.Errorf(`delivery: event is neither a DynamoDB stream batch ("Records") nor a scheduled event ("detail-type": %q)`, scheduledEvent)
}

// Sweep moves on the outbox records (tickets and follow-ups) that are due
// or whose lease ran out, up to SweepConcurrency at once, claiming the
// next as soon as one is done, for as long as the invocation has time left
// to finish a claim's calls and record them (timeForAnother). It ends
// early when nothing is due and nothing is in flight. A sweep whose query
// for due records failed returns that error, after the deliveries it
// started have ended, so the function's invocation fails and its Errors
// metric (and alarm) see a sweep that cannot find its records.
func (h *Handler) Sweep(ctx context.Context) (SweepResult, error) {
	h.once.Do(func() {
		h.worker = &delivery.Worker{Engine: h.engine, Concurrency: cmp.Or(h.sweepConcurrency, DefaultSweepConcurrency), Log: h.log}
	})
	moved, err := h.worker.Drain(ctx, func() bool { return h.timeForAnother(ctx) })
	res := SweepResult{Moved: moved}
	attrs := []slog.Attr{slog.Int("moved", res.Moved)}
	level := slog.LevelInfo
	if err != nil {
		err = fmt.Errorf("delivery sweep: %w", err)
		attrs = append(attrs, slog.String("error", err.Error()))
		level = slog.LevelError
	}
	// One count per run, on the index of live deliveries, after the
	// deliveries: what is left waiting.
	switch n, cerr := delivery.CountWaiting(ctx, h.engine.Store); {
	case cerr == nil:
		attrs = append(attrs, h.rec.TicketsWaiting(ctx, n))
	case !errors.Is(cerr, delivery.ErrNoCount):
		attrs = append(attrs, slog.String("count_error", cerr.Error()))
	}
	h.log.LogAttrs(ctx, level, "delivery sweep", attrs...)
	return res, err
}

// timeForAnother: a ticket claimed now can still finish its calls (each
// cut off within the lease) and have its outcome recorded before the
// invocation's deadline, with one call timeout to spare. Without a
// deadline there is always time.
func (h *Handler) timeForAnother(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > h.reserve()
}

// reserve is the time a claim needs before the deadline: one lease plus
// one call timeout.
func (h *Handler) reserve() time.Duration {
	return cmp.Or(h.engine.Lease, delivery.DefaultLease) + cmp.Or(h.callTimeout, delivery.DefaultCallTimeout)
}

// Stream delivers the pending outbox records a stream batch announces:
// tickets and follow-ups alike, side by side, since the order of a
// ticket's follow-ups is the engine's (a follow-up whose predecessors are
// not delivered yet waits, and the step that settles its predecessor moves
// on to it), not the stream's, which orders records per item only. Records
// of other items, or of records in another state, are ignored; a record
// that cannot be read or whose delivery step failed (other than the record
// being held by another worker, not due or final) is reported as a batch
// item failure, so Lambda retries it and, at the end, sends it to the
// dead-letter queue instead of dropping it.
func (h *Handler) Stream(ctx context.Context, records []json.RawMessage) events.DynamoDBEventResponse {
	failed := make([]bool, len(records))
	seqs := make([]string, len(records))
	slots := make(chan struct{}, DefaultConcurrency)
	var wg sync.WaitGroup
	for i, raw := range records {
		id, seq, err := pendingOf(raw)
		seqs[i] = seq
		switch {
		case err != nil:
			h.log.ErrorContext(ctx, "delivery: unreadable stream record",
				slog.String("sequence_number", seq), slog.String("error", err.Error()))
			failed[i] = true
			continue
		case id == "":
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			failed[i] = !h.deliver(ctx, id)
		})
	}
	wg.Wait()
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	for i, f := range failed {
		if f {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seqs[i]})
		}
	}
	return resp
}

// deliver runs one step for the outbox record id (and the steps it moves
// on to) and reports whether the stream record is done with (the step was
// recorded, or someone else has the record).
func (h *Handler) deliver(ctx context.Context, id string) bool {
	_, err := h.engine.Deliver(ctx, id)
	switch {
	case err == nil: // logged by stepLog.StepEnded
		return true
	case errors.Is(err, delivery.ErrNotClaimable), errors.Is(err, delivery.ErrLeaseLost):
		h.log.InfoContext(ctx, "delivery", slog.String("id", id), slog.String("kind", delivery.KindOfID(id)),
			slog.String("state", "not_claimed"), slog.String("reason", err.Error()))
		return true
	}
	h.log.ErrorContext(ctx, "delivery", slog.String("id", id), slog.String("kind", delivery.KindOfID(id)),
		slog.String("state", "step_failed"), slog.String("error", err.Error()))
	return false
}

// pendingOf returns the outbox id of a record whose new image is an outbox
// item pending delivery (a ticket's id, or a follow-up's item key such as
// "COMMENT#<comment_id>"), "" for any other record, and the record's
// sequence number. The event source mapping's filter already passes only
// such records; the check is made again because the function must not
// trust its input (a mapping deployed without the filter, an event replayed
// by hand), and an ignored record costs no DynamoDB call.
func pendingOf(raw json.RawMessage) (id, seq string, err error) {
	var r streamRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", "", fmt.Errorf("record: %w", err)
	}
	seq = r.Change.SequenceNumber
	if seq == "" {
		return "", "", errors.New("record has no dynamodb.SequenceNumber")
	}
	id, pending, err := dynamo.PendingTicketID(r.Change.NewImage)
	switch {
	case err != nil:
		return "", seq, fmt.Errorf("NewImage: %w", err)
	case !pending:
		return "", seq, nil // another item or state, a removal, or a stream without new images
	}
	return id, seq, nil
}

// stepLog logs one line per recorded step: the record's outbox id (id: a
// ticket's id, or a follow-up's "COMMENT#…" or "CLOSE#…"), its result, its
// attempts, and the step's metrics (deliveries_total by state and kind,
// and delivery_lag_seconds once delivered), so the metrics cost no extra
// line. The state and kind members are the metric's: state delivered,
// failed, unknown, retried for a record back to pending (due_at says until
// when), misconfigured for a step the destination refused for our
// credentials or URL, or waiting for a follow-up whose predecessors are not
// delivered yet; kind ticket, comment or close. Never credentials (the
// destination's errors carry none); the id is a member of the line, never
// a dimension.
type stepLog struct {
	log *slog.Logger
	rec metrics.Recorder
}

func (s stepLog) StepEnded(ctx context.Context, st delivery.Step) {
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.String("id", st.TicketID), slog.Int("attempts", st.Attempts))
	switch {
	case st.Result == delivery.ResultDelivered:
		attrs = append(attrs, slog.String("external_id", st.ExternalID))
	case st.Error != "":
		attrs = append(attrs, slog.String("error", st.Error))
	}
	if st.Result == delivery.ResultRetried {
		attrs = append(attrs, slog.Time("due_at", st.DueAt))
	}
	m := s.rec.Delivery(ctx, metrics.DeliveryStep{State: string(st.Result), Kind: st.Kind, Lag: st.Lag})
	if m.Value.Kind() != slog.KindGroup {
		// No EMF members (a recorder that keeps its own counts, or a
		// metrics_error): the line names the state and kind itself.
		attrs = append(attrs, slog.String("state", string(st.Result)), slog.String("kind", st.Kind))
	}
	if !m.Equal(slog.Attr{}) {
		attrs = append(attrs, m)
	}
	level := slog.LevelInfo
	switch st.Result {
	case delivery.ResultFailed, delivery.ResultUnknown, delivery.ResultMisconfigured:
		level = slog.LevelError
	}
	s.log.LogAttrs(ctx, level, "delivery", attrs...)
}
