// Package idem makes a tool call, or any request handler, idempotent: a
// retried call commits its writes once, and every repeat receives the
// stored result byte for byte. The quick start (the package's Example,
// which go test runs):
//
//	g := &idem.Guard[memstore.Writes]{Store: memstore.New(), Retention: 24 * time.Hour}
//	if err := g.Check(); err != nil { log.Fatal(err) } // once, at start
//	o := g.Do(ctx, idem.Call{Tenant: "shop-1", Owner: "c-7", RequestID: rid, Function: "refund", Arguments: args},
//		func(cl idem.Claim) ([]byte, memstore.Writes, error) { return []byte(`{"refund":"` + cl.Key.ID[:8] + `"}`), saveRefund, nil })
//	fmt.Println(o.Status, string(o.Result)) // created, then on every retry: replayed, the same bytes
//
// Swap memstore for dynamostore or sqlitestore to keep the records, and
// the caller's writes beside them, in DynamoDB or SQLite.
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
// Guard.Do derives the key, asks the caller's Plan for the result and
// the caller's own writes, and hands both to a Store, which commits the
// record of the key (with the result) and the caller's writes in ONE
// transaction, or nothing:
//
//   - dynamostore: one DynamoDB TransactWriteItems holding the claim (a
//     Put conditioned on the key being free), the check of the call's key
//     under the other policy (see Changing the policy) and the caller's
//     items. One request per new operation and one per repeat: the failed
//     condition returns the stored record. Its package doc says DynamoDB's
//     rules (the TTL attribute, the item and transaction limits, UTF-8
//     results).
//   - sqlitestore: the claim and the caller's statements in one BEGIN
//     IMMEDIATE transaction.
//   - memstore: in memory, for tests.
//
// A store refuses a record that could never hold its key (Record.Check):
// the call is Invalid and nothing is written.
//
// # Changing the policy
//
// Guard.Policy can be changed while records of the other policy live, and
// while processes with either policy share a store: a repeat finds its
// operation under either. Every claim names, as Record.AltKey, the key
// the same call has under the other policy (OpKey.AltID), and the store
// looks at it in the claim's transaction: a live record there with the
// call's tenant and fingerprint (the same canonical arguments) holds the
// call, and is returned, judged and replayed like a record under the
// call's own key; nothing is written. A record there with other
// arguments, or expired, does not hold the call. So after a switch from
// PolicyRequest to PolicyArguments the same request with other arguments
// is a new operation, as PolicyArguments defines it; after a switch from
// PolicyArguments to PolicyRequest an operation claimed before the switch
// still answers its own arguments, even once the request has been made
// with others since (the record of the call's own arguments answers
// before a record of other arguments under the call's key). The cost is
// one more item in dynamostore's transaction (2 write units by
// DynamoDB's pricing of transactions, and one of its 100 items) and one
// more read in sqlitestore's.
//
// # Outcomes
//
// Do returns an Outcome whose Status is one of these, each with what the
// caller should do next:
//
//   - Created: the key was free; record, result and writes committed.
//   - Replayed: a live completed record holds the key; its result, byte
//     for byte; nothing written. Answer with the result as if created.
//   - InProgress: a live pending record holds the key. Guard writes only
//     completed records, so this comes from another writer of the same
//     store that claims keys before their result is known (Store.Claim
//     with StatePending). The record is never taken over while it lives,
//     whatever time has passed since it was written: retry later with
//     the same request id (after Outcome.RetryAfter when set). A Guard
//     with a Wait claims again itself for a bounded time first
//     (WaitPolicy).
//   - Busy: the outcome is unknown (contention, throttling, a timeout, a
//     cancelled context): repeat with the same data; the key resolves it.
//   - Conflict: another owner, or another tenant, holds the key; nothing
//     of theirs is disclosed. Do not retry: it is a client bug or a
//     reused request id, and the answer stays Conflict while the record
//     lives.
//   - Mismatch: PolicyRequest, same request, other arguments. New
//     arguments need a new request id; the original arguments still
//     replay.
//   - Refused: a condition of the caller's writes failed (an order out of
//     stock): nothing written, the key not claimed. The same request id
//     may be retried once the condition can hold (dynamostore's
//     Example_order does, after a restock).
//   - Invalid: the call cannot be keyed, or the store refused the record
//     (Err wraps ErrInvalid), or the Guard's Policy is unknown. Fix the
//     call or the Guard; retrying it will not help.
//   - Failed: anything else; Err says what. Nothing was sent (a Guard
//     that fails Guard.Check; a nil plan or the plan's error; a result
//     or writes the store cannot take), the store refused the request
//     without running it, or the record that holds the key does not read
//     back. The stores answer Busy, not Failed, for every error after
//     which their transaction may have run, with one exception: a COMMIT
//     that SQLite fails with an I/O error may still have reached the
//     database file. A retry with the same data is safe in every case (a
//     committed call replays) but helps only once the cause is gone.
//
// The record that holds a key is judged in one order (owner, then state,
// then fingerprint, then result) on every path: whether the store read it
// or a failed condition returned it. A record kept past its retention
// (Guard.Retention) is treated as absent, whether or not the store has
// deleted it yet: DynamoDB's TTL deletes lazily, sometimes days late.
//
// After Retention the key is free again, and a repeat runs the plan and
// commits its writes once more. Choose a Retention that outlasts the
// longest time any client may still retry. To make a later repeat
// harmless as well, derive the ids of the items the plan writes from
// OpKey.ID and write them only if new (attribute_not_exists on DynamoDB,
// a PRIMARY KEY or UNIQUE constraint on SQLite), as dynamostore's
// Example_order does: the late repeat is then Refused, not duplicated.
//
// The clock is Guard.Now, injected: records are stamped and judged by
// it, a Store's Claim is handed that time, and the Cache and the Wait
// read it. The one clock a store
// reads itself is sqlitestore.Options.Now, by which Open purges expired
// records (time.Now when nil: give it the Guard's clock).
//
// # Cache and wait
//
// Guard.Cache (NewCache) keeps completed records in process: a repeat on
// a process that has seen its key costs no store call, and is still
// judged in the same order (owner, then fingerprint). It finds the call's record
// under either policy's key, as the store does (see Changing the policy),
// and leaves a record of other arguments under the call's key to the
// store. An entry never outlives its record. Guard.Wait (WaitPolicy) turns a short InProgress into the
// answer that follows it, by claiming again with backoff for a bounded
// time.
//
// # What it does not do
//
// The guarantee covers what the store's transaction writes. An effect
// outside it (an e-mail, a payment provider's API, another service) is
// not made exactly-once by a claim. Use an outbox: write an outbox item
// as one of the plan's writes, so that it commits with the claim or not
// at all; a worker then reads the new items (from the table's stream, or
// by polling) and sends each one, recording every attempt on the item,
// and before it resends an item whose earlier send has an unknown outcome
// it asks the receiver whether that send arrived. This repository's
// functions/delivery is a worked example. A Plan runs before the store is
// written, whether or not the key turns out to be held: it must only
// compute the result and the writes.
//
// The conformance suite of any Store is package idemtest; a store calls
// Record.Check first in its Claim, as the suite requires.
package idem
