package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// Writes are the items a write tool commits with its claim, in the one
// transaction that claims the call's key: the product's writes, whatever
// the store. A tool's plan returns them; it never writes itself.
//
// Every store executes them generically: it knows the ticket's typed
// fields (Ticket), and beyond them only keys, attributes, conditions and
// effects. A tool with a kind of item of its own (a comment, a note, an
// order) needs no change to any store.
type Writes struct {
	// Tickets are created, each only if its id is new: an id already
	// taken refuses the whole claim (idem.Refused) and writes nothing.
	Tickets []Ticket
	// Items are the tool's other writes, after the tickets: each a put of
	// a new item, an update of an item under conditions, or a condition
	// alone. A condition that fails refuses the whole claim, at the
	// write's index (Writes.Refused), and writes nothing.
	Items []ItemWrite
	// Traceparent is the W3C traceparent of the call that makes the
	// writes, stored with each delivery record they create (a ticket's,
	// an effect's) so that its delivery links to the call; the service
	// sets it (Service.Traceparent), "" when the call is not traced.
	Traceparent string
}

// Item is an item's attributes by name. A value is a string, an int64, a
// bool or a []string (a list, in order); the stores keep each type as it
// is and read it back as the same type.
type Item map[string]any

// Str is the string attribute name, "" when absent or not a string.
func (it Item) Str(name string) string { s, _ := it[name].(string); return s }

// Int is the int64 attribute name, 0 when absent or not an int64.
func (it Item) Int(name string) int64 { n, _ := it[name].(int64); return n }

// List is the list attribute name, nil when absent or not a list.
func (it Item) List(name string) []string { l, _ := it[name].([]string); return l }

// WriteOp is what an ItemWrite does.
type WriteOp int

// The write operations.
const (
	// PutNew puts the item only if no item has its key; an item there
	// refuses the claim.
	PutNew WriteOp = iota + 1
	// Update sets attributes of the item and appends to its lists, only
	// if its conditions hold (the item need not exist unless a condition
	// says so).
	Update
	// Check writes nothing: its conditions must hold.
	Check
)

// CondOp is what a condition requires of an item.
type CondOp int

// The conditions.
const (
	// Exists: the item exists (Attr and Value unused).
	Exists CondOp = iota + 1
	// Equals: the item exists and its attribute Attr is Value.
	Equals
	// EqualsOrAbsent: the item has no attribute Attr, or it is Value.
	EqualsOrAbsent
	// SizeBelow: the list attribute Attr has fewer than Value (an int)
	// elements; an absent list is empty.
	SizeBelow
)

// Cond is one condition of an ItemWrite.
type Cond struct {
	Op    CondOp
	Attr  string
	Value any
}

// ItemWrite is one of a tool's writes: keyed, conditioned, generic.
type ItemWrite struct {
	Op WriteOp
	// Key is the item's key, "<KIND>#<id>" (TicketKey for a ticket).
	Key string
	// Set: PutNew, the item's attributes (without the key); Update, the
	// attributes set.
	Set Item
	// Append: Update only, one value appended to each named list
	// attribute (the list is made when absent).
	Append map[string]string
	// If are the conditions of an Update or a Check, all of which must
	// hold.
	If []Cond
	// Effect, on a PutNew, makes the item an outbox record: the effect is
	// delivered to the configured destination. The service keeps it only
	// where the outbox rule says so (Service.outbox); a store writes the
	// delivery record of each Effect it is given, in the same
	// transaction.
	Effect *Effect
}

// Effect is what a destination receives of an item: its kind (the
// destination's choice of call depends on it), its delivery key, and the
// body the tool made for it.
type Effect struct {
	// Kind names the effect: "comment", "close", or a tool's own.
	Kind string
	// ID is the delivery key: sent as the destination's idempotency key
	// and never changed across retries (a fresh UUID per effect).
	ID string
	// TicketID is the ticket the effect follows, "" for one that follows
	// none. An effect that follows a ticket is delivered after the ticket
	// and after the effects listed before it in the ticket's FollowUps;
	// the tool that writes it appends its key there in the same
	// transaction.
	TicketID string
	// Payload is the effect's body as a JSON object with its "type" (the
	// webhook's body, byte for byte on every resend); the other
	// destinations read their fields from it.
	Payload json.RawMessage
	// DueAt is when it is first due; the service sets it.
	DueAt time.Time
}

// EffectKeyPrefix returns the key prefix of an item whose kind is kind:
// "COMMENT#" for "comment".
func EffectKeyPrefix(kind string) string { return strings.ToUpper(kind) + "#" }

// TicketKeyPrefix is the key prefix of a ticket's item.
const TicketKeyPrefix = "TICKET#"

// TicketKey is the key of ticket id's item, as an ItemWrite names it.
func TicketKey(id string) string { return TicketKeyPrefix + id }

// AttrFollowUps is the ticket's list of the keys of the items that follow
// it, in commit order (a comment's, a close's): the order of their
// delivery, and of get_ticket's comments. Its tools append to it.
const AttrFollowUps = "followups"

// Ticket attributes a ticket's own columns hold (Ticket's fields); every
// other attribute of a ticket's item is in Ticket.Attrs.
const (
	AttrTenantID = "tenant_id"
	AttrUserID   = "user_id"
)

// StoredItem is an item as a store reads it back: its attributes and, for
// an outbox record, its delivery.
type StoredItem struct {
	Key      string
	Attrs    Item
	Delivery *DeliveryStatus
}

// Refused returns the ItemWrite of w a refused claim names (the index of
// an idem.RefusedError counts the tickets first, then the items), or -1.
func (w Writes) Refused(err error) int {
	i := -1
	var ce *ConditionError
	var r *idem.RefusedError
	switch {
	case errors.As(err, &ce):
		i = ce.Index
	case errors.As(err, &r):
		i = r.Index
	}
	if i < len(w.Tickets) || i >= len(w.Tickets)+len(w.Items) {
		return -1
	}
	return i - len(w.Tickets)
}

// CheckItemWrites refuses writes a store could not execute faithfully: a
// key without its "<KIND>#" prefix, an op or condition out of range, a
// value of a type the stores do not keep, two writes of one key (DynamoDB
// refuses them in one transaction), or an effect on anything but a
// PutNew. The stores call it before they write.
func CheckItemWrites(items []ItemWrite) error {
	seen := make(map[string]bool, len(items))
	for i, w := range items {
		switch {
		case !strings.Contains(w.Key, "#") || strings.HasPrefix(w.Key, "#") || strings.HasSuffix(w.Key, "#"):
			return fmt.Errorf("core: item write %d: key %q is not <KIND>#<id>", i, w.Key)
		case seen[w.Key]:
			return fmt.Errorf("core: item write %d: key %q written twice", i, w.Key)
		case w.Op < PutNew || w.Op > Check:
			return fmt.Errorf("core: item write %d: op %d", i, w.Op)
		case w.Effect != nil && w.Op != PutNew:
			return fmt.Errorf("core: item write %d: only a PutNew carries an effect", i)
		case w.Op != Update && len(w.Append) > 0:
			return fmt.Errorf("core: item write %d: only an Update appends", i)
		case w.Op == PutNew && len(w.If) > 0:
			return fmt.Errorf("core: item write %d: a PutNew takes no conditions", i)
		}
		seen[w.Key] = true
		for name, v := range w.Set {
			if err := checkValue(v); err != nil {
				return fmt.Errorf("core: item write %d: attribute %s: %w", i, name, err)
			}
		}
		for _, c := range w.If {
			if c.Op < Exists || c.Op > SizeBelow || (c.Op != Exists && c.Attr == "") {
				return fmt.Errorf("core: item write %d: condition %+v", i, c)
			}
			if _, ok := c.Value.(int); c.Op == SizeBelow && !ok {
				return fmt.Errorf("core: item write %d: SizeBelow takes an int", i)
			}
		}
		if e := w.Effect; e != nil && (e.Kind == "" || e.ID == "" || !json.Valid(e.Payload)) {
			return fmt.Errorf("core: item write %d: an effect needs a kind, an id and a JSON payload", i)
		}
	}
	return nil
}

func checkValue(v any) error {
	switch v.(type) {
	case string, int64, bool, []string:
		return nil
	}
	return fmt.Errorf("a %T; the stores keep string, int64, bool and []string", v)
}

// Holds reports whether c holds for item (nil when it does not exist):
// the conditions as the stores that evaluate them in Go (SQLite, memory)
// read them, and as DynamoDB's expressions say them.
func (c Cond) Holds(item Item) bool {
	if item == nil {
		return c.Op == EqualsOrAbsent || c.Op == SizeBelow
	}
	v, has := item[c.Attr]
	switch c.Op {
	case Exists:
		return true
	case Equals:
		return has && equal(v, c.Value)
	case EqualsOrAbsent:
		return !has || equal(v, c.Value)
	case SizeBelow:
		n, _ := c.Value.(int)
		l, _ := v.([]string)
		return len(l) < n
	}
	return false
}

func equal(a, b any) bool {
	switch a := a.(type) {
	case string:
		b, ok := b.(string)
		return ok && a == b
	case int64:
		b, ok := b.(int64)
		return ok && a == b
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	}
	return false
}

// ErrCondition is the error a store that evaluates conditions in Go
// returns, wrapped in a ConditionError, for a write whose condition
// failed.
var ErrCondition = errors.New("condition failed")

// ConditionError names the item write whose condition failed, for the
// stores whose claim refuses with an index they cannot set themselves
// (sqlitestore and memstore run the caller's function).
type ConditionError struct{ Index int }

func (e *ConditionError) Error() string {
	return fmt.Sprintf("item write %d: %v", e.Index, ErrCondition)
}

// Unwrap is ErrCondition.
func (e *ConditionError) Unwrap() error { return ErrCondition }

// ApplyItemWrites applies items to the items get and put read and write,
// checking each write's conditions first (all of them before any write):
// the generic execution of a store that holds the write lock while it
// runs (SQLite, memory). get returns nil for an absent item. A refusal is
// a *ConditionError with the index among Writes (tickets first:
// offset is len(Writes.Tickets)).
func ApplyItemWrites(items []ItemWrite, offset int, get func(key string) (Item, error), put func(key string, it Item, e *Effect, isNew bool) error) error {
	if err := CheckItemWrites(items); err != nil {
		return err
	}
	current := make([]Item, len(items))
	for i, w := range items {
		it, err := get(w.Key)
		if err != nil {
			return err
		}
		if w.Op == PutNew && it != nil {
			return &ConditionError{Index: offset + i}
		}
		for _, c := range w.If {
			if !c.Holds(it) {
				return &ConditionError{Index: offset + i}
			}
		}
		current[i] = it
	}
	for i, w := range items {
		if w.Op == Check {
			continue
		}
		it := make(Item, len(current[i])+len(w.Set)+len(w.Append))
		for k, v := range current[i] {
			it[k] = v
		}
		for k, v := range w.Set {
			it[k] = v
		}
		for k, v := range w.Append {
			l, _ := it[k].([]string)
			it[k] = append(append([]string(nil), l...), v)
		}
		if err := put(w.Key, it, w.Effect, current[i] == nil); err != nil {
			return err
		}
	}
	return nil
}
