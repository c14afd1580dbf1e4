package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// HelpdeskTicket is what a destination receives of a ticket: the stored
// ticket with its arguments unpacked. ID is the delivery key: it is sent as the
// Idempotency-Key header and as the helpdesk's external id, and it never
// changes across retries.
type HelpdeskTicket struct {
	ID           string
	OperationKey string
	TenantID     string
	UserID       string
	Title        string
	Description  string // "" when the ticket has none
	Priority     string // as stored
	CreatedAt    time.Time
}

// Receipt is what the helpdesk answered for a ticket it holds.
type Receipt struct {
	ExternalID  string // the helpdesk's id, as a string
	ExternalURL string // "" when the helpdesk gave none
}

// Destination creates tickets in a helpdesk. Implementations never resend
// on their own: every resend goes through the Engine's state machine.
type Destination interface {
	// Send creates the ticket once. On success it returns the receipt; on
	// failure the error is a *SendError saying what is known of the outcome.
	Send(ctx context.Context, t HelpdeskTicket) (Receipt, error)
	// Lookup asks the helpdesk whether it holds a ticket under the delivery
	// key id. It returns (receipt, true, nil) when found, (Receipt{}, false,
	// nil) when the helpdesk says it is absent, ErrNoLookup when the
	// destination cannot be queried, and any other error when the lookup
	// itself failed (the answer is then unknown).
	Lookup(ctx context.Context, id string) (Receipt, bool, error)
}

// Effect is what a destination receives of an effect (core.Effect): a
// comment, a close, or a tool's own kind, with its delivery key.
type Effect struct {
	Kind string
	// ID is the delivery key (the comment_id, the close_id): sent as the
	// idempotency key and, where the helpdesk takes one, the record's id.
	ID string
	// TicketID is the ticket it follows ("" for none), and TicketExternalID
	// that ticket's id in the helpdesk, set by the engine once the ticket
	// is delivered.
	TicketID         string
	TicketExternalID string
	// Payload is the effect's body as its tool made it, a JSON object with
	// its "type".
	Payload []byte
}

// EffectSender is implemented by a destination that takes effects. A
// destination that takes no effect of a kind answers a *SendError with
// Failure Refused.
type EffectSender interface {
	// SendEffect makes the effect once in the helpdesk; errors as Send's.
	SendEffect(ctx context.Context, e Effect) (Receipt, error)
	// LookupEffect asks whether the helpdesk holds the effect; answers as
	// Lookup's.
	LookupEffect(ctx context.Context, e Effect) (Receipt, bool, error)
}

// KeyedCreator is implemented by a destination whose create takes the
// delivery key as the created record's own identity (Linear's issueCreate
// with id = the ticket id): the helpdesk can hold at most one record under
// it, however often or however late a create with it arrives, and a
// lookup by it reads that record by its primary key, with no index lag.
// For such a destination a resend needs no outcome window: after a send
// whose outcome is unknown the engine looks the ticket up once the backoff
// is over and, if absent, resends at once with the same key, which cannot
// make a second record. The window still comes before the verdict that no
// send created the ticket (a failed ticket): only a lookup past it rules
// an unknown send out.
type KeyedCreator interface {
	// CreatesKeyedByID reports whether creates are keyed by the delivery
	// key as above.
	CreatesKeyedByID() bool
}

// keyedByID reports whether d's creates are keyed by the delivery key.
func keyedByID(d Destination) bool {
	k, ok := d.(KeyedCreator)
	return ok && k.CreatesKeyedByID()
}

// ErrNoLookup: the destination cannot be queried by delivery key.
var ErrNoLookup = errors.New("destination has no lookup")

// Failure classifies a failed send.
type Failure int

const (
	// NotCreated: the helpdesk certainly did not create the ticket (the
	// request never left, or it answered 429 or another "try later" that
	// creates nothing). Retry later with the same key.
	NotCreated Failure = iota + 1
	// Unknown: the helpdesk may have created it (timeout, connection lost
	// after the request was written, a 5xx, a 409, Zendesk's 400
	// IdempotentRequestError). Look it up before any resend.
	Unknown
	// Refused: the helpdesk refused it for good (400 or 422). Do not
	// retry.
	Refused
	// Misconfigured: the destination refused our credentials or URL (401,
	// 403, or 404 on the create URL). Nothing is wrong with the ticket:
	// delivery to the destination stops until it accepts us again, and the
	// ticket stays pending without counting a send.
	Misconfigured
)

func (f Failure) String() string {
	switch f {
	case NotCreated:
		return "not_created"
	case Unknown:
		return "unknown"
	case Refused:
		return "refused"
	case Misconfigured:
		return "misconfigured"
	}
	return fmt.Sprintf("Failure(%d)", int(f))
}

// SendError is the error of a failed Send, and of a Lookup the helpdesk
// answered with something other than found or absent (then Failure is
// Unknown, or Misconfigured for 401 and 403, with Status and RetryAfter
// as received).
type SendError struct {
	Failure    Failure
	Status     int           // HTTP status, 0 when none was received
	RetryAfter time.Duration // the helpdesk's Retry-After, 0 when absent
	Err        error         // the cause, for logs; never carries credentials
}

func (e *SendError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("send %s (HTTP %d): %v", e.Failure, e.Status, e.Err)
	}
	return fmt.Sprintf("send %s: %v", e.Failure, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }
