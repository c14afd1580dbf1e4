package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// The follow-ups' arguments: a comment and a resolution of the length an
// agent writes.
const (
	benchComment    = "It also fails on my phone, in the app and in the browser."
	benchResolution = "It works now after clearing the cookies, thanks."
)

// followUpCases are TestInRegion's follow-up cases on one hop: add_comment
// and close_ticket through the whole callback path on the hop's store
// (handler without authentication, service, warm user cache), a new call
// each on a fresh open ticket and a repeat of one completed call, first on
// h's service (no destination, as the create_ticket cases) and then on
// one with a destination configured. Each new call's ticket is created
// beforehand, untimed, through a client straight to DynamoDB Local (not
// the proxy), so the case counts the follow-up's requests alone and draws
// nothing from the model for it. A destination's tickets are created with
// their delivery record, as that service creates them.
func followUpCases(t *testing.T, endpoint, table string, store *dynamo.Store, h *httpapi.Handler, ids func() string) []seqCase {
	t.Helper()
	direct := newHandler(dynamo.New(testenv.DynamoClient(t, endpoint), table, dynamo.Options{}), usersOf(benchUser))
	directDest := newHandler(direct.Service.Store, usersOf(benchUser))
	directDest.Service.Deliver = true
	dest := newHandler(store, h.Service.Users)
	dest.Service.Deliver = true

	var cases []seqCase
	for _, v := range []struct {
		suffix, name     string
		measured, create *httpapi.Handler
	}{
		{"", "", h, direct},
		{results.InRegionWithDestination, ", destination configured", dest, directDest},
	} {
		newTicket := func() string {
			code, body := serve(v.create, ids())
			return ticketOf(t, code, body)
		}
		var next string // the fresh ticket of the next new call, made untimed
		prepare := func() { next = newTicket() }
		comment := func(ticket, rid string) string {
			return outcome(serveBody(v.measured, commentBody(ticket, rid)))
		}
		closeT := func(ticket, rid string) string {
			return outcome(serveBody(v.measured, closeBody(ticket, rid)))
		}
		// The repeats' completed calls, made once here.
		commented, commentID := newTicket(), ids()
		if o := comment(commented, commentID); o != "created" {
			t.Fatalf("setting up the repeated add_comment%s: %s", v.name, o)
		}
		closed, closeID := newTicket(), ids()
		if o := closeT(closed, closeID); o != core.StatusClosed {
			t.Fatalf("setting up the repeated close_ticket%s: %s", v.name, o)
		}
		store.Wait()
		checkTicketSize(t, endpoint, table, closed)
		cases = append(cases,
			seqCase{results.InRegionCommentNew + v.suffix, "add_comment, new" + v.name, "created", prepare,
				func() string { return comment(next, ids()) }},
			seqCase{results.InRegionCommentRepeat + v.suffix, "add_comment, repeat" + v.name, "deduplicated", nil,
				func() string { return comment(commented, commentID) }},
			seqCase{results.InRegionCloseNew + v.suffix, "close_ticket, new" + v.name, core.StatusClosed, prepare,
				func() string { return closeT(next, ids()) }},
			seqCase{results.InRegionCloseRepeat + v.suffix, "close_ticket, repeat" + v.name, "deduplicated", nil,
				func() string { return closeT(closed, closeID) }},
		)
	}
	return cases
}

// commentBody is an add_comment callback on ticket with requestID.
func commentBody(ticket, requestID string) string {
	return callbacktest.Body(core.AddComment, `{"ticket_id":`+callbacktest.Quote(ticket)+`,"body":`+callbacktest.Quote(benchComment)+`}`,
		callbacktest.Context(benchUser.ExternalID, requestID))
}

// closeBody is a close_ticket callback of ticket with requestID.
func closeBody(ticket, requestID string) string {
	return callbacktest.Body(core.CloseTicket, `{"ticket_id":`+callbacktest.Quote(ticket)+`,"resolution":`+callbacktest.Quote(benchResolution)+`}`,
		callbacktest.Context(benchUser.ExternalID, requestID))
}

// ticketOf is the ticket_id of a created ticket's answer.
func ticketOf(t *testing.T, code int, body string) string {
	t.Helper()
	var a struct {
		Status   string `json:"status"`
		TicketID string `json:"ticket_id"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil || a.Status != "created" || a.TicketID == "" {
		t.Fatalf("creating a ticket for a follow-up: %d %s", code, body)
	}
	return a.TicketID
}

// checkTicketSize fails t unless the item of ticket (closed, with one
// follow-up: the largest the cases write) is under 1 KB. The proxy charges
// a transaction's Update by its key and the values it sets, not by the
// item, which it does not read; AWS charges by the item. Under 1 KB both
// are 2 WCU, so the cases' figures are AWS's.
func checkTicketSize(t *testing.T, endpoint, table, ticket string) {
	t.Helper()
	out, err := testenv.DynamoClient(t, endpoint).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table,
		Key: map[string]types.AttributeValue{dynamo.PartitionKey: &types.AttributeValueMemberS{Value: core.TicketKey(ticket)}}, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("reading ticket %s: %v, %v", ticket, out, err)
	}
	if n := itemBytes(out.Item); n >= 1024 {
		t.Fatalf("ticket %s is %d bytes: the proxy's Update figure (under 1 KB) would undercount it", ticket, n)
	}
}

// itemBytes is an item's size by AWS's rules, for the types the store
// writes, numbers counted at their full length (an upper bound).
func itemBytes(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueBytes(v)
	}
	return n
}

func valueBytes(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value) + 1
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += valueBytes(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + itemBytes(v.Value)
	}
	return 0
}
