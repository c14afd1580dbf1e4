package idem

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// State is the state of a claimed operation.
type State string

// The two states. Guard writes a record completed, with its result, in
// the transaction of the caller's writes. A pending record, without a
// result, is written only by a caller that claims a key through
// Store.Claim before its result is known; Guard answers InProgress for
// it and never re-executes or takes it over while it lives.
const (
	StatePending   State = "pending"
	StateCompleted State = "completed"
)

// Record is what a store keeps under an operation key: who holds the key
// and, once completed, the result every repeat receives.
type Record struct {
	Key         string    // the operation key (OpKey.ID)
	State       State     // pending or completed
	Tenant      string    // the key space the key was derived in
	Owner       string    // who, inside the tenant, may receive the result
	Function    string    // the operation's stable name
	Fingerprint string    // SHA-256 hex of the canonical arguments
	Result      []byte    // the stored result, returned byte for byte; nil while pending
	CreatedAt   time.Time // when the record was claimed, by the Guard's clock
	ExpiresAt   time.Time // whole seconds; the record is treated as absent after it

	// AltKey is the key the same call has under the other policy
	// (OpKey.AltID): a live record under it with this record's tenant and
	// fingerprint holds this call, so that a repeat finds its operation
	// whichever policy claimed it (see Store). It is an input of Claim,
	// never stored nor returned; empty, or equal to Key, checks no other
	// key.
	AltKey string
}

// Live reports whether the record still holds its key at now. A record
// whose expiry has passed is treated as absent on every store, whether or
// not it has been deleted: DynamoDB's TTL deletes lazily, sometimes days
// late.
func (r Record) Live(now time.Time) bool {
	return !r.ExpiresAt.Before(now.Truncate(time.Second))
}

// Check reports why a store must refuse to claim with r at now: an empty
// key, a state that is neither pending nor completed, a completed record
// without a result, or an expiry that is not after now (a record that
// could never hold its key, so that every repeat would run its writes
// again). The error wraps ErrInvalid; nil means r can be claimed. Every
// Store's Claim calls it first and, on an error, writes nothing and
// returns it.
func (r Record) Check(now time.Time) error {
	switch {
	case r.Key == "":
		return invalid("the record has no key")
	case r.State != StatePending && r.State != StateCompleted:
		return invalid("the record's state %q is neither %q nor %q", r.State, StatePending, StateCompleted)
	case r.State == StateCompleted && len(r.Result) == 0:
		return invalid("a completed record needs a result")
	case r.ExpiresAt.IsZero():
		return invalid("the record has no expiry")
	case !r.ExpiresAt.After(now):
		return invalid("the record expires at %s, not after now (%s)",
			r.ExpiresAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// Store claims an operation key and commits the caller's own writes, of
// type W, in one transaction.
type Store[W any] interface {
	// Claim writes rec and writes in one transaction if no live record
	// (see Record.Live, at now) holds rec.Key, and returns nil. If a live
	// record holds it, Claim writes nothing and returns that record. A
	// record that is present but expired is replaced.
	//
	// When rec.AltKey is set, the same transaction also reads (or, on
	// DynamoDB, checks as a condition) the record under rec.AltKey: if it
	// is live and has rec's Tenant and Fingerprint, it holds this call,
	// and Claim writes nothing and returns it, as for a record under
	// rec.Key. When both keys hold a live record, the one under rec.Key
	// answers unless it has another fingerprint (other arguments: under
	// PolicyRequest, a Mismatch) and the one under rec.AltKey has rec's:
	// the call's own operation answers before another's. A record under
	// rec.AltKey with another tenant or fingerprint, or expired, does not
	// hold the call and is left as it is.
	//
	// A record that cannot hold its key (Record.Check at now) is refused
	// with Check's error, which wraps ErrInvalid, and nothing is written.
	//
	// Errors: ErrBusy (wrapped) when the outcome is unknown (the store was
	// contended, throttled, timed out, or ctx ended): the caller repeats
	// with the same data and the key resolves it. *RefusedError when a
	// condition of the caller's writes failed: nothing was written and
	// nothing claimed. Any other error: nothing is known to be written.
	Claim(ctx context.Context, rec Record, writes W, now time.Time) (held *Record, err error)
}

// ErrBusy marks an error whose outcome is unknown: the store was
// contended, throttled, timed out, or the call's context ended. Repeating
// the call with the same data is safe; the key resolves it.
var ErrBusy = errors.New("idem: store busy")

// RefusedError reports that a condition of the caller's own writes failed
// (on DynamoDB, a ConditionCheck, or the condition of a Put or Update, of
// the caller's items; on SQLite and in memory, the caller's function
// returned an error). The transaction was cancelled: nothing of the
// caller's was written and the key was not claimed.
type RefusedError struct {
	// Index is the position of the refused write among the caller's
	// writes, or -1 where the store cannot tell (SQLite, memory).
	Index int
	// Err is the store's or the caller's own error.
	Err error
}

// Error names the refused write's index when the store knows it.
func (e *RefusedError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("idem: write %d refused: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("idem: writes refused: %v", e.Err)
}

// Unwrap returns Err, for errors.Is and errors.As.
func (e *RefusedError) Unwrap() error { return e.Err }

// Status is what became of a call.
type Status int

// The statuses. The zero value is not a status.
const (
	// Created: the key was free; the record, its result and the caller's
	// writes were committed together.
	Created Status = iota + 1
	// Replayed: a live completed record holds the key; its result is
	// returned byte for byte and nothing was written.
	Replayed
	// InProgress: a live pending record holds the key; nothing was written
	// and the record is not taken over. Guard writes only completed
	// records: a pending one comes from another writer of the store.
	// Retry later with the same request id.
	InProgress
	// Busy: the outcome is unknown; repeat with the same data.
	Busy
	// Conflict: the key is held by another owner; nothing of theirs is
	// disclosed and nothing was written. Do not retry: it is a client bug
	// or a reused request id.
	Conflict
	// Mismatch: under PolicyRequest, the same request was made with other
	// arguments; nothing was written. New arguments need a new request id.
	Mismatch
	// Refused: a condition of the caller's own writes failed; nothing was
	// written and nothing claimed. The same request id may be retried
	// once the condition can hold.
	Refused
	// Invalid: the call cannot be keyed (arguments not canonicalizable, a
	// missing request id, tenant, owner or function), Guard.Policy is
	// unknown, or the store refused the record as one that cannot hold
	// its key (Record.Check: the error wraps ErrInvalid); nothing was
	// written. Fix the call or the Guard: retrying will not help.
	Invalid
	// Failed: anything else (a Guard that fails Guard.Check, a nil plan
	// or the plan's own error, a store error, a stored record that does
	// not read back). The stores answer Busy where their transaction may
	// have run, so nothing is known to be written (see the package doc
	// for SQLite's one exception). A retry with the same data is safe,
	// and helps only once the cause is gone.
	Failed
)

var statusNames = [...]string{"", "created", "replayed", "in_progress", "busy", "conflict", "mismatch", "refused", "invalid", "failed"}

// String returns the status's snake_case name ("created", "in_progress"),
// fit for a log field or a metric label; Status(n) for a value that is
// not a status.
func (s Status) String() string {
	if s > 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// verdict decides what a call gets from the live record that holds its
// key. The checks run in this order, whichever path found the record (a
// read, or the item a failed condition returned): the owner (another
// tenant or owner → Conflict, before anything stored is looked at), the
// state (pending → InProgress), the fingerprint under PolicyRequest
// (other arguments → Mismatch), then the result (completed without one →
// Failed). Replayed otherwise.
func verdict(held *Record, policy Policy, tenant, owner, fingerprint string) Status {
	switch {
	case held.Tenant != tenant || held.Owner != owner:
		return Conflict
	case held.State == StatePending:
		return InProgress
	case policy == PolicyRequest && held.Fingerprint != fingerprint:
		return Mismatch
	case held.State != StateCompleted || len(held.Result) == 0:
		return Failed
	}
	return Replayed
}
