package coretest

import (
	"encoding/json"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// TicketID is the ticket_id of a create_ticket answer (created or
// deduplicated), "" for any other outcome. It reads the body as a caller
// of the service does.
func TicketID(o core.Outcome) string {
	var r core.TicketResult
	if !o.Kind.ToolAnswer() || json.Unmarshal(o.Body, &r) != nil {
		return ""
	}
	return r.TicketID
}

// FoundTicket is the ticket of a found answer (get_ticket's, or a read
// tool's of the same shape), nil for any other outcome. It reads the body
// as a caller of the service does.
func FoundTicket(o core.Outcome) *core.TicketView {
	var f core.Found
	if o.Kind != core.KindFound || json.Unmarshal(o.Body, &f) != nil {
		return nil
	}
	return f.Ticket
}
