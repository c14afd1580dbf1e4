package fakehelpdesk

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// LinearState is one workflow state of the fake's team.
type LinearState struct {
	ID, Name, Type string
	Position       float64
}

// The ids of the fake team's notable workflow states: issues start in
// Todo, and Done is the first state of type completed by position.
const (
	LinearTodoStateID     = "0c6fa1d2-2b3e-4f10-8a4b-7d1e9c2f3a01"
	LinearDoneStateID     = "0c6fa1d2-2b3e-4f10-8a4b-7d1e9c2f3a04"
	LinearReleasedStateID = "0c6fa1d2-2b3e-4f10-8a4b-7d1e9c2f3a05"
)

// LinearStates are the fake team's workflow states, in the order the API
// lists them: not by position, and with two of type completed (Released
// listed before Done, Done first by position), so a client must order
// them itself.
var LinearStates = []LinearState{
	{ID: "0c6fa1d2-2b3e-4f10-8a4b-7d1e9c2f3a00", Name: "Backlog", Type: "backlog", Position: 0},
	{ID: LinearReleasedStateID, Name: "Released", Type: "completed", Position: 5},
	{ID: LinearTodoStateID, Name: "Todo", Type: "unstarted", Position: 1},
	{ID: "0c6fa1d2-2b3e-4f10-8a4b-7d1e9c2f3a02", Name: "In Progress", Type: "started", Position: 2},
	{ID: LinearDoneStateID, Name: "Done", Type: "completed", Position: 3},
	{ID: "0c6fa1d2-2b3e-4f10-8a4b-7d1e9c2f3a06", Name: "Canceled", Type: "canceled", Position: 4},
}

func linearState(id string) LinearState {
	for _, st := range LinearStates {
		if st.ID == id {
			return st
		}
	}
	return LinearState{}
}

// lComment is a comment of the fake Linear.
type lComment struct {
	id, issueID, body string
	committed         time.Time
	hidden            int
}

// LinearComment is what the fake holds of a comment.
type LinearComment struct{ ID, IssueID, Body string }

// LinearComments lists the comments held, in the order created.
func (s *Server) LinearComments() []LinearComment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]LinearComment, 0, len(s.lComments))
	for _, c := range s.lComments {
		out = append(out, LinearComment{ID: c.id, IssueID: c.issueID, Body: c.body})
	}
	return out
}

// LinearIssueState is the workflow state of the issue whose id is id
// (the zero LinearState when there is no such issue).
func (s *Server) LinearIssueState(id string) LinearState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.linearIssue(id); i != nil {
		return linearState(i.stateID)
	}
	return LinearState{}
}

// linearCommentByID is the comment whose id is id, nil for none; s.mu is
// held.
func (s *Server) linearCommentByID(id string) *lComment {
	for _, c := range s.lComments {
		if strings.EqualFold(c.id, id) {
			return c
		}
	}
	return nil
}

func (s *Server) commentJSON(c *lComment) map[string]any {
	out := map[string]any{"id": c.id, "body": c.body, "issue": map[string]any{"id": c.issueID}}
	if i := s.linearIssue(c.issueID); i != nil {
		out["url"] = s.srv.URL + "/acme/issue/" + i.identifier + "#comment-" + c.id[:min(8, len(c.id))]
	}
	return out
}

func dataAnswer(data map[string]any) answer {
	out, _ := json.Marshal(map[string]any{"data": data})
	return answer{status: http.StatusOK, ctype: "application/json", body: out}
}

// linearCommentCreate is commentCreate: the input's id is the comment's
// primary key, so an id can be at most one comment, and a create whose id
// is taken is answered as SetLinearDuplicate says, as for issues.
func (s *Server) linearCommentCreate(body []byte) answer {
	var b gqlBody
	var in struct {
		ID      string `json:"id"`
		IssueID string `json:"issueId"`
		Body    string `json:"body"`
	}
	if json.Unmarshal(body, &b) != nil || json.Unmarshal(b.Variables["input"], &in) != nil {
		return jsonAnswer(http.StatusBadRequest, gqlErrorBody("graphql error", "Variable \"$input\" got invalid value"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	issue := s.linearIssue(in.IssueID)
	if issue == nil {
		return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Entity not found: Issue - Could not find referenced Issue."))
	}
	if strings.TrimSpace(in.Body) == "" {
		return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Argument Validation Error - body should not be empty"))
	}
	if in.ID != "" {
		if c := s.linearCommentByID(in.ID); c != nil {
			switch s.lDup {
			case DuplicateConflict:
				return jsonAnswer(http.StatusOK, gqlErrorBody("other", "Entity already exists: duplicate key value violates unique constraint"))
			case DuplicateExisting:
				return dataAnswer(map[string]any{"commentCreate": map[string]any{"success": true, "lastSyncId": 1, "comment": s.commentJSON(c)}})
			}
			return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Argument Validation Error - id is not available"))
		}
	}
	id := in.ID
	if id == "" {
		id = "c0000000-0000-4000-8000-" + strings.Repeat("0", 12-len(issue.identifier)) + issue.identifier
	}
	c := &lComment{id: id, issueID: issue.id, body: in.Body, committed: s.nowLocked(), hidden: s.lagN}
	s.lComments = append(s.lComments, c)
	s.record(issue.id, "comment:"+id)
	return dataAnswer(map[string]any{"commentCreate": map[string]any{"success": true, "lastSyncId": 1, "comment": s.commentJSON(c)}})
}

// linearComment is comment(id:): the comment, or Linear's not-found error.
func (s *Server) linearComment(id string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.linearCommentByID(id); c != nil && s.visible(c.committed, &c.hidden) {
		return dataAnswer(map[string]any{"comment": s.commentJSON(c)})
	}
	return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Entity not found: Comment - Could not find referenced Comment."))
}

// linearIssueUpdate is issueUpdate(id:, input: {stateId}): it moves the
// issue to the state (a change of state is recorded in the issue's order
// as "state:<type>"; setting the state it is in changes nothing).
func (s *Server) linearIssueUpdate(body []byte) answer {
	var b gqlBody
	var id string
	var in struct {
		StateID *string `json:"stateId"`
	}
	if json.Unmarshal(body, &b) != nil || json.Unmarshal(b.Variables["id"], &id) != nil || json.Unmarshal(b.Variables["input"], &in) != nil {
		return jsonAnswer(http.StatusBadRequest, gqlErrorBody("graphql error", "Variable \"$input\" got invalid value"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.linearIssue(id)
	if i == nil {
		return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Entity not found: Issue - Could not find referenced Issue."))
	}
	if in.StateID != nil {
		st := linearState(*in.StateID)
		if st.ID == "" {
			return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Entity not found: WorkflowState - Could not find referenced WorkflowState."))
		}
		if i.stateID != st.ID {
			i.stateID = st.ID
			s.record(i.id, "state:"+st.Type)
		}
	}
	return dataAnswer(map[string]any{"issueUpdate": map[string]any{"success": true, "lastSyncId": 2, "issue": s.issueJSON(i)}})
}

// linearWorkflowStates answers team(id:) { states { nodes { ... } } }.
func (s *Server) linearWorkflowStates(body []byte) answer {
	var b gqlBody
	var team string
	if json.Unmarshal(body, &b) != nil || json.Unmarshal(b.Variables["teamId"], &team) != nil {
		return jsonAnswer(http.StatusBadRequest, gqlErrorBody("graphql error", "Variable \"$teamId\" got invalid value"))
	}
	if team != s.cfg.LinearTeamID {
		return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Entity not found: Team - Could not find referenced Team."))
	}
	nodes := make([]map[string]any, 0, len(LinearStates))
	for _, st := range LinearStates {
		nodes = append(nodes, map[string]any{"id": st.ID, "name": st.Name, "type": st.Type, "position": st.Position})
	}
	return dataAnswer(map[string]any{"team": map[string]any{"id": team, "states": map[string]any{"nodes": nodes}}})
}
