package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aivax-examples/idempotent-callback/internal/opkey"
)

// MaxRequestIDLen is the longest metadata.request_id accepted, in characters.
const MaxRequestIDLen = 128

// Call is a parsed, authenticated callback body: what SPEC section 2 sends,
// reduced to what the checks need.
type Call struct {
	Function       string
	Content        json.RawMessage // function.content, a JSON object
	ExternalUserID string          // "" when missing or null
	RequestID      string          // "" when missing or null
	// RequestIDNotString is set when metadata.request_id is present but not
	// a JSON string.
	RequestIDNotString bool
}

// Service runs SPEC section 3 steps 4 to 8 for a parsed call.
type Service struct {
	Store     Store
	Users     Users
	Policy    opkey.Policy
	Retention time.Duration
	Now       func() time.Time // defaults to time.Now
	NewID     func() string    // ticket ids
	// Deliver: a helpdesk destination is configured, so every new ticket is
	// written with its delivery record in state pending.
	Deliver bool
}

// Handle answers one call. It never panics on bad input and writes nothing
// for a call it rejects.
func (s *Service) Handle(ctx context.Context, c Call) Outcome {
	out := s.handle(ctx, c)
	out.Function = c.Function
	return out
}

func (s *Service) handle(ctx context.Context, c Call) Outcome {
	// Step 4.
	fn, ok := LookupFunction(c.Function)
	if !ok {
		return Reject(CodeUnknownFunction, fmt.Sprintf(
			"There is no function named %q here; call create_ticket or get_ticket instead.", clip(c.Function)))
	}
	// Step 5: identity, and the tenant from the user's record only.
	if c.ExternalUserID == "" {
		return Reject(CodeMissingExternalUserID,
			"The call carries no externalUserId, so it cannot be tied to a user. Do not invent one: tell the user the request could not be completed.")
	}
	user, err := s.Users.User(ctx, c.ExternalUserID)
	switch {
	case errors.Is(err, ErrNotFound):
		return Outcome{Kind: KindForbidden}
	case errors.Is(err, ErrBusy):
		return busy(err)
	case err != nil:
		return Outcome{Kind: KindInternal, Err: err}
	case user.Disabled:
		return Outcome{Kind: KindForbidden, TenantID: user.TenantID}
	}
	out := s.handleAs(ctx, fn, user, c)
	out.TenantID = user.TenantID
	return out
}

// handleAs runs steps 6 to 8 for an authorized, enabled user.
func (s *Service) handleAs(ctx context.Context, fn *Function, user User, c Call) Outcome {
	// Step 6, for functions that write.
	if fn.Writes {
		if out, bad := checkRequestID(c); bad {
			return out
		}
	}
	// Step 7, then the limits of SPEC section 4, which hold for every
	// function, not only the ones that derive a key.
	args, err := fn.Validate(c.Content)
	var canonical string
	if err == nil {
		canonical, err = opkey.Canonical(c.Content)
	}
	if err != nil {
		return Reject(CodeInvalidArguments, invalidArgumentsMessage(fn, err))
	}
	switch fn.Name {
	case CreateTicket:
		key, fingerprint := opkey.Key(s.Policy, user.TenantID, c.RequestID, fn.Name, canonical)
		out := s.create(ctx, fn, user, key, fingerprint, canonical)
		out.Key = key
		return out
	case GetTicket:
		return s.getTicket(ctx, user, args["ticket_id"])
	}
	return Outcome{Kind: KindInternal, Err: fmt.Errorf("function %s has no implementation", fn.Name)}
}

func invalidArgumentsMessage(fn *Function, err error) string {
	// err may start with a function or field name, whose case the model
	// must see unchanged, and may end with a field description's '.'.
	msg := strings.TrimSuffix(strings.TrimPrefix(err.Error(), opkey.ErrInvalid.Error()+": "), ".")
	return fmt.Sprintf("Invalid arguments: %s. Correct the arguments, then call %s again with the same request.", msg, fn.Name)
}

func checkRequestID(c Call) (Outcome, bool) {
	const fix = " The application must set metadata.request_id; do not retry, tell the user the request could not be completed."
	switch {
	case c.RequestIDNotString:
		return Reject(CodeInvalidRequestID, "metadata.request_id must be a string."+fix), true
	case c.RequestID == "":
		return Reject(CodeMissingRequestID, "The call carries no metadata.request_id, so it cannot be made safe to repeat."+fix), true
	case utf8.RuneCountInString(c.RequestID) > MaxRequestIDLen ||
		strings.IndexFunc(c.RequestID, unicode.IsControl) >= 0 ||
		!utf8.ValidString(c.RequestID):
		return Reject(CodeInvalidRequestID, fmt.Sprintf(
			"metadata.request_id must be at most %d characters without control characters.", MaxRequestIDLen)+fix), true
	}
	return Outcome{}, false
}

// createdResult is the stored result of create_ticket; a repeat replays it
// with deduplicated set to true.
type createdResult struct {
	Status   string `json:"status"`
	TicketID string `json:"ticket_id"`
}

// create claims key and writes the ticket in one transaction (step 8), or
// answers from the operation that already holds the key.
func (s *Service) create(ctx context.Context, fn *Function, user User, key, fingerprint, canonical string) Outcome {
	now := s.now()
	ticketID := s.NewID()
	result, err := json.Marshal(createdResult{Status: "created", TicketID: ticketID})
	if err != nil {
		return Outcome{Kind: KindInternal, Err: err}
	}
	op := Operation{
		Key: key, State: StateCompleted, TenantID: user.TenantID, UserID: user.UserID,
		Function: fn.Name, Fingerprint: fingerprint, Result: result,
		CreatedAt: now, ExpiresAt: now.Add(s.Retention).Truncate(time.Second),
	}
	t := Ticket{ID: ticketID, TenantID: user.TenantID, UserID: user.UserID,
		OperationKey: key, Arguments: canonical, CreatedAt: now}
	if s.Deliver {
		// Due at once: the second it was created in.
		t.Delivery = &Delivery{State: DeliveryPending, DueAt: now.Truncate(time.Second)}
	}
	existing, err := s.Store.Create(ctx, op, t, now)
	switch {
	case errors.Is(err, ErrBusy):
		return busy(err)
	case err != nil:
		return Outcome{Kind: KindInternal, Err: err}
	case existing == nil:
		return Outcome{Kind: KindCreated, TicketID: ticketID}
	}
	return s.repeat(user, fingerprint, existing)
}

// repeat answers a call whose key a live operation already holds. The
// caller is authorized before anything stored is disclosed.
func (s *Service) repeat(user User, fingerprint string, existing *Operation) Outcome {
	if existing.TenantID != user.TenantID || existing.UserID != user.UserID {
		return Outcome{Kind: KindConflict, Code: CodeRequestIDConflict,
			Message: "This request_id already belongs to another user; the application must mint a new request_id."}
	}
	if existing.State == StatePending {
		return Outcome{Kind: KindInProgress,
			Message: "The same operation is still in progress; do not create another ticket. Check again later with the same arguments and request."}
	}
	if s.Policy == opkey.PolicyRequest && existing.Fingerprint != fingerprint {
		return Reject(CodeArgumentsMismatch,
			"This request already created a ticket with other arguments; do not create another. Tell the user, and start a new request only if they want a second ticket.")
	}
	var r createdResult
	if err := json.Unmarshal(existing.Result, &r); err != nil || r.TicketID == "" {
		return Outcome{Kind: KindInternal, Err: fmt.Errorf("stored result of %s unreadable: %v", existing.Key, err)}
	}
	return Outcome{Kind: KindDuplicate, Result: existing.Result, TicketID: r.TicketID}
}

func (s *Service) getTicket(ctx context.Context, user User, id string) Outcome {
	notFound := Reject(CodeTicketNotFound,
		"No ticket with this ticket_id exists for this user; check the ticket_id, or ask the user for it.")
	t, err := s.Store.Ticket(ctx, strings.TrimSpace(id))
	switch {
	case errors.Is(err, ErrNotFound):
		return notFound
	case errors.Is(err, ErrBusy):
		return busy(err)
	case err != nil:
		return Outcome{Kind: KindInternal, Err: err}
	case t.TenantID != user.TenantID:
		return notFound // the same answer as a missing ticket
	}
	var a struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		Priority    string `json:"priority"`
	}
	if err := json.Unmarshal([]byte(t.Arguments), &a); err != nil {
		return Outcome{Kind: KindInternal, Err: fmt.Errorf("ticket %s arguments unreadable: %v", t.ID, err)}
	}
	if a.Priority == "" {
		a.Priority = defaultPriority
	}
	return Outcome{Kind: KindFound, Ticket: &TicketView{
		TicketID: t.ID, Title: a.Title, Description: a.Description, Priority: a.Priority,
		CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339), Delivery: deliveryView(t.Delivery),
	}}
}

// deliveryView shows a ticket's delivery state, and the helpdesk's id and
// URL once delivered.
func deliveryView(d *Delivery) *DeliveryView {
	if d == nil || d.State == "" {
		return nil
	}
	v := &DeliveryView{State: d.State}
	if d.State == "delivered" {
		v.ExternalID, v.ExternalURL = d.ExternalID, d.ExternalURL
	}
	return v
}

func busy(err error) Outcome {
	return Outcome{Kind: KindBusy, Err: err,
		Message: "The ticket store is busy and the outcome is unknown. Call the function again with exactly the same arguments and request; it will not create a second ticket."}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
