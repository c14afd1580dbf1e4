// Package dynamo is the production core.Store and core.Users on one
// DynamoDB table (docs/contract.md, Stored items): partition key pk, TTL on
// expires_at.
//
//   - transaction.go holds the one TransactWriteItems that claims an
//     operation key and puts the ticket, and its bounded retry; a
//     strongly consistent GetItem of the operation goes out beside it
//     (the read-ahead, on unless Options.NoReadAhead), so that a repeat
//     is answered at one read's latency: one request and one read unit
//     more per claim, new operation or repeat;
//   - errors.go is the one place SDK errors become domain errors, with
//     errors.As, never by message;
//   - items.go turns records into items and back;
//   - schema.go is the table's one Go definition (keys, TTL attribute,
//     the delivery-due index), which template.yaml is held to.
//
// The adapter talks to DynamoDB through Client, the narrow interface it
// uses, so tests can inject faults; correctness is proven on DynamoDB Local.
package dynamo
