package delivery

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// startTicketSpan starts the span of one ticket's step, a child of the
// batch or sweep in ctx; the link to the span that created the ticket is
// added once the claim has read its traceparent (tracing.LinkTicket).
func startTicketSpan(ctx context.Context, id string) (context.Context, trace.Span) {
	return tracing.Tracer().Start(ctx, tracing.SpanDelivery, trace.WithAttributes(tracing.AttrTicketID.String(id)))
}

// endTicketSpan ends a ticket's span with the state recorded, or the
// step's error (not its text: a store error may quote an item).
func endTicketSpan(span trace.Span, u Update, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "step not recorded")
	} else if span.IsRecording() {
		span.SetAttributes(tracing.AttrState.String(string(u.State)), tracing.AttrAttempt.Int(u.Attempts))
	}
	span.End()
}

// linkClaimed links the ticket's span in ctx to the span that created the
// ticket, from the traceparent its record carries.
func linkClaimed(ctx context.Context, c Claimed) {
	tracing.LinkTicket(trace.SpanFromContext(ctx), c.Before.Traceparent)
}

// sendContext is ctx for send number n, which the helpdesk call's span
// carries.
func sendContext(ctx context.Context, n int) context.Context { return tracing.WithAttempt(ctx, n) }
