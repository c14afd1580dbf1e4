package httpsend

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// The effect kinds the helpdesk adapters know by name (core.Effect.Kind
// of add_comment and close_ticket).
const (
	KindComment = "comment"
	KindClose   = "close"
)

// Followup is what an adapter reads of a comment's or a close's payload
// (the tools' "comment.created" and "ticket.closed" bodies).
type Followup struct {
	// Body is the comment's text ("" for a close).
	Body string `json:"body"`
	// Resolution is the close's resolution, "" when it has none.
	Resolution string `json:"resolution"`
}

// ReadFollowup checks an effect of kind comment or close before anything
// is sent and reads its payload: an effect without a delivery key or a
// ticket, a payload that is not a JSON object, or a comment without a
// body is refused (a *delivery.SendError whose text starts with adapter),
// since no resend could make it deliverable.
func ReadFollowup(adapter string, e delivery.Effect) (Followup, error) {
	if err := CheckEffect(adapter, e); err != nil {
		return Followup{}, err
	}
	if e.TicketID == "" {
		return Followup{}, refusedEffect(adapter, e, "it follows no ticket")
	}
	var f Followup
	if err := json.Unmarshal(e.Payload, &f); err != nil {
		return Followup{}, refusedEffect(adapter, e, "its payload is not a JSON object with string fields")
	}
	if e.Kind == KindComment && f.Body == "" {
		return Followup{}, refusedEffect(adapter, e, "the comment has no body")
	}
	return f, nil
}

// CheckEffect refuses an effect without a delivery key, which every send
// carries as its idempotency key or record id.
func CheckEffect(adapter string, e delivery.Effect) error {
	if e.ID == "" {
		return &delivery.SendError{Failure: delivery.Refused,
			Err: fmt.Errorf("%s: %s effect has no id to send as its key", adapter, e.Kind)}
	}
	return nil
}

// UnsupportedKind is the refusal of an effect kind the adapter does not
// take: "<adapter> takes no <kind> effects".
func UnsupportedKind(adapter string, e delivery.Effect) *delivery.SendError {
	return &delivery.SendError{Failure: delivery.Refused,
		Err: fmt.Errorf("%s takes no %s effects", adapter, e.Kind)}
}

// CheckLookupEffect refuses a lookup of an effect without a delivery key,
// before anything is sent.
func CheckLookupEffect(adapter string, e delivery.Effect) error {
	if e.ID == "" {
		return errors.New(adapter + ": lookup of an effect without an id")
	}
	return nil
}

func refusedEffect(adapter string, e delivery.Effect, why string) *delivery.SendError {
	return &delivery.SendError{Failure: delivery.Refused,
		Err: fmt.Errorf("%s: %s effect %s: %s", adapter, e.Kind, e.ID, why)}
}
