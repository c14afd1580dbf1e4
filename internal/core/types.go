package core

import (
	"context"
	"errors"
	"time"
)

// User is an authorized caller, found by AIVAX's externalUserId. The tenant
// comes from this record only, never from arguments or metadata.
type User struct {
	ExternalID string
	TenantID   string
	UserID     string
	Disabled   bool
}

// State is an operation's state.
type State string

// Operation states. A pending operation is never re-executed or taken over.
const (
	StatePending   State = "pending"
	StateCompleted State = "completed"
)

// Operation is the claim on an operation key and, once completed, the
// stored result that every repeat replays.
type Operation struct {
	Key         string // lower-case hex, no prefix
	State       State
	TenantID    string
	UserID      string
	Function    string
	Fingerprint string // SHA-256 hex of the canonical arguments
	Result      []byte // JSON text of the stored Result, deduplicated false
	CreatedAt   time.Time
	ExpiresAt   time.Time // second precision: stored as epoch seconds
}

// Live reports whether the operation still holds its key at now. An
// operation whose expiry has passed is treated as absent (TTL deletes
// lazily), on every store.
func (o Operation) Live(now time.Time) bool {
	return !o.ExpiresAt.Before(now.Truncate(time.Second))
}

// Ticket is the effect of create_ticket. Tickets have no expiry: they
// outlive the deduplication window.
type Ticket struct {
	ID           string
	TenantID     string
	UserID       string
	OperationKey string
	Arguments    string // canonical JSON text of function.content
	CreatedAt    time.Time
	// Delivery is the ticket's delivery to the team's helpdesk. The service
	// sets it to pending when a destination is configured, and the store
	// writes it in the transaction that creates the ticket (the outbox);
	// nil for a ticket that is never delivered.
	Delivery *Delivery
}

// Delivery is what core knows of a ticket's delivery record; the delivery
// package owns the state machine.
type Delivery struct {
	State       string    // "pending", "delivering", "delivered", "failed", "unknown"
	DueAt       time.Time // when a worker may first take it, whole seconds
	ExternalID  string    // the helpdesk's id, once delivered
	ExternalURL string    // once delivered, when the helpdesk gave one
}

// DeliveryPending is the state a ticket's delivery is created in.
const DeliveryPending = "pending"

// Store performs the writes and reads of the product. Adapters implement it
// and translate their own errors into ErrBusy and ErrNotFound.
type Store interface {
	// Create claims op.Key and writes op and t in one transaction, or writes
	// nothing. If a live operation (see Operation.Live) already holds the
	// key, Create writes nothing and returns it. An operation that is
	// present but expired is replaced: its old ticket stays.
	Create(ctx context.Context, op Operation, t Ticket, now time.Time) (existing *Operation, err error)
	// Ticket reads one ticket by id, or returns ErrNotFound.
	Ticket(ctx context.Context, id string) (Ticket, error)
}

// Users resolves an externalUserId to its record, or returns ErrNotFound.
type Users interface {
	User(ctx context.Context, externalID string) (User, error)
}

var (
	// ErrNotFound: no such record.
	ErrNotFound = errors.New("not found")
	// ErrBusy: the store was contended, throttled, timed out or the call was
	// cancelled. The outcome is unknown; the caller retries with the same
	// data and the key resolves it.
	ErrBusy = errors.New("store busy")
)
