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

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
)

// MaxRequestIDLen is the longest metadata.request_id accepted, in characters.
const MaxRequestIDLen = 128

// RequestIDField is where the callback's body carries the request_id: the
// place the request_id rejections name unless the call says another
// (Call.RequestIDAt).
const RequestIDField = "metadata.request_id"

// MaxExternalUserIDLen is the longest externalUserId that can name a user,
// in bytes. A user record's key is "USER#" plus the id, and DynamoDB refuses
// a partition key over 2048 bytes with a ValidationException; a longer id
// names no user on any store, so it is refused (403) without a store call.
const MaxExternalUserIDLen = 1024

// Call is a parsed, authenticated callback body, reduced to what the
// checks need.
type Call struct {
	Function       string
	Content        json.RawMessage // function.content: any JSON value, an object when valid
	ExternalUserID string          // "" when missing or null
	RequestID      string          // "" when missing or null
	// ExternalUserIDMalformed is set when externalUserId is a string with
	// invalid UTF-8 or a lone surrogate escape: it names no user.
	ExternalUserIDMalformed bool
	// RequestIDNotString is set when metadata.request_id is present but not
	// a JSON string.
	RequestIDNotString bool
	// RequestIDMalformed is set when metadata.request_id is a string with
	// invalid UTF-8 or a lone surrogate escape. A decoder that replaced them
	// with U+FFFD would give two different request_ids one key.
	RequestIDMalformed bool
	// RequestIDAt is where the door's caller puts the request_id, as the
	// request_id rejections name it (each door has its own place);
	// RequestIDField when empty.
	RequestIDAt string
	// User is the record of ExternalUserID when the door has read it from
	// the service's Users for this request (the MCP door does, before the
	// body is parsed); Answer reads it from Users when nil.
	User *User
}

// Service runs the checks after the body is parsed (function, user,
// request_id, arguments) and the store transaction.
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
	// Tools are the tools the service answers; nil means the product's
	// (create_ticket and get_ticket, as Functions lists them).
	Tools *Tools
}

func (s *Service) tools() *Tools {
	if s == nil || s.Tools == nil {
		return &product
	}
	return s.Tools
}

// Functions returns the service's tools, in the order GET /functions and
// MCP tools/list list them (see Tools.Functions).
func (s *Service) Functions() []Function { return s.tools().Functions() }

// Lookup finds one of the service's tools by name (see Tools.Lookup).
func (s *Service) Lookup(name string) (*Function, bool) { return s.tools().Lookup(name) }

// Answer runs the checks of a parsed call in order (function, user,
// request_id, arguments: steps 4 to 7 of docs/contract.md, Order of
// checks), then creates or reads (step 8), and says what happened.
// It never panics on bad input and writes nothing for a call it rejects.
// Whatever the answer, the outcome names the function, the tenant once
// the user is known and the operation key once derived, for the log.
func (s *Service) Answer(ctx context.Context, c Call) (out Outcome) {
	var tenant, key string
	defer func() { out.Function, out.TenantID, out.Key = c.Function, tenant, key }()

	// Step 4.
	tools := s.tools()
	fn, ok := tools.Lookup(c.Function)
	if !ok {
		return Reject(CodeUnknownFunction, fmt.Sprintf(
			"There is no function named %q here; call %s instead.", clip(c.Function), tools.names()))
	}
	// Step 5: identity, and the tenant from the user's record only. The
	// user is authorized before the store is read or written.
	if c.ExternalUserID == "" {
		return Reject(CodeMissingExternalUserID,
			"The call carries no externalUserId, so it cannot be tied to a user. Do not invent one: tell the user the request could not be completed.")
	}
	if c.ExternalUserIDMalformed || NamesNoUser(c.ExternalUserID) {
		return Outcome{Kind: KindForbidden} // names no user on any store
	}
	user, err := s.user(ctx, c)
	switch {
	case errors.Is(err, ErrNotFound):
		return Outcome{Kind: KindForbidden}
	case errors.Is(err, ErrBusy):
		return busy(err)
	case err != nil:
		return Outcome{Kind: KindInternal, Err: err}
	}
	tenant = user.TenantID
	if user.Disabled {
		return Outcome{Kind: KindForbidden}
	}
	// Step 6, for functions that write.
	if fn.Writes() {
		if out, bad := checkRequestID(c); bad {
			return out
		}
	}
	// Step 7, then the limits of the operation key, which hold for every
	// function, not only the ones that derive a key.
	args, err := fn.Validate(c.Content)
	var canonical string
	if err == nil {
		canonical, err = opkey.Canonical(c.Content)
	}
	if err != nil {
		return Reject(CodeInvalidArguments, invalidArgumentsMessage(fn, err))
	}
	// Step 8: the tool's read, or its write with the claim on the key.
	r := Request{User: user, Args: args, Canonical: canonical}
	if !fn.Writes() {
		return fn.Read(ctx, s, r)
	}
	var fingerprint string
	key, fingerprint = opkey.Key(s.Policy, user.TenantID, c.RequestID, fn.Name, canonical)
	// The call's key under the other policy: an operation claimed there
	// before key_policy changed still answers its repeats.
	alt, _ := opkey.Key(s.Policy.Other(), user.TenantID, c.RequestID, fn.Name, canonical)
	return s.write(ctx, fn, r, key, alt, fingerprint)
}

// user is the record of c's user: the door's, or read from Users.
func (s *Service) user(ctx context.Context, c Call) (User, error) {
	if c.User != nil {
		return *c.User, nil
	}
	return s.Users.User(ctx, c.ExternalUserID)
}

func invalidArgumentsMessage(fn *Function, err error) string {
	// err may start with a function or field name, whose case the model
	// must see unchanged, and may end with a field description's '.'.
	msg := strings.TrimSuffix(strings.TrimPrefix(err.Error(), opkey.ErrInvalid.Error()+": "), ".")
	return fmt.Sprintf("Invalid arguments: %s. Correct the arguments, then call %s again with the same request.", msg, fn.Name)
}

func checkRequestID(c Call) (Outcome, bool) {
	at := c.RequestIDAt
	if at == "" {
		at = RequestIDField
	}
	fix := " The application must set " + at + "; do not retry, tell the user the request could not be completed."
	switch {
	case c.RequestIDNotString:
		return Reject(CodeInvalidRequestID, at+" must be a string."+fix), true
	case c.RequestID == "":
		return Reject(CodeMissingRequestID, "The call carries no "+at+", so it cannot be made safe to repeat."+fix), true
	case c.RequestIDMalformed || !utf8.ValidString(c.RequestID):
		return Reject(CodeInvalidRequestID, at+" must be well-formed Unicode text."+fix), true
	case utf8.RuneCountInString(c.RequestID) > MaxRequestIDLen ||
		strings.IndexFunc(c.RequestID, unicode.IsControl) >= 0:
		return Reject(CodeInvalidRequestID, fmt.Sprintf(
			"%s must be at most %d characters without control characters.", at, MaxRequestIDLen)+fix), true
	}
	return Outcome{}, false
}

// write claims key and writes the tool's items in one transaction (step
// 8), or answers from the operation that already holds the key.
func (s *Service) write(ctx context.Context, fn *Function, r Request, key, alt, fingerprint string) Outcome {
	r.Now = s.now()
	op := Operation{
		Key: key, AltKey: alt, State: StateCompleted, TenantID: r.User.TenantID, UserID: r.User.UserID,
		Function: fn.Name, Fingerprint: fingerprint,
		CreatedAt: r.Now, ExpiresAt: r.Now.Add(s.Retention).Truncate(time.Second),
	}
	out, existing, err := fn.Write.Commit(ctx, s, r, op)
	switch {
	case errors.Is(err, ErrBusy):
		return busy(err)
	case err != nil:
		return Outcome{Kind: KindInternal, Err: err}
	case existing == nil:
		return out
	}
	return s.repeat(fn.Write, r.User, fingerprint, existing)
}

// repeat answers a call whose key a live operation already holds. The
// checks are idem.Verdict's, in its order: the caller is authorized
// before anything stored is disclosed.
func (s *Service) repeat(w *Write, user User, fingerprint string, existing *Operation) Outcome {
	rec := existing.Record()
	switch idem.Verdict(&rec, s.Policy, user.TenantID, user.UserID, fingerprint) {
	case idem.Conflict:
		return Outcome{Kind: KindConflict, Code: CodeRequestIDConflict,
			Message: "This request_id already belongs to another user; the application must mint a new request_id."}
	case idem.InProgress:
		return Outcome{Kind: KindInProgress, Message: w.InProgress}
	case idem.Mismatch:
		return Reject(CodeArgumentsMismatch, w.Mismatch)
	}
	out, ok := w.Replay(existing.Result)
	if !ok {
		return Outcome{Kind: KindInternal, Err: fmt.Errorf("stored result of %s unreadable: %q", existing.Key, existing.Result)}
	}
	return out
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

// NamesNoUser reports whether id can name no user on any store: longer
// than MaxExternalUserIDLen bytes, or not valid UTF-8. Such an id is
// refused (403) without a lookup.
func NamesNoUser(id string) bool {
	return len(id) > MaxExternalUserIDLen || !utf8.ValidString(id)
}

// CheckUserIDs refuses a configured user whose id the service would never
// look up: longer than MaxExternalUserIDLen bytes. The error does not
// repeat the id; the caller names the setting.
func CheckUserIDs[U any](users map[string]U) error {
	for id := range users {
		if len(id) > MaxExternalUserIDLen {
			return fmt.Errorf("an id of %d bytes; at most %d", len(id), MaxExternalUserIDLen)
		}
	}
	return nil
}
