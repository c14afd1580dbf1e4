package core

import (
	"encoding/json"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// AddComment is the function name of add_comment.
const AddComment = "add_comment"

// add_comment: claims the call's key, puts the comment (with its
// delivery record when the ticket is delivered) and appends it to the
// ticket's follow-ups, on the condition that the ticket is the caller's,
// open and below MaxComments, in one transaction.
func init() {
	register(Function{
		Name: AddComment,
		Description: "Add a comment to a ticket of the user's organisation, by its ticket_id. " +
			"If a call times out or fails, calling again with the same arguments is safe: " +
			"the same request returns the same comment_id with deduplicated: true instead of a second comment.",
		Fields: []Field{
			ticketIDField,
			{Name: "body", Description: "The comment, 1 to 4000 characters; line breaks and tabs allowed.",
				Required: true, MinLen: 1, MaxLen: 4000, Trim: true, NoControl: true, Multiline: true},
		},
		Answer: Answer{Kind: KindCreated, Members: map[string]any{
			"comment_id": schemaString, "ticket_id": schemaString, "deduplicated": map[string]any{"type": "boolean"},
		}, Required: []string{"comment_id", "ticket_id", "deduplicated"}},
		Write: &Write{
			Plan:    planComment,
			Answer:  replay[CommentResult],
			Refused: commentRefused,
			Codes:   []string{CodeTicketNotFound, CodeTicketClosed, CodeTooManyComments},
			InProgress: "The same comment is still being added; do not add it again. " +
				"Check again later with the same arguments and request.",
			Mismatch: "This request already added a comment with other arguments; do not add another. " +
				"Tell the user, and start a new request only if they want a second comment.",
		},
		Busy: "The ticket store is busy and the outcome is unknown. Call the function again with exactly " +
			"the same arguments and request; it will not add a second comment.",
	})
}

// CommentResult is add_comment's answer, stored by the first call and
// replayed with Deduplicated true.
type CommentResult struct {
	Status       string `json:"status"`
	CommentID    string `json:"comment_id"`
	TicketID     string `json:"ticket_id"`
	Deduplicated bool   `json:"deduplicated"`
}

func (c *CommentResult) readable() bool {
	return c.Status != "" && c.CommentID != "" && c.TicketID != ""
}
func (c *CommentResult) repeated() { c.Deduplicated = true }

// CommentEvent is a comment's effect as a destination receives it (the
// webhook's body).
type CommentEvent struct {
	Type      string `json:"type"` // "comment.created"
	CommentID string `json:"comment_id"`
	TicketID  string `json:"ticket_id"`
	TenantID  string `json:"tenant_id"`
	UserID    string `json:"user_id"`
	Body      string `json:"body"`
	CreatedAt string `json:"created_at"`
}

// The comment item's attributes besides the ticket's and the user's.
const (
	attrTicketID     = "ticket_id"
	attrOperationKey = "operation_key"
	attrBody         = "body"
	attrCreatedAt    = "created_at"
)

// planComment is the comment to put, the ticket's update and the answer
// to store.
func planComment(r Request, k idem.OpKey) ([]byte, Writes, error) {
	ticketID := TrimBlank(r.Args["ticket_id"])
	res := CommentResult{Status: KindCreated.String(), CommentID: r.NewID(), TicketID: ticketID}
	stored, err := json.Marshal(res)
	if err != nil {
		return nil, Writes{}, err
	}
	created := stamp(r.Now)
	payload, err := json.Marshal(CommentEvent{Type: "comment.created", CommentID: res.CommentID, TicketID: ticketID,
		TenantID: r.User.TenantID, UserID: r.User.UserID, Body: r.Args["body"], CreatedAt: shown(created)})
	if err != nil {
		return nil, Writes{}, err
	}
	key := EffectKeyPrefix(KindComment) + res.CommentID
	return stored, Writes{Items: []ItemWrite{
		{Op: Update, Key: TicketKey(ticketID), Append: map[string]string{AttrFollowUps: key},
			If: openTicketOf(r.User.TenantID, Cond{Op: SizeBelow, Attr: AttrFollowUps, Value: MaxComments})},
		{Op: PutNew, Key: key, Set: Item{
			attrTicketID: ticketID, AttrTenantID: r.User.TenantID, AttrUserID: r.User.UserID,
			attrOperationKey: k.ID, attrBody: r.Args["body"], attrCreatedAt: created,
		}, Effect: &Effect{Kind: KindComment, ID: res.CommentID, TicketID: ticketID, Payload: payload}},
	}}, nil
}

// commentRefused answers a comment whose ticket update was refused: the
// ticket is missing or another tenant's, closed, or full. (The comment's
// own put is refused only for a comment id taken, a broken generator.)
var commentRefused = refusedOnTicket(func(t Ticket) Refusal {
	switch {
	case t.Attrs.Str(AttrStatus) == StatusClosed:
		return Refusal{Outcome: Reject(CodeTicketClosed,
			"This ticket is closed and takes no more comments. Tell the user; if the problem is back, create a new ticket.")}
	case len(t.Attrs.List(AttrFollowUps)) >= MaxComments:
		return Refusal{Outcome: Reject(CodeTooManyComments,
			"This ticket already holds the most comments it can take. Tell the user; create a new ticket for anything further.")}
	}
	return raced()
})
