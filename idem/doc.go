// Package idem makes a tool call, or any request handler, idempotent: a
// retried call runs its effect once, and every repeat receives the stored
// result byte for byte.
//
// # The key
//
// An operation is named by a key the application mints once per request
// (Call.RequestID: the same for every retry, new for each new request),
// within a tenant (Call.Tenant, taken from the caller's authenticated
// identity), for an operation whose name the caller chooses and keeps
// (Call.Function, e.g. "create_order": never derived from a Go
// identifier, so no refactor changes a key). The key is the lower-case
// hex SHA-256 of the RFC 8785 text of the string array
//
//	[tenant, request_id, function, canonical]
//
// where canonical is the RFC 8785 (JSON Canonicalization Scheme) text of
// the call's arguments: member order and white space do not matter. For
// an array of strings that text is byte-for-byte what JavaScript's
// JSON.stringify writes, so a server in another language can compute the
// same keys. Under PolicyRequest the arguments are left out of the key
// and their SHA-256 (the fingerprint) is stored: a repeat with other
// arguments is a Mismatch instead of a new operation. A call without a
// request id is Invalid, never silently not idempotent.
//
// # The claim
//
// Guard.Do derives the key, asks the caller's Effect for the result and
// the caller's own writes, and hands both to a Store, which commits the
// record of the key (with the result) and the caller's writes in ONE
// transaction, or nothing:
//
//   - dynamostore: one DynamoDB TransactWriteItems holding the claim (a
//     Put conditioned on the key being free) and the caller's Put,
//     Update, Delete and ConditionCheck items, at most
//     dynamostore.MaxWrites of them (DynamoDB's limit is 100 items per
//     transaction, the claim included). One request per new operation
//     and one per repeat: the failed condition returns the stored record.
//     The result is stored as a string attribute, so it must be valid
//     UTF-8 text (JSON text is) and keep the record within DynamoDB's
//     400 KB item size; otherwise the call is Failed with nothing written.
//   - sqlitestore: the claim and the caller's statements in one BEGIN
//     IMMEDIATE transaction.
//   - memstore: in memory, for tests.
//
// # Outcomes
//
// Do returns an Outcome whose Status is one of:
//
//   - Created: the key was free; record, result and writes committed.
//   - Replayed: a live completed record holds the key; its result, byte
//     for byte; nothing written.
//   - InProgress: a live pending record holds the key. It is never taken
//     over while it lives, whatever time has passed since it was written.
//   - Busy: the outcome is unknown (contention, throttling, a timeout, a
//     cancelled context): repeat with the same data; the key resolves it.
//   - Conflict: another owner, or another tenant, holds the key; nothing
//     of theirs is disclosed.
//   - Mismatch: PolicyRequest, same request, other arguments.
//   - Refused: a condition of the caller's writes failed (an order out of
//     stock): nothing written, the key not claimed.
//   - Invalid, Failed: the call could not be keyed, or something else
//     went wrong.
//
// The record that holds a key is judged by Verdict (owner, then state,
// then fingerprint, then result) on every path: whether the store read it
// or a failed condition returned it. A record kept past its retention
// (Guard.Retention) is treated as absent, whether or not the store has
// deleted it yet: DynamoDB's TTL deletes lazily, sometimes days late. The
// clock is Guard.Now, injected; the stores read none of their own.
//
// # What it does not do
//
// The guarantee covers what the store's transaction writes. An effect
// outside it (an e-mail, a payment provider's API, a helpdesk ticket)
// is not made exactly-once by a claim: write an outbox item in the same
// transaction and deliver it with a worker that records each attempt, as
// this repository's delivery function does for helpdesk tickets. An
// Effect function runs before the store is written, whether or not the
// key turns out to be held: it must only compute the result and the
// writes. The package keeps no in-process cache: every call asks the
// store.
//
// The conformance suite of any Store is package idemtest.
package idem
