package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// Claims implements core.Store: the claims of package idem's DynamoDB
// store, with the product's writes as its items.
func (s *Store) Claims() idem.Store[core.Writes] { return claims{s} }

// claims is the Store's idem.Store: the one place its claims are made and
// answered.
type claims struct{ s *Store }

// Claim implements idem.Store through package idem's DynamoDB store: ONE
// TransactWriteItems puts the record (completed, with its result) if the
// key is free, checks that the key the call has under the other key
// policy (rec.AltKey) holds no live operation of the call's tenant and
// arguments (one that does answers the call, as a repeat), and puts each
// ticket, with its delivery record, if its id is new. Either all items
// are written or none. The answer is dynamostore's
// as it is: a ticket id that exists refuses the claim (idem.Refused).
//
// A strongly consistent GetItem of the operation goes out beside the
// transaction (unless Options.NoReadAhead), so a repeat is answered by
// the read, at one read's latency, when it finds a live operation other
// than the one this call writes and not about to expire; otherwise the
// transaction answers, its failed claim carrying the stored operation. A
// new operation or a repeat thus costs two requests and waits for one
// round trip. A TransactionConflict is retried with full jitter, at most
// Options.ConflictRetries times, then answered busy.
func (c claims) Claim(ctx context.Context, rec idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	s := c.s
	items := make([]types.TransactWriteItem, 0, len(w.Tickets))
	for _, t := range w.Tickets {
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:           &s.table,
			Item:                withTraceparent(ticketItem(t), t, tracing.Traceparent(ctx)),
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}})
	}
	return s.claims.Claim(ctx, rec, items, now)
}
