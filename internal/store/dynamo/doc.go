// Package dynamo is the production core.Store and core.Users on one
// DynamoDB table (docs/contract.md, Stored items): partition key pk, TTL on
// expires_at.
//
//   - store.go claims through package idem's DynamoDB store
//     (idem/dynamostore): the one TransactWriteItems that claims an
//     operation key and puts the ticket, its bounded retry, and a
//     strongly consistent GetItem of the operation beside it (the
//     read-ahead, on unless Options.NoReadAhead), so that a repeat is
//     answered at one read's latency: one request and one read unit more
//     per claim, new operation or repeat; SDK errors become domain errors
//     in dynamostore.MapError, with errors.As, never by message;
//   - items.go turns records into items and back;
//   - writes.go executes core.Writes.Items generically (each write an
//     action of the claim's transaction, after the tickets'), reads items
//     back (Items, by strongly consistent BatchGetItem) and orders a
//     ticket's follow-ups (delivery.Sequencer);
//   - delivery.go is the outbox: the delivery records and their states,
//     a ticket's on its item (outbox id its bare id) and an effect's on
//     the effect's item (outbox id the item's key);
//   - schema.go is the table's one Go definition (keys, TTL attribute,
//     the delivery-due index), which template.yaml is held to.
//
// The adapter talks to DynamoDB through Client, the narrow interface it
// uses, so tests can inject faults; correctness is proven on DynamoDB Local.
package dynamo
