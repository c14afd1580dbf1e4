package core

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// User is an authorized caller, found by AIVAX's externalUserId. The tenant
// comes from this record only, never from arguments or metadata.
type User struct {
	ExternalID string
	TenantID   string
	UserID     string
	Disabled   bool
}

// OperationState is an operation's state.
type OperationState string

// Operation states. A pending operation is never re-executed or taken over.
const (
	StatePending   OperationState = "pending"
	StateCompleted OperationState = "completed"
)

// Operation is the claim on an operation key and, once completed, the
// stored result that every repeat replays.
type Operation struct {
	Key         string // lower-case hex, no prefix
	State       OperationState
	TenantID    string
	UserID      string
	Function    string
	Fingerprint string // SHA-256 hex of the canonical arguments
	Result      []byte // JSON text of the stored Result, deduplicated false
	CreatedAt   time.Time
	ExpiresAt   time.Time // second precision: stored as epoch seconds
	// AltKey is the key the same call has under the other key policy
	// (idem.Record.AltKey): a live operation under it with this one's
	// tenant and fingerprint holds the call, so that a change of
	// key_policy re-keys no live operation. Create's input only; never
	// stored.
	AltKey string
}

// Live reports whether the operation still holds its key at now. An
// operation whose expiry has passed is treated as absent (TTL deletes
// lazily), on every store.
func (o Operation) Live(now time.Time) bool { return o.Record().Live(now) }

// Record is the operation as package idem's stores keep it: the user is
// the record's owner within the tenant.
func (o Operation) Record() idem.Record {
	return idem.Record{Key: o.Key, State: idem.State(o.State), Tenant: o.TenantID, Owner: o.UserID,
		Function: o.Function, Fingerprint: o.Fingerprint, Result: o.Result, CreatedAt: o.CreatedAt, ExpiresAt: o.ExpiresAt,
		AltKey: o.AltKey}
}

// OperationOf is the operation a record of package idem holds.
func OperationOf(r idem.Record) Operation {
	return Operation{Key: r.Key, State: OperationState(r.State), TenantID: r.Tenant, UserID: r.Owner,
		Function: r.Function, Fingerprint: r.Fingerprint, Result: r.Result, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
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
	Delivery *DeliveryStatus
}

// TicketArguments are create_ticket's arguments as a ticket carries them.
type TicketArguments struct {
	Title       string
	Description string
	Priority    string // DefaultPriority when the call had none
}

// ParseTicketArguments reads a ticket's stored arguments (Ticket.Arguments,
// the canonical JSON of create_ticket's arguments). It is the one reading
// of them: get_ticket shows and the helpdesk receives what it returns.
func ParseTicketArguments(arguments string) (TicketArguments, error) {
	var a struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		Priority    string `json:"priority"`
	}
	if err := json.Unmarshal([]byte(arguments), &a); err != nil {
		return TicketArguments{}, err
	}
	return TicketArguments{Title: a.Title, Description: a.Description, Priority: cmp.Or(a.Priority, DefaultPriority)}, nil
}

// DeliveryStatus is what core knows of a ticket's delivery record; the
// delivery package owns the state machine.
type DeliveryStatus struct {
	State       string    // one of internal/delivery's states (delivery.State)
	DueAt       time.Time // when a worker may first take it, whole seconds
	ExternalID  string    // the helpdesk's id, once delivered
	ExternalURL string    // once delivered, when the helpdesk gave one
}

// The two delivery states core names itself; internal/delivery's State
// takes its values of them from here and owns the others.
const (
	// DeliveryPending is the state a ticket's delivery is created in.
	DeliveryPending = "pending"
	// DeliveryDelivered: the helpdesk has the ticket; get_ticket shows its
	// id and URL.
	DeliveryDelivered = "delivered"
)

// Store performs the writes and reads of the product. Adapters implement it
// and translate their own errors into ErrBusy and ErrNotFound.
type Store interface {
	// Create claims op.Key and writes op and t in one transaction, or writes
	// nothing. If a live operation (see Operation.Live) already holds the
	// key, or holds op.AltKey with op's tenant and fingerprint (the call's
	// operation claimed under the other key policy), Create writes nothing
	// and returns it. An operation that is present but expired is
	// replaced: its old ticket stays.
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
	// data and the key resolves it. It is idem.ErrBusy, which the stores
	// of package idem return.
	ErrBusy = idem.ErrBusy
)
