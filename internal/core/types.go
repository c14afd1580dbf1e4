package core

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
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
	// Attrs are the attributes of the ticket's item beyond the fields
	// above and its delivery record: what tools set on it after its
	// creation (its status, its FollowUps). Empty for a new ticket.
	Attrs Item
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

// Store is the product's store: package idem's claim, with the product's
// Writes, and the reads the tools need. Adapters implement it; their
// claims answer as every idem.Store does (idemtest holds them to it), and
// their reads translate their own errors into ErrBusy and ErrNotFound.
type Store interface {
	// Claims is the store's idem.Store: the one place it translates a
	// claim's answer. (A method of its own, because the product's stores
	// are also delivery outboxes, whose Claim takes a delivery.)
	Claims() idem.Store[Writes]
	// Ticket reads one ticket by id, or returns ErrNotFound. The read is
	// strongly consistent: it sees every write whose answer was returned.
	Ticket(ctx context.Context, id string) (Ticket, error)
	// Items reads the items of keys that exist, in the order of keys,
	// strongly consistently, each with its delivery when it is an outbox
	// record; an absent key is left out. A ticket's key reads its Attrs.
	Items(ctx context.Context, keys []string) ([]StoredItem, error)
}

// ClaimFunc is a function as an idem.Store of the product's Writes: how
// a store that wraps another (timing it, notifying after it) changes its
// claims.
type ClaimFunc func(ctx context.Context, rec idem.Record, w Writes, now time.Time) (*idem.Record, error)

// Claim implements idem.Store.
func (f ClaimFunc) Claim(ctx context.Context, rec idem.Record, w Writes, now time.Time) (*idem.Record, error) {
	return f(ctx, rec, w, now)
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

// Kind is what became of a callback that reached the service.
// internal/httpapi maps each Kind to its HTTP status and body in one
// table; the refusals that only HTTP produces (bad body, size, nonce,
// route) are its own.
type Kind int

// The outcomes the service produces.
const (
	KindInternal   Kind = iota // 500, no detail
	KindCreated                // 200 a write's first answer
	KindDuplicate              // 200 a write's stored answer, replayed
	KindFound                  // 200 a read's answer
	KindInProgress             // 200 pending operation
	KindBusy                   // 200 busy, retryable
	KindRejected               // 200 correctable input error
	KindConflict               // 403 request_id_conflict
	KindForbidden              // 403 unknown or disabled user
)

var kindNames = [...]string{
	KindInternal:   "internal",
	KindCreated:    "created",
	KindDuplicate:  "deduplicated",
	KindFound:      "found",
	KindInProgress: "in_progress",
	KindBusy:       "busy",
	KindRejected:   "rejected",
	KindConflict:   "conflict",
	KindForbidden:  "forbidden",
}

// String names the kind as responses and logs do ("created",
// "deduplicated", "in_progress", ...); a conflict is "conflict".
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Rejection codes.
const (
	CodeUnknownFunction       = "unknown_function"
	CodeMissingExternalUserID = "missing_external_user_id"
	CodeMissingRequestID      = "missing_request_id"
	CodeInvalidRequestID      = "invalid_request_id"
	CodeInvalidArguments      = "invalid_arguments"
	CodeArgumentsMismatch     = "arguments_mismatch"
	CodeRequestIDConflict     = "request_id_conflict"
	CodeTicketNotFound        = "ticket_not_found"
)

// ToolAnswer reports whether k is a tool's own answer (created,
// deduplicated, found): its body is the tool's, Outcome.Body. The other
// kinds' bodies are the doors' (retryable, rejection, short error).
func (k Kind) ToolAnswer() bool {
	return k == KindCreated || k == KindDuplicate || k == KindFound
}

// Outcome is what happened to one callback: the answer, and how far the
// call got (function, tenant, key), which the caller logs.
type Outcome struct {
	Kind    Kind
	Code    string // rejection code
	Message string // for the model: what happened and what to do next

	// Body is a tool's own answer (Kind.ToolAnswer), the JSON the doors
	// send as it is: the tool builds it, with its "status"; nothing else
	// reads its members.
	Body json.RawMessage

	// What the call resolved to, as far as it got; never sent.
	Function string // the function named by the call
	TenantID string // once the user is known
	Key      string // once the operation key is derived
	Err      error  // the cause of a busy or internal outcome
}

// Answered is a tool's own answer of kind k with body v, encoded as the
// doors send it; a body that does not encode is an internal outcome.
func Answered(k Kind, v any) Outcome {
	b, err := json.Marshal(v)
	if err != nil {
		return Outcome{Kind: KindInternal, Err: err}
	}
	return Outcome{Kind: k, Body: b}
}

// Reject builds a correctable-input rejection.
func Reject(code, message string) Outcome {
	return Outcome{Kind: KindRejected, Code: code, Message: message}
}
