// Package coretest is test support for the service: two tools that only
// tests define, a read (Peek) and a write (Note), to show that a tool
// added to a core.Tools reaches the catalogue, MCP tools/list and the
// dispatch of every door without a change to the doors; and readers of an
// outcome's body (TicketID, FoundTicket), as a caller of the service
// reads it.
package coretest

import (
	"context"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// PeekTicket is the test-only tool's name.
const PeekTicket = "peek_ticket"

// PeekedTitle starts the title of every ticket PeekTicket shows, so an
// answer tells which tool ran.
const PeekedTitle = "peeked: "

// Peeked is peek_ticket's answer.
type Peeked struct {
	Status string       `json:"status"`
	Ticket PeekedTicket `json:"ticket"`
}

// PeekedTicket is what peek_ticket shows of a ticket.
type PeekedTicket struct {
	TicketID string `json:"ticket_id"`
	Title    string `json:"title"`
}

// Peek is a read-only tool: the ticket of the caller's tenant with this
// ticket_id, its title starting with PeekedTitle.
func Peek() core.Function {
	str := map[string]any{"type": "string"}
	return core.Function{
		Name:        PeekTicket,
		Description: "Peek at a ticket by its ticket_id (a tool of the tests).",
		Fields: []core.Field{{Name: "ticket_id", Description: "The ticket to peek at.",
			Required: true, MinLen: 1, MaxLen: 100, Trim: true, NoControl: true}},
		Answer: core.Answer{Kind: core.KindFound, Members: map[string]any{
			"ticket": map[string]any{"type": "object", "properties": map[string]any{"ticket_id": str, "title": str},
				"required": []string{"ticket_id", "title"}},
		}, Required: []string{"ticket"}},
		Busy: "The ticket store is busy; peek again.",
		Read: func(ctx context.Context, s *core.Service, r core.Request) core.Outcome {
			t, err := s.Store.Ticket(ctx, core.TrimBlank(r.Args["ticket_id"]))
			if err != nil || t.TenantID != r.User.TenantID {
				return core.Reject(core.CodeTicketNotFound, "No such ticket to peek at.")
			}
			a, err := core.ParseTicketArguments(t.Arguments)
			if err != nil {
				return core.Outcome{Kind: core.KindInternal, Err: err}
			}
			return core.Answered(core.KindFound, Peeked{Status: core.KindFound.String(),
				Ticket: PeekedTicket{TicketID: t.ID, Title: PeekedTitle + a.Title}})
		},
	}
}

// Tools are the product's tools and Peek.
func Tools() *core.Tools {
	t, err := core.NewTools(append(core.Functions(), Peek())...)
	if err != nil {
		panic("coretest: " + err.Error())
	}
	return t
}
