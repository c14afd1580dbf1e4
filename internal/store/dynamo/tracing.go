package dynamo

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// attrTraceparent is the ticket item's W3C traceparent of the span that
// created it (docs/contract.md, Stored items), written in the ticket's
// Put, so in the same transaction. It costs the item 66 bytes: the
// 11-byte name and the 55-byte value ("00-" + 32 hex trace id + "-" + 16
// hex span id + "-" + 2 hex flags). Only a ticket with a delivery record
// carries it: the delivery is what links back to it.
const attrTraceparent = "traceparent"

// ReadAheadPrefix is the partition-key prefix of the items the claim's
// read-ahead GetItem reads (the operations): the tracing of the AWS SDK
// marks a GetItem of such an item as the read-ahead.
const ReadAheadPrefix = prefixOperation

// withTraceparent adds traceparent to item when t has a delivery record
// and traceparent is set.
func withTraceparent(item map[string]types.AttributeValue, t core.Ticket, traceparent string) map[string]types.AttributeValue {
	if t.Delivery != nil && traceparent != "" {
		item[attrTraceparent] = stringAttr(traceparent)
	}
	return item
}
