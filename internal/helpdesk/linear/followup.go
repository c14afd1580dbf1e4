package linear

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
)

// The follow-ups' GraphQL documents. Only the fields read are selected.
const (
	commentCreateMutation = `mutation CommentCreate($input: CommentCreateInput!) { commentCreate(input: $input) { success comment { id url } } }`
	commentQuery          = `query Comment($id: String!) { comment(id: $id) { id url } }`
	statesQuery           = `query WorkflowStates($teamId: String!) { team(id: $teamId) { id states { nodes { id type position } } } }`
	issueUpdateMutation   = `mutation IssueUpdate($id: String!, $input: IssueUpdateInput!) { issueUpdate(id: $id, input: $input) { success issue { id identifier url state { type } } } }`
	closeLookupQuery      = `query IssueState($id: String!) { issue(id: $id) { id identifier url state { type } } }`
)

// completedType is the workflow state type a close moves the issue to.
const completedType = "completed"

// comment is what we read of a Linear comment.
type comment struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// commentInput is CommentCreateInput as sent, fields in this order.
type commentInput struct {
	ID      string `json:"id"`
	IssueID string `json:"issueId"`
	Body    string `json:"body"`
}

// CommentBody is the exact commentCreate request for a comment whose id
// is id on the issue issueID (the ticket id): the same bytes on every
// resend.
func CommentBody(id, issueID, body string) ([]byte, error) {
	return json.Marshal(request{Query: commentCreateMutation, Variables: map[string]any{
		"input": commentInput{ID: id, IssueID: issueID, Body: body}}})
}

// SendEffect makes a comment or a close once. A comment is commentCreate
// with id = its comment_id on the issue whose id is the ticket id, exact by
// construction as the issue is; its receipt is the comment's id and url. A
// close creates its resolution, when there is one, as a comment whose id
// is the close_id, then moves the issue to the team's first workflow state
// of type completed; its receipt is the issue's. Other kinds are refused.
func (c *Client) SendEffect(ctx context.Context, e delivery.Effect) (delivery.Receipt, error) {
	if e.Kind != httpsend.KindComment && e.Kind != httpsend.KindClose {
		return delivery.Receipt{}, httpsend.UnsupportedKind("linear", e)
	}
	f, err := httpsend.ReadFollowup("linear", e)
	if err != nil {
		return delivery.Receipt{}, err
	}
	if e.Kind == httpsend.KindComment {
		return c.createComment(ctx, e.ID, e.TicketID, f.Body)
	}
	return c.close(ctx, e, f.Resolution)
}

// createComment creates the comment whose id is id, once.
func (c *Client) createComment(ctx context.Context, id, issueID, text string) (delivery.Receipt, error) {
	body, err := CommentBody(id, issueID, text)
	if err != nil {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Refused, Err: fmt.Errorf("linear: encoding the comment: %v", err)}
	}
	return c.create(ctx, keyedCreate{field: "commentCreate", noun: "comment", owner: "comment", id: id, body: body,
		read: func(m *mutationResult) (delivery.Receipt, string, error) {
			if m.Comment == nil || m.Comment.ID == "" {
				return delivery.Receipt{}, "", errors.New("comment without an id")
			}
			return commentReceipt(m.Comment), m.Comment.ID, nil
		},
		lookup: func(ctx context.Context) (delivery.Receipt, bool, error) { return c.lookupComment(ctx, id) }})
}

func commentReceipt(cm *comment) delivery.Receipt {
	return delivery.Receipt{ExternalID: cm.ID, ExternalURL: cm.URL}
}

// close creates the resolution's comment (when there is one), then moves
// the issue to the completed state. Each step can be made again with no
// effect (the comment is keyed by the close_id, the state is a value), so
// whatever failed, a resend is safe; the error is the failed step's.
func (c *Client) close(ctx context.Context, e delivery.Effect, resolution string) (delivery.Receipt, error) {
	stateID, err := c.completedState(ctx)
	if err != nil {
		return delivery.Receipt{}, err
	}
	if resolution != "" {
		if _, err := c.createComment(ctx, e.ID, e.TicketID, resolution); err != nil {
			return delivery.Receipt{}, err
		}
	}
	body, err := json.Marshal(request{Query: issueUpdateMutation, Variables: map[string]any{
		"id": e.TicketID, "input": map[string]any{"stateId": stateID}}})
	if err != nil {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Refused, Err: fmt.Errorf("linear: encoding the update: %v", err)}
	}
	req := c.request(body)
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return delivery.Receipt{}, err
	}
	res, errs, readable := readMutation(resp, "issueUpdate")
	if readable && len(errs) == 0 && resp.Status/100 == 2 && res != nil {
		if r, err := res.Issue.receipt(); res.Success && err == nil && res.Issue.ours(e.TicketID) {
			return r, nil
		}
		return delivery.Receipt{}, c.fail(req, resp, delivery.Unknown, "issueUpdate answered without success and the ticket's issue")
	}
	switch classify(resp, errs, true) {
	case classMisconfigured:
		return delivery.Receipt{}, c.fail(req, resp, delivery.Misconfigured, "")
	case classRateLimited:
		return delivery.Receipt{}, c.fail(req, resp, delivery.NotCreated, "")
	case classRefused:
		// The issue or the state does not exist, or the input is refused:
		// no resend changes that.
		return delivery.Receipt{}, c.fail(req, resp, delivery.Refused, "issueUpdate refused")
	}
	return delivery.Receipt{}, c.fail(req, resp, delivery.Unknown, "")
}

// workflowState is what we read of a team's workflow state.
type workflowState struct {
	ID       string  `json:"id"`
	Type     string  `json:"type"`
	Position float64 `json:"position"`
}

// completedState is the id of the team's first workflow state of type
// completed by position, read once per Client (per process) and kept: a
// failed read is not kept, and is a send error that says nothing was
// made (NotCreated, or Misconfigured for a refused key, Refused for a
// team without such a state).
func (c *Client) completedState(ctx context.Context) (string, error) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.doneID != "" {
		return c.doneID, nil
	}
	body, err := json.Marshal(request{Query: statesQuery, Variables: map[string]any{"teamId": c.cfg.TeamID}})
	if err != nil {
		return "", &delivery.SendError{Failure: delivery.NotCreated, Err: fmt.Errorf("linear: workflow states: %v", err)}
	}
	var team struct {
		States struct {
			Nodes []workflowState `json:"nodes"`
		} `json:"states"`
	}
	found, a, err := c.fetch(ctx, body, "team", &team)
	if err != nil {
		var se *delivery.SendError
		if errors.As(err, &se) {
			se.Failure = delivery.NotCreated // a read makes nothing
			se.Err = fmt.Errorf("linear: workflow states: %w", se.Err)
			return "", se
		}
		return "", &delivery.SendError{Failure: delivery.NotCreated, Err: fmt.Errorf("linear: workflow states: %w", err)}
	}
	if !found {
		o := delivery.NotCreated
		switch classify(a.resp, a.errs, false) {
		case classMisconfigured:
			o = delivery.Misconfigured
		case classRefused:
			o = delivery.Refused // no such team: Linear refuses the input
		}
		return "", c.fail(a.req, a.resp, o, "workflow states of the team not read")
	}
	nodes := slices.Clone(team.States.Nodes)
	slices.SortStableFunc(nodes, func(x, y workflowState) int { return cmp.Compare(x.Position, y.Position) })
	for _, n := range nodes {
		if n.Type == completedType && n.ID != "" {
			c.doneID = n.ID
			return n.ID, nil
		}
	}
	return "", &delivery.SendError{Failure: delivery.Refused, Status: a.resp.Status,
		Err: fmt.Errorf("linear: team %s has no workflow state of type %s to close issues in", c.cfg.TeamID, completedType)}
}

// LookupEffect asks Linear whether it holds the effect. A comment: the
// comment whose id is its comment_id (Linear's not-found error: absent).
// A close: the issue's state is of type completed and, when the close has
// a resolution, the comment whose id is its close_id exists.
func (c *Client) LookupEffect(ctx context.Context, e delivery.Effect) (delivery.Receipt, bool, error) {
	if err := httpsend.CheckLookupEffect("linear", e); err != nil {
		return delivery.Receipt{}, false, err
	}
	if e.Kind != httpsend.KindComment && e.Kind != httpsend.KindClose {
		return delivery.Receipt{}, false, fmt.Errorf("linear lookup: %w", httpsend.UnsupportedKind("linear", e))
	}
	f, err := httpsend.ReadFollowup("linear", e)
	if err != nil {
		return delivery.Receipt{}, false, fmt.Errorf("linear lookup: %w", err)
	}
	if e.Kind == httpsend.KindComment {
		return c.lookupComment(ctx, e.ID)
	}
	i, found, err := c.readIssue(ctx, closeLookupQuery, e.TicketID)
	if err != nil || !found || i.State == nil || i.State.Type != completedType {
		return delivery.Receipt{}, false, err
	}
	if f.Resolution != "" {
		if _, found, err := c.lookupComment(ctx, e.ID); err != nil || !found {
			return delivery.Receipt{}, false, err
		}
	}
	r, _ := i.receipt() // readIssue checked it
	return r, true, nil
}

// lookupComment reads the comment whose id is id.
func (c *Client) lookupComment(ctx context.Context, id string) (delivery.Receipt, bool, error) {
	body, err := json.Marshal(request{Query: commentQuery, Variables: map[string]any{"id": id}})
	if err != nil {
		return delivery.Receipt{}, false, fmt.Errorf("linear lookup: %w", err)
	}
	var cm comment
	found, a, err := c.fetch(ctx, body, "comment", &cm)
	if err != nil {
		return delivery.Receipt{}, false, fmt.Errorf("linear lookup: %w", err)
	}
	if found && cm.ID == id {
		return commentReceipt(&cm), true, nil
	}
	if found {
		return delivery.Receipt{}, false, fmt.Errorf("linear lookup: %w", c.fail(a.req, a.resp, delivery.Unknown,
			fmt.Sprintf("the lookup of comment %q answered comment %q", id, cm.ID)))
	}
	if err := c.absence(a); err != nil {
		return delivery.Receipt{}, false, fmt.Errorf("linear lookup: %w", err)
	}
	return delivery.Receipt{}, false, nil
}
