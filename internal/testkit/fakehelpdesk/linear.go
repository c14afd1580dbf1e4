package fakehelpdesk

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config's Linear side.
const (
	DefaultLinearKey     = "lin_api_fakehelpdesktestkey0000000000000000" //nolint:gosec // a test fixture, not a credential
	DefaultLinearTeamID  = "9cfb482a-81e3-4154-b5b9-2c805e70a02d"
	DefaultLinearTeamKey = "ENG"
)

// Duplicate is what the fake's issueCreate answers for an id that is
// already an issue's. Linear does not publish its answer; each of these
// is a plausible one, and the adapter must deliver (never create a second
// issue, never fail the ticket) under every one.
type Duplicate int

const (
	// DuplicateInvalidInput: a GraphQL error in a 200 of type "invalid
	// input" (code INVALID_INPUT) that does not say "exists": Linear
	// reports every refusal of input it knows this way (the SDK's error
	// map), and a naive client would take it for a permanent refusal.
	// The default, as the hardest case.
	DuplicateInvalidInput Duplicate = iota
	// DuplicateConflict: a GraphQL error in a 200 whose message says the
	// entity already exists (a unique-constraint violation passed on),
	// of type "other".
	DuplicateConflict
	// DuplicateExisting: success, returning the issue the id names.
	DuplicateExisting
)

func (d Duplicate) String() string {
	switch d {
	case DuplicateInvalidInput:
		return "invalid-input"
	case DuplicateConflict:
		return "conflict"
	case DuplicateExisting:
		return "existing"
	}
	return fmt.Sprintf("Duplicate(%d)", int(d))
}

// Duplicates lists every Duplicate, for tests that run each.
var Duplicates = []Duplicate{DuplicateInvalidInput, DuplicateConflict, DuplicateExisting}

// RateLimit is Linear's rate-limit answer: RATELIMITED, with the
// X-RateLimit-{Requests,Complexity}-{Limit,Remaining,Reset} headers. The
// Budget ("Requests" or "Complexity") is spent (remaining 0) and resets
// ResetIn after the answer on the fake's clock; the other budget has some
// left and resets earlier. The resets are Unix milliseconds.
type RateLimit struct {
	Budget  string
	ResetIn time.Duration
}

// LinearRateLimited answers Linear's RATELIMITED error with HTTP status
// (400, as Linear answers it, or 429), budget spent until resetIn from
// the answer, storing nothing.
func LinearRateLimited(status int, budget string, resetIn time.Duration) Fault {
	return Fault{Status: status, RateLimit: &RateLimit{Budget: budget, ResetIn: resetIn}}
}

// LinearError answers status with one GraphQL error of the given
// extensions type (the SDK's spelling: "invalid input", "internal
// error", ...) and message, storing nothing.
func LinearError(status int, typ, message string) Fault {
	return Fault{Status: status, Body: gqlErrorBody(typ, message)}
}

// lIssue is an issue of the fake Linear.
type lIssue struct {
	id, identifier, title, description string
	teamID                             string
	stateID                            string
	priority                           int
	committed                          time.Time
	hidden                             int
}

// SetLinearDuplicate chooses what issueCreate answers for an id that is
// already an issue's.
func (s *Server) SetLinearDuplicate(d Duplicate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lDup = d
}

// LinearIssue is what the fake holds of an issue.
type LinearIssue struct {
	ID, Identifier, Title, Description, TeamID string
	Priority                                   int
}

// LinearIssues lists the issues held, in the order created.
func (s *Server) LinearIssues() []LinearIssue {
	s.commitDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]LinearIssue, 0, len(s.lIssues))
	for _, i := range s.lIssues {
		out = append(out, LinearIssue{ID: i.id, Identifier: i.identifier, Title: i.title,
			Description: i.description, TeamID: i.teamID, Priority: i.priority})
	}
	return out
}

// LinearURL is the fake Linear's API URL: the linear "url".
func (s *Server) LinearURL() string { return s.srv.URL }

func isLinear(k Kind) bool {
	switch k {
	case LinearCreate, LinearLookup, LinearQuery, LinearCommentCreate, LinearCommentLookup, LinearIssueUpdate, LinearWorkflowStates:
		return true
	}
	return false
}

// gqlBody is a GraphQL request as the fake reads it.
type gqlBody struct {
	Query     string                     `json:"query"`
	Variables map[string]json.RawMessage `json:"variables"`
}

type lInput struct {
	ID          string `json:"id"`
	TeamID      string `json:"teamId"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Priority    *int   `json:"priority"`
}

// linearKind tells the fake's three documents apart by their root field.
func linearKind(body []byte) Kind {
	var b gqlBody
	_ = json.Unmarshal(body, &b)
	switch {
	case strings.Contains(b.Query, "issueCreate("):
		return LinearCreate
	case strings.Contains(b.Query, "commentCreate("):
		return LinearCommentCreate
	case strings.Contains(b.Query, "issueUpdate("):
		return LinearIssueUpdate
	case strings.Contains(b.Query, "comment("):
		return LinearCommentLookup
	case strings.Contains(b.Query, "issue("):
		return LinearLookup
	case strings.Contains(b.Query, "states"):
		return LinearWorkflowStates
	}
	return LinearQuery
}

// linearKey is the id a request names: the issue's of an issueCreate, an
// issue(id:) or an issueUpdate, the comment's of a commentCreate or a
// comment(id:).
func linearKey(kind Kind, body []byte) string {
	var b gqlBody
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	if kind == LinearLookup || kind == LinearCommentLookup || kind == LinearIssueUpdate {
		var id string
		_ = json.Unmarshal(b.Variables["id"], &id)
		return id
	}
	var in lInput
	_ = json.Unmarshal(b.Variables["input"], &in)
	return in.ID
}

// gqlErrorBody is a GraphQL answer with one error, as Linear shapes it:
// extensions.type as the SDK reads it, extensions.code as the docs name it.
func gqlErrorBody(typ, message string) string {
	code := strings.ToUpper(strings.ReplaceAll(typ, " ", "_"))
	b, _ := json.Marshal(map[string]any{"data": nil, "errors": []map[string]any{{
		"message": message,
		"extensions": map[string]any{"type": typ, "code": code, "userError": typ == "invalid input",
			"userPresentableMessage": message},
	}}})
	return string(b)
}

func linearUnauthenticated() answer {
	return jsonAnswer(http.StatusUnauthorized, gqlErrorBody("authentication error",
		"Authentication required, not authenticated - You need to authenticate to access this operation."))
}

// rateLimited is the RATELIMITED answer of rl with status.
func (s *Server) rateLimited(status int, rl RateLimit) answer {
	s.mu.Lock()
	now := s.nowLocked()
	s.mu.Unlock()
	a := jsonAnswer(status, gqlErrorBody("ratelimited", "Rate limit exceeded"))
	a.header = http.Header{}
	for _, budget := range []string{"Requests", "Complexity"} {
		limit, remaining, reset := "5000", "1200", now.Add(rl.ResetIn/2)
		if budget == "Complexity" {
			limit, remaining = "3000000", "250000"
		}
		if budget == rl.Budget {
			remaining, reset = "0", now.Add(rl.ResetIn)
		}
		a.header.Set("X-RateLimit-"+budget+"-Limit", limit)
		a.header.Set("X-RateLimit-"+budget+"-Remaining", remaining)
		a.header.Set("X-RateLimit-"+budget+"-Reset", strconv.FormatInt(reset.UnixMilli(), 10))
	}
	return a
}

// linearIssue is the issue whose id is id, nil for none; s.mu is held.
func (s *Server) linearIssue(id string) *lIssue {
	for _, i := range s.lIssues {
		if strings.EqualFold(i.id, id) {
			return i
		}
	}
	return nil
}

func (s *Server) issueJSON(i *lIssue) map[string]any {
	st := linearState(i.stateID)
	return map[string]any{"id": i.id, "identifier": i.identifier,
		"url":   s.srv.URL + "/acme/issue/" + i.identifier,
		"state": map[string]any{"id": st.ID, "name": st.Name, "type": st.Type}}
}

// linearCreate is issueCreate: the id is the issue's primary key, so a
// create whose id is already an issue's creates nothing, whenever it
// arrives (unlocked or not), and is answered as SetLinearDuplicate says.
func (s *Server) linearCreate(body []byte, _ bool) answer {
	var b gqlBody
	var in lInput
	if json.Unmarshal(body, &b) != nil || json.Unmarshal(b.Variables["input"], &in) != nil {
		return jsonAnswer(http.StatusBadRequest, gqlErrorBody("graphql error", "Variable \"$input\" got invalid value"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.TeamID != s.cfg.LinearTeamID {
		return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Entity not found: Team - Could not find referenced Team."))
	}
	if strings.TrimSpace(in.Title) == "" {
		return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Argument Validation Error - title should not be empty"))
	}
	if in.Priority != nil && (*in.Priority < 0 || *in.Priority > 4) {
		return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Argument Validation Error - priority must not be greater than 4"))
	}
	if in.ID != "" {
		if i := s.linearIssue(in.ID); i != nil {
			switch s.lDup {
			case DuplicateConflict:
				return jsonAnswer(http.StatusOK, gqlErrorBody("other", "Entity already exists: duplicate key value violates unique constraint"))
			case DuplicateExisting:
				return s.created(i)
			}
			return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Argument Validation Error - id is not available"))
		}
	}
	id := in.ID
	if id == "" {
		id = fmt.Sprintf("00000000-0000-4000-8000-%012d", s.lNextNum+1)
	}
	s.lNextNum++
	i := &lIssue{id: id, identifier: fmt.Sprintf("%s-%d", s.cfg.LinearTeamKey, s.lNextNum), title: in.Title,
		description: in.Description, teamID: in.TeamID, stateID: LinearTodoStateID, committed: s.nowLocked(), hidden: s.lagN}
	if in.Priority != nil {
		i.priority = *in.Priority
	}
	s.lIssues = append(s.lIssues, i)
	s.record(i.id, "create")
	return s.created(i)
}

// created is issueCreate's success for i; s.mu is held.
func (s *Server) created(i *lIssue) answer {
	out, _ := json.Marshal(map[string]any{"data": map[string]any{"issueCreate": map[string]any{
		"success": true, "lastSyncId": 1, "issue": s.issueJSON(i)}}})
	return answer{status: http.StatusOK, ctype: "application/json", body: out}
}

// linearLookup is issue(id:): the issue, or Linear's not-found error.
func (s *Server) linearLookup(id string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.linearIssue(id); i != nil && s.visible(i.committed, &i.hidden) {
		out, _ := json.Marshal(map[string]any{"data": map[string]any{"issue": s.issueJSON(i)}})
		return answer{status: http.StatusOK, ctype: "application/json", body: out}
	}
	return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Entity not found: Issue - Could not find referenced Issue."))
}

// linearQuery answers viewer { id } and team(id:) { id key name }.
func (s *Server) linearQuery(body []byte) answer {
	var b gqlBody
	if json.Unmarshal(body, &b) != nil || !strings.Contains(b.Query, "viewer") && !strings.Contains(b.Query, "team(") {
		return jsonAnswer(http.StatusBadRequest, gqlErrorBody("graphql error", "Cannot query this document on the fake"))
	}
	data := map[string]any{}
	if strings.Contains(b.Query, "viewer") {
		data["viewer"] = map[string]any{"id": "5a0e6e4c-1d6a-4c55-9a3b-0f1f6a8e9d21"}
	}
	if strings.Contains(b.Query, "team(") {
		var id string
		_ = json.Unmarshal(b.Variables["teamId"], &id)
		if id != s.cfg.LinearTeamID {
			return jsonAnswer(http.StatusOK, gqlErrorBody("invalid input", "Entity not found: Team - Could not find referenced Team."))
		}
		data["team"] = map[string]any{"id": id, "key": s.cfg.LinearTeamKey, "name": "Engineering"}
	}
	out, _ := json.Marshal(map[string]any{"data": data})
	return answer{status: http.StatusOK, ctype: "application/json", body: out}
}
