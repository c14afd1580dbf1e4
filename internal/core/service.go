package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aivax-examples/idempotent-callback/idem"
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
	Policy    idem.Policy
	Retention time.Duration
	Now       func() time.Time // defaults to time.Now
	NewID     func() string    // ticket ids
	// Deliver: a helpdesk destination is configured, so every new ticket,
	// and every effect of a write, is written with its delivery record in
	// state pending (the outbox rule, Service.outbox).
	Deliver bool
	// Tools are the tools the service answers; nil means the product's
	// (create_ticket and get_ticket, as Functions lists them).
	Tools *Tools
	// Cache, when set, is the Guard's idem.Cache: a repeat of a call this
	// process has seen completed is answered from memory, without a store
	// call. Answer runs every check up to the arguments (function, user
	// and tenant, request_id, arguments) before the Guard, so a cached
	// repeat is authorized and validated like any other; the Guard then
	// judges the cached record as it judges the store's (another owner is
	// still a conflict). Share one Cache only among services over the same
	// store. Nil: every write asks the store.
	Cache *idem.Cache
	// Traceparent returns the W3C traceparent of the span in a call's
	// context (tracing.Traceparent), which the service puts on the
	// delivery records the call writes (Writes.Traceparent); nil: none.
	Traceparent func(context.Context) string

	guardOnce sync.Once
	judge     *idem.Guard[Writes]
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
	tools := s.tools()
	fn, ok := tools.Lookup(c.Function)
	defer func() {
		out.Function, out.TenantID, out.Key = c.Function, tenant, key
		if out.Kind == KindBusy && out.Message == "" && fn != nil {
			out.Message = fn.Busy // each tool says what its busy means
		}
	}()

	// Step 4.
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
		return Outcome{Kind: KindBusy, Err: err}
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
		canonical, err = idem.Canonical(c.Content)
	}
	if err != nil {
		return Reject(CodeInvalidArguments, invalidArgumentsMessage(fn, err))
	}
	// Step 8: the tool's read, or its write with the claim on the key.
	r := Request{User: user, Args: args, Canonical: canonical}
	if !fn.Writes() {
		return fn.Read(ctx, s, r)
	}
	out, key = s.write(ctx, fn, r, idem.Call{Tenant: user.TenantID, Owner: user.UserID,
		RequestID: c.RequestID, Function: fn.Name, Arguments: c.Content})
	return out
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
	// idem's refusal carries its reason apart; the tool's own is its text.
	reason := err.Error()
	if bad := (*idem.InvalidError)(nil); errors.As(err, &bad) {
		reason = bad.Reason
	}
	msg := strings.TrimSuffix(reason, ".")
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

// guard is the judge of the service's claims: one idem.Guard under the
// service's Policy and Retention, with its Cache, built on first use
// (Check builds it and checks it at start). It claims through Store's
// claims and reads the service's clock at each call, so a store wrapped
// or a clock set after start (tests do both) is the one used; Policy,
// Retention and Cache are read once.
func (s *Service) guard() *idem.Guard[Writes] {
	s.guardOnce.Do(func() {
		s.judge = &idem.Guard[Writes]{Policy: s.Policy, Retention: s.Retention, Now: s.now, Cache: s.Cache,
			Store: ClaimFunc(func(ctx context.Context, rec idem.Record, w Writes, now time.Time) (*idem.Record, error) {
				return s.Store.Claims().Claim(ctx, rec, w, now)
			})}
	})
	return s.judge
}

// Check reports what makes the service unfit to answer writes: its
// Guard's misconfiguration (idem.Guard.Check), or no NewID. Call it once
// at start.
func (s *Service) Check() error {
	if s.NewID == nil {
		return errors.New("core: Service.NewID is nil")
	}
	return s.guard().Check()
}

// write runs the tool's plan under the call's claim (step 8): idem.Guard
// derives the key, claims it with the plan's writes in one transaction,
// or judges the record that holds it. It returns the answer and the key.
func (s *Service) write(ctx context.Context, fn *Function, r Request, c idem.Call) (Outcome, string) {
	g := s.guard()
	r.NewID = s.NewID
	var planned Writes
	o := g.Do(ctx, c, func(cl idem.Claim) ([]byte, Writes, error) {
		r.Now = cl.At // the plan's items and the record share the claim's time
		stored, w, err := fn.Write.Plan(r, cl.Key)
		if err != nil {
			return nil, Writes{}, err
		}
		planned, err = s.outbox(ctx, r.Now, w)
		return stored, planned, err
	})
	if o.Status == idem.Refused && fn.Write.Refused != nil {
		if i := planned.Refused(o.Err); i >= 0 {
			ref := fn.Write.Refused(ctx, s, r, i)
			if ref.Store == nil {
				return ref.Outcome, o.Key
			}
			// The tool's answer to the refusal is claimed alone: a repeat
			// replays it, and nothing else is written.
			o = g.Do(ctx, c, func(idem.Claim) ([]byte, Writes, error) { return ref.Store, Writes{}, nil })
		}
	}
	return s.answerClaim(fn, o), o.Key
}

// answerClaim is the answer to the Guard's outcome o of fn's call.
func (s *Service) answerClaim(fn *Function, o idem.Outcome) Outcome {
	switch o.Status {
	case idem.Created, idem.Replayed:
		repeat := o.Status == idem.Replayed
		body, ok := fn.Write.Answer(o.Result, repeat)
		if !ok || len(body) == 0 {
			return Outcome{Kind: KindInternal, Err: fmt.Errorf("stored result of %s unreadable: %q", o.Key, o.Result)}
		}
		kind := fn.Answer.Kind
		if repeat {
			kind = KindDuplicate
		}
		return Outcome{Kind: kind, Body: body}
	case idem.Conflict:
		return Outcome{Kind: KindConflict, Code: CodeRequestIDConflict,
			Message: "This request_id already belongs to another user; the application must mint a new request_id."}
	case idem.InProgress:
		return Outcome{Kind: KindInProgress, Message: fn.Write.InProgress}
	case idem.Mismatch:
		return Reject(CodeArgumentsMismatch, fn.Write.Mismatch)
	case idem.Busy:
		return Outcome{Kind: KindBusy, Err: o.Err}
	case idem.Failed:
		if errors.Is(o.Err, ErrBusy) {
			return Outcome{Kind: KindBusy, Err: o.Err} // the outbox rule's read of a ticket
		}
		return Outcome{Kind: KindInternal, Err: o.Err}
	default:
		// Refused without the tool's answer: an item the plan named new
		// exists already, or (SQLite) a statement of the writes failed.
		// Ids are random UUIDs, so a taken id means the generator is
		// broken: a defect, not an unknown outcome. The transaction wrote
		// nothing, but a repeat cannot be promised to succeed, which busy
		// would promise, so it is internal, its cause in Err for the log.
		// Invalid: a record or a configuration the checks should have
		// stopped.
		return Outcome{Kind: KindInternal, Err: o.Err}
	}
}

// outbox applies the outbox rule to a plan's writes at now: every effect
// of a configured destination is delivered, so with Deliver each new
// ticket gets its delivery record and each effect is kept, due at once;
// without it none is. An effect that follows a ticket is kept only when
// that ticket was itself to be delivered (a destination configured after
// the ticket was created gets none of its follow-ups). The tool never
// decides it.
func (s *Service) outbox(ctx context.Context, now time.Time, w Writes) (Writes, error) {
	due := now.Truncate(time.Second)
	tickets := slices.Clone(w.Tickets)
	delivered := make(map[string]bool, len(tickets))
	for i := range tickets {
		tickets[i].Delivery = nil
		if s.Deliver {
			tickets[i].Delivery = &DeliveryStatus{State: DeliveryPending, DueAt: due}
		}
		delivered[tickets[i].ID] = s.Deliver
	}
	items := slices.Clone(w.Items)
	for i := range items {
		e := items[i].Effect
		if e == nil {
			continue
		}
		keep := s.Deliver
		if keep && e.TicketID != "" {
			has, known := delivered[e.TicketID]
			if !known {
				// A read that fails keeps the effect (a ticket of a
				// configured destination has a delivery record, but for
				// those made before it was configured): the plan runs for
				// every call, repeats included, and a repeat must get its
				// stored answer, not this read's error. An effect kept so
				// for a ticket without a delivery record ends failed
				// ("ticket not delivered") when its turn comes.
				t, err := s.Store.Ticket(ctx, e.TicketID)
				has = err != nil && !errors.Is(err, ErrNotFound) || err == nil && t.Delivery != nil
				delivered[e.TicketID] = has
			}
			keep = has
		}
		items[i].Effect = nil
		if keep {
			kept := *e
			kept.DueAt = due
			items[i].Effect = &kept
		}
	}
	planned := Writes{Tickets: tickets, Items: items}
	if s.Deliver && s.Traceparent != nil {
		planned.Traceparent = s.Traceparent(ctx)
	}
	return planned, nil
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

// TimedStore times each call to Store and hands the time to Observe (a
// metrics recorder's StoreCall), with the call's context.
type TimedStore struct {
	Store   Store
	Observe func(ctx context.Context, d time.Duration)
}

// TimedUsers times each read of Users and hands the time to Observe, as a
// store call.
type TimedUsers struct {
	Users   Users
	Observe func(ctx context.Context, d time.Duration)
}

// Claims times each claim's transaction.
func (s TimedStore) Claims() idem.Store[Writes] {
	return ClaimFunc(func(ctx context.Context, rec idem.Record, w Writes, now time.Time) (*idem.Record, error) {
		start := time.Now()
		held, err := s.Store.Claims().Claim(ctx, rec, w, now)
		s.Observe(ctx, time.Since(start))
		return held, err
	})
}

// Ticket times the read.
func (s TimedStore) Ticket(ctx context.Context, id string) (Ticket, error) {
	start := time.Now()
	t, err := s.Store.Ticket(ctx, id)
	s.Observe(ctx, time.Since(start))
	return t, err
}

// Items times the read.
func (s TimedStore) Items(ctx context.Context, keys []string) ([]StoredItem, error) {
	start := time.Now()
	items, err := s.Store.Items(ctx, keys)
	s.Observe(ctx, time.Since(start))
	return items, err
}

// User times the read.
func (s TimedUsers) User(ctx context.Context, externalID string) (User, error) {
	start := time.Now()
	u, err := s.Users.User(ctx, externalID)
	s.Observe(ctx, time.Since(start))
	return u, err
}
