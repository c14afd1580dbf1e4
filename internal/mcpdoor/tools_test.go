package mcpdoor_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/core/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
)

// TestAddedToolIsListedAndCalled: a tool added to the service's tools
// (coretest.Peek) is in tools/list with its schemas and read-only hint,
// and tools/call dispatches it, with no change to the door.
func TestAddedToolIsListedAndCalled(t *testing.T) {
	ctx := context.Background()
	tools := coretest.Tools()
	peek, _ := tools.Lookup(coretest.PeekTicket)
	e := newEnv(t, memstore.New(), envOptions{tools: tools})
	cs := e.client(ctx, e.token("user-a"), revisions[len(revisions)-1])
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Name != coretest.PeekTicket {
			continue
		}
		in, _ := json.Marshal(tool.InputSchema)
		out, _ := json.Marshal(tool.OutputSchema)
		if !jsonEqual(string(in), string(peek.Schema())) ||
			!jsonEqual(string(out), string(peek.OutputSchema())) ||
			tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.Description != peek.Description {
			t.Errorf("peek_ticket listed as %s %s %+v %q", in, out, tool.Annotations, tool.Description)
		}
	}
	if len(names) != 3 || names[2] != coretest.PeekTicket {
		t.Fatalf("tools/list %v; want create_ticket, get_ticket and peek_ticket", names)
	}
	_, created := callTool(ctx, t, cs, core.CreateTicket, map[string]any{"title": "Printer"}, "r-1")
	_, peeked := callTool(ctx, t, cs, coretest.PeekTicket, map[string]any{"ticket_id": created.TicketID}, "")
	if peeked.Status != "found" || peeked.Ticket == nil || peeked.Ticket.Title != coretest.Peeked+"Printer" {
		t.Fatalf("tools/call peek_ticket: %+v; want found with the peeked title", peeked)
	}
}
