package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/sqlitetest"
)

// claimWrites claims key with w (hardeningRecords' operation) and returns
// the claim's error; a held record fails the test.
func claimWrites(t *testing.T, s *sqlite.Store, key string, w core.Writes) error {
	t.Helper()
	rec, _, now := hardeningRecords(key, "")
	held, err := s.Claims().Claim(context.Background(), rec, w, now)
	if held != nil {
		t.Fatalf("claim %s: key held by %+v", key, held)
	}
	return err
}

// mustClaim claims key with w, failing the test on an error.
func mustClaim(t *testing.T, s *sqlite.Store, key string, w core.Writes) {
	t.Helper()
	if err := claimWrites(t, s, key, w); err != nil {
		t.Fatalf("claim %s: %v", key, err)
	}
}

// newTicket is ticket id of tenant "t" and user "u" as hardeningRecords
// makes it, with a pending delivery due at due when due is not zero.
func newTicket(id string, due time.Time) core.Ticket {
	_, tk, _ := hardeningRecords("k-"+id, id)
	if !due.IsZero() {
		tk.Delivery = &core.DeliveryStatus{State: core.DeliveryPending, DueAt: due}
	}
	return tk
}

// item reads one item by Items, nil when absent.
func item(t *testing.T, s *sqlite.Store, key string) *core.StoredItem {
	t.Helper()
	items, err := s.Items(context.Background(), []string{key})
	if err != nil {
		t.Fatalf("Items(%s): %v", key, err)
	}
	if len(items) == 0 {
		return nil
	}
	return &items[0]
}

// operations counts the stored operations of key.
func operations(t *testing.T, s *sqlite.Store, key string) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(`SELECT COUNT(*) FROM operations WHERE key = ?`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Each condition, holding and failing, on a ticket's item and on another
// item: a claim whose condition holds commits all its writes; one whose
// condition fails is refused at that write's index (counted after the
// claim's ticket) and writes nothing, neither the ticket, nor the writes
// before or after the failing one, nor the operation.
func TestItemConditions(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "items.sqlite"))
	mustClaim(t, s, "k-setup-ticket", core.Writes{Tickets: []core.Ticket{newTicket("tk", time.Time{})}})
	mustClaim(t, s, "k-setup-items", core.Writes{Items: []core.ItemWrite{
		{Op: core.PutNew, Key: "NOTE#1", Set: core.Item{"touched": int64(-1)}},
		{Op: core.PutNew, Key: "NOTE#3", Set: core.Item{"body": "b"}},
		{Op: core.Update, Key: core.TicketKey("tk"), Set: core.Item{"status": "closed", "count": int64(3), "urgent": true},
			Append: map[string]string{core.AttrFollowUps: "NOTE#1"}},
	}})
	tk := core.TicketKey("tk")
	cases := []struct {
		name  string
		key   string
		cond  core.Cond
		holds bool
	}{
		{"exists", tk, core.Cond{Op: core.Exists}, true},
		{"exists, ticket absent", core.TicketKey("none"), core.Cond{Op: core.Exists}, false},
		{"exists, item absent", "NOTE#2", core.Cond{Op: core.Exists}, false},
		{"equals, typed column", tk, core.Cond{Op: core.Equals, Attr: core.AttrTenantID, Value: "t"}, true},
		{"equals, typed column differs", tk, core.Cond{Op: core.Equals, Attr: core.AttrTenantID, Value: "t2"}, false},
		{"equals, user column", tk, core.Cond{Op: core.Equals, Attr: core.AttrUserID, Value: "u"}, true},
		{"equals, string attribute", tk, core.Cond{Op: core.Equals, Attr: "status", Value: "closed"}, true},
		{"equals, int attribute", tk, core.Cond{Op: core.Equals, Attr: "count", Value: int64(3)}, true},
		{"equals, int attribute differs", tk, core.Cond{Op: core.Equals, Attr: "count", Value: int64(4)}, false},
		{"equals, int attribute against a string", tk, core.Cond{Op: core.Equals, Attr: "count", Value: "3"}, false},
		{"equals, bool attribute", tk, core.Cond{Op: core.Equals, Attr: "urgent", Value: true}, true},
		{"equals, attribute absent", tk, core.Cond{Op: core.Equals, Attr: "resolution", Value: ""}, false},
		{"equals, item attribute", "NOTE#3", core.Cond{Op: core.Equals, Attr: "body", Value: "b"}, true},
		{"equals, item absent", "NOTE#2", core.Cond{Op: core.Equals, Attr: "body", Value: "b"}, false},
		{"equals or absent, attribute absent", tk, core.Cond{Op: core.EqualsOrAbsent, Attr: "resolution", Value: "x"}, true},
		{"equals or absent, equal", tk, core.Cond{Op: core.EqualsOrAbsent, Attr: "status", Value: "closed"}, true},
		{"equals or absent, differs", tk, core.Cond{Op: core.EqualsOrAbsent, Attr: "status", Value: "open"}, false},
		{"equals or absent, item absent", "NOTE#2", core.Cond{Op: core.EqualsOrAbsent, Attr: "status", Value: "open"}, true},
		{"size below", tk, core.Cond{Op: core.SizeBelow, Attr: core.AttrFollowUps, Value: 2}, true},
		{"size below, at the bound", tk, core.Cond{Op: core.SizeBelow, Attr: core.AttrFollowUps, Value: 1}, false},
		{"size below, list absent", tk, core.Cond{Op: core.SizeBelow, Attr: "other", Value: 1}, true},
		{"size below, item absent", "NOTE#2", core.Cond{Op: core.SizeBelow, Attr: core.AttrFollowUps, Value: 1}, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key, ticketID, note := fmt.Sprintf("k-%d", i), fmt.Sprintf("new-%d", i), fmt.Sprintf("NOTE#new-%d", i)
			w := core.Writes{Tickets: []core.Ticket{newTicket(ticketID, time.Time{})}, Items: []core.ItemWrite{
				{Op: core.Update, Key: "NOTE#1", Set: core.Item{"touched": int64(i)}},
				{Op: core.Check, Key: c.key, If: []core.Cond{c.cond}},
				{Op: core.PutNew, Key: note, Set: core.Item{"n": int64(i)}},
			}}
			err := claimWrites(t, s, key, w)
			if c.holds {
				if err != nil {
					t.Fatalf("claim: %v, want it committed", err)
				}
				if got := item(t, s, "NOTE#1").Attrs.Int("touched"); got != int64(i) || item(t, s, note) == nil ||
					operations(t, s, key) != 1 {
					t.Fatalf("committed, yet touched = %d, %s present %v, operation stored %d", got, note,
						item(t, s, note) != nil, operations(t, s, key))
				}
				if _, err := s.Ticket(context.Background(), ticketID); err != nil {
					t.Fatalf("the claim's ticket: %v", err)
				}
				return
			}
			var refused *idem.RefusedError
			if !errors.As(err, &refused) || !errors.Is(err, core.ErrCondition) || w.Refused(err) != 1 {
				t.Fatalf("claim: %v (Refused %d), want a refusal at item 1", err, w.Refused(err))
			}
			if got := item(t, s, "NOTE#1").Attrs.Int("touched"); got == int64(i) {
				t.Fatalf("refused, yet the write before the failing one is there")
			}
			if item(t, s, note) != nil || operations(t, s, key) != 0 {
				t.Fatalf("refused, yet %s or the operation is there", note)
			}
			if _, err := s.Ticket(context.Background(), ticketID); !errors.Is(err, core.ErrNotFound) {
				t.Fatalf("refused, yet the claim's ticket reads %v", err)
			}
		})
	}
}

// A PutNew on a key that exists is refused at its index; an Update whose
// conditions fail is too, and changes nothing.
func TestItemPutNewAndUpdateRefused(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "items.sqlite"))
	mustClaim(t, s, "k1", core.Writes{Tickets: []core.Ticket{newTicket("tk", time.Time{})},
		Items: []core.ItemWrite{{Op: core.PutNew, Key: "NOTE#1", Set: core.Item{"v": "first"}}}})

	w := core.Writes{Items: []core.ItemWrite{
		{Op: core.PutNew, Key: "NOTE#2", Set: core.Item{"v": "x"}},
		{Op: core.PutNew, Key: "NOTE#1", Set: core.Item{"v": "second"}},
	}}
	if err := claimWrites(t, s, "k2", w); w.Refused(err) != 1 {
		t.Fatalf("PutNew on an existing key: %v (Refused %d), want item 1", err, w.Refused(err))
	}
	if it := item(t, s, "NOTE#1"); it.Attrs.Str("v") != "first" || item(t, s, "NOTE#2") != nil {
		t.Fatalf("refused, yet NOTE#1 = %v and NOTE#2 present %v", it.Attrs, item(t, s, "NOTE#2") != nil)
	}

	w = core.Writes{Items: []core.ItemWrite{{Op: core.Update, Key: core.TicketKey("tk"), Set: core.Item{"status": "closed"},
		Append: map[string]string{core.AttrFollowUps: "CLOSE#1"},
		If:     []core.Cond{{Op: core.Exists}, {Op: core.Equals, Attr: core.AttrTenantID, Value: "another tenant"}}}}}
	if err := claimWrites(t, s, "k3", w); w.Refused(err) != 0 {
		t.Fatalf("Update of another tenant's ticket: %v (Refused %d), want item 0", err, w.Refused(err))
	}
	if tk, err := s.Ticket(context.Background(), "tk"); err != nil || len(tk.Attrs) != 0 {
		t.Fatalf("refused, yet the ticket's Attrs are %v (%v)", tk.Attrs, err)
	}
}

// A ticket's item is created only by Writes.Tickets: a PutNew of a
// ticket's key, or an Update of one that does not exist and is not
// conditioned on existing, is refused with an error saying so, not a
// condition, and writes nothing.
func TestItemWriteCannotCreateATicket(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "items.sqlite"))
	for i, w := range []core.ItemWrite{
		{Op: core.PutNew, Key: core.TicketKey("made"), Set: core.Item{"status": "open"}},
		{Op: core.Update, Key: core.TicketKey("made"), Set: core.Item{"status": "open"}},
	} {
		ws := core.Writes{Items: []core.ItemWrite{{Op: core.PutNew, Key: "NOTE#1"}, w}}
		err := claimWrites(t, s, fmt.Sprintf("k%d", i), ws)
		if err == nil || !strings.Contains(err.Error(), "Writes.Tickets") || errors.Is(err, core.ErrCondition) {
			t.Fatalf("%v on a ticket's key: %v, want the store's refusal naming Writes.Tickets", w.Op, err)
		}
		if item(t, s, "NOTE#1") != nil || item(t, s, core.TicketKey("made")) != nil {
			t.Fatalf("refused, yet something was written")
		}
	}
	if n, err := s.CountTickets(context.Background()); err != nil || n != 0 {
		t.Fatalf("tickets = %d, %v; want 0", n, err)
	}
}

// Every kind of value reads back as the Go type it was written as, from
// an item and from a ticket's Attrs, after a reopen too; a ticket's Attrs
// hold what item writes set on it, not its typed fields, while Items
// shows its tenant_id and user_id beside them.
func TestItemValuesRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "items.sqlite")
	s := open(t, path)
	mustClaim(t, s, "k1", core.Writes{Tickets: []core.Ticket{newTicket("tk", time.Time{})}})
	if tk, err := s.Ticket(ctx, "tk"); err != nil || len(tk.Attrs) != 0 {
		t.Fatalf("a new ticket's Attrs: %v, %v; want none", tk.Attrs, err)
	}
	values := core.Item{
		"s": `a "quoted" string, é, 🙂, <&>`, "empty": "",
		"max": int64(math.MaxInt64), "min": int64(math.MinInt64), "zero": int64(0),
		"yes": true, "no": false,
		"list": []string{"a", "", "c"}, "none": []string{},
	}
	mustClaim(t, s, "k2", core.Writes{Items: []core.ItemWrite{
		{Op: core.PutNew, Key: "NOTE#v", Set: values},
		// An item write cannot change the ticket's typed fields.
		{Op: core.Update, Key: core.TicketKey("tk"), Set: merge(values, core.Item{core.AttrTenantID: "t2"})},
	}})
	check := func(s *sqlite.Store) {
		t.Helper()
		if got := item(t, s, "NOTE#v"); got == nil || !reflect.DeepEqual(got.Attrs, values) || got.Delivery != nil {
			t.Fatalf("NOTE#v reads %#v, want %#v and no delivery", got, values)
		}
		tk, err := s.Ticket(ctx, "tk")
		if err != nil || !reflect.DeepEqual(tk.Attrs, values) || tk.TenantID != "t" || tk.UserID != "u" {
			t.Fatalf("ticket: %+v, %v; want Attrs %#v, tenant t", tk, err, values)
		}
		want := merge(values, core.Item{core.AttrTenantID: "t", core.AttrUserID: "u"})
		if got := item(t, s, core.TicketKey("tk")); got == nil || !reflect.DeepEqual(got.Attrs, want) {
			t.Fatalf("the ticket's item reads %#v, want %#v", got, want)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check(open(t, path))
}

func merge(items ...core.Item) core.Item {
	out := core.Item{}
	for _, it := range items {
		for k, v := range it {
			out[k] = v
		}
	}
	return out
}

// Items reads the keys that exist in the order asked, tickets and other
// items alike, each with its delivery when it has one.
func TestItemsOrderAndAbsentKeys(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "items.sqlite"))
	now := time.Now().Truncate(time.Second)
	mustClaim(t, s, "k0", core.Writes{Tickets: []core.Ticket{newTicket("plain", time.Time{})}})
	mustClaim(t, s, "k1", core.Writes{Tickets: []core.Ticket{newTicket("tk", now)},
		Items: []core.ItemWrite{
			{Op: core.PutNew, Key: "NOTE#1", Set: core.Item{"n": int64(1)}},
			{Op: core.PutNew, Key: "NOTE#2", Set: core.Item{"n": int64(2)}, Effect: &core.Effect{Kind: "note", ID: "2",
				Payload: json.RawMessage(`{"type":"note"}`), DueAt: now.Add(time.Minute)}},
		}})
	keys := []string{"NOTE#2", core.TicketKey("none"), core.TicketKey("tk"), "NOTE#absent", "NOTE#1", core.TicketKey("plain")}
	items, err := s.Items(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Key)
	}
	if want := []string{"NOTE#2", core.TicketKey("tk"), "NOTE#1", core.TicketKey("plain")}; !slices.Equal(got, want) {
		t.Fatalf("Items keys = %v, want %v", got, want)
	}
	if d := items[0].Delivery; d == nil || d.State != core.DeliveryPending || !d.DueAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("NOTE#2's delivery: %+v", d)
	}
	if d := items[1].Delivery; d == nil || d.State != core.DeliveryPending || !d.DueAt.Equal(now) {
		t.Fatalf("the ticket's delivery: %+v", d)
	}
	if items[2].Delivery != nil || items[3].Delivery != nil {
		t.Fatalf("deliveries of items that have none: %+v, %+v", items[2].Delivery, items[3].Delivery)
	}
	if items, err := s.Items(context.Background(), nil); err != nil || len(items) != 0 {
		t.Fatalf("Items(nil) = %v, %v", items, err)
	}
}

// A traceparent as the service passes it (core.Writes.Traceparent).
const testTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// commentWrites are add_comment's writes as the design lists them.
func commentWrites(ticketID, commentID string, due time.Time) []core.ItemWrite {
	key := "COMMENT#" + commentID
	payload, _ := json.Marshal(map[string]string{"type": "comment.created", "comment_id": commentID, "ticket_id": ticketID})
	return []core.ItemWrite{
		{Op: core.PutNew, Key: key, Set: core.Item{"ticket_id": ticketID, "tenant_id": "t", "body": "it fails on mobile too"},
			Effect: &core.Effect{Kind: "comment", ID: commentID, TicketID: ticketID, Payload: payload, DueAt: due}},
		{Op: core.Update, Key: core.TicketKey(ticketID), Append: map[string]string{core.AttrFollowUps: key},
			If: []core.Cond{{Op: core.Exists}, {Op: core.Equals, Attr: core.AttrTenantID, Value: "t"},
				{Op: core.EqualsOrAbsent, Attr: "status", Value: "open"},
				{Op: core.SizeBelow, Attr: core.AttrFollowUps, Value: 100}}},
	}
}

// An effect's delivery record goes through the outbox as a ticket's does,
// under its item key: created pending with its traceparent, due and
// listed beside tickets, claimed with its effect, recorded, settled.
func TestEffectDeliveryRecord(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "effects.sqlite"))
	now := time.Now().Truncate(time.Second)
	mustClaim(t, s, "k-ticket", core.Writes{Tickets: []core.Ticket{newTicket("tk", now)}})
	rec, _, _ := hardeningRecords("k-comment", "")
	w := core.Writes{Items: commentWrites("tk", "c1", now.Add(10*time.Second)), Traceparent: testTraceparent}
	if _, err := s.Claims().Claim(ctx, rec, w, now); err != nil {
		t.Fatal(err)
	}
	const id = "COMMENT#c1"

	r, err := s.Delivery(ctx, id)
	if err != nil || r.TicketID != id || r.Kind != "comment" || r.State != delivery.StatePending || r.Attempts != 0 ||
		!r.DueAt.Equal(now.Add(10*time.Second)) || r.Traceparent != testTraceparent {
		t.Fatalf("the comment's record: %+v, %v", r, err)
	}
	if r, err := s.Delivery(ctx, "tk"); err != nil || r.Kind != delivery.KindTicket {
		t.Fatalf("the ticket's record: %+v, %v; want kind ticket", r, err)
	}
	if _, err := s.Delivery(ctx, "COMMENT#none"); !errors.Is(err, delivery.ErrNoRecord) {
		t.Fatalf("Delivery of no record: %v", err)
	}
	if ids, err := s.Due(ctx, now, 10); err != nil || !slices.Equal(ids, []string{"tk"}) {
		t.Fatalf("Due before the comment's time = %v, %v", ids, err)
	}
	later := now.Add(10 * time.Second)
	if ids, err := s.Due(ctx, later, 10); err != nil || !slices.Equal(ids, []string{"tk", id}) {
		t.Fatalf("Due = %v, %v; want the ticket, then the comment", ids, err)
	}
	if ids, err := s.Due(ctx, later, 1); err != nil || !slices.Equal(ids, []string{"tk"}) {
		t.Fatalf("Due limit 1 = %v, %v; want the earliest", ids, err)
	}
	if n, err := s.Waiting(ctx); err != nil || n != 2 {
		t.Fatalf("Waiting = %d, %v; want 2", n, err)
	}
	if l, err := s.List(ctx, delivery.StatePending, 10); err != nil || len(l) != 2 || l[0].TicketID != id || l[0].Kind != "comment" ||
		l[1].TicketID != "tk" || l[1].Kind != delivery.KindTicket {
		t.Fatalf("List(pending) = %+v, %v; want the comment, then the ticket (by id)", l, err)
	}
	if l, err := s.List(ctx, delivery.StatePending, 1); err != nil || len(l) != 1 || l[0].TicketID != id {
		t.Fatalf("List(pending, 1) = %+v, %v", l, err)
	}

	if _, err := s.Claim(ctx, id, "w1", now, now.Add(time.Minute)); !errors.Is(err, delivery.ErrNotClaimable) {
		t.Fatalf("Claim before due: %v", err)
	}
	lease := later.Add(30 * time.Second)
	c, err := s.Claim(ctx, id, "w1", later, lease)
	if err != nil {
		t.Fatal(err)
	}
	if c.Ticket.ID != id || c.Effect == nil || c.Effect.Kind != "comment" || c.Effect.ID != "c1" || c.Effect.TicketID != "tk" ||
		!json.Valid(c.Effect.Payload) || !strings.Contains(string(c.Effect.Payload), `"comment.created"`) ||
		c.Before.State != delivery.StatePending || c.Before.Kind != "comment" {
		t.Fatalf("Claimed = %+v (effect %+v)", c, c.Effect)
	}
	if r, _ := s.Delivery(ctx, id); r.State != delivery.StateDelivering || r.LeaseOwner != "w1" || !r.DueAt.Equal(lease.Add(time.Second)) {
		t.Fatalf("claimed record: %+v", r)
	}
	if _, err := s.Claim(ctx, id, "w2", later, lease); !errors.Is(err, delivery.ErrNotClaimable) {
		t.Fatalf("second Claim under a live lease: %v", err)
	}
	if err := s.Record(ctx, id, "w2", delivery.Update{State: delivery.StateDelivered}); !errors.Is(err, delivery.ErrLeaseLost) {
		t.Fatalf("Record by another worker: %v", err)
	}
	u := delivery.Update{State: delivery.StateDelivered, Attempts: 1, ExternalID: "ext-1", ExternalURL: "https://h.test/1", DeliveredAt: later}
	if err := s.Record(ctx, id, "w1", u); err != nil {
		t.Fatal(err)
	}
	r, err = s.Delivery(ctx, id)
	if err != nil || r.State != delivery.StateDelivered || r.Kind != "comment" || r.ExternalID != "ext-1" || !r.DueAt.IsZero() ||
		r.Traceparent != testTraceparent || !r.DeliveredAt.Equal(later) {
		t.Fatalf("recorded: %+v, %v", r, err)
	}
	if it := item(t, s, id); it == nil || it.Delivery == nil || it.Delivery.State != core.DeliveryDelivered || it.Delivery.ExternalID != "ext-1" {
		t.Fatalf("Items of the delivered comment: %+v", it)
	}
	if n, err := s.Waiting(ctx); err != nil || n != 1 {
		t.Fatalf("Waiting = %d, %v; want the ticket alone", n, err)
	}

	// An effect that follows no ticket, failed, then settled by a person.
	mustClaim(t, s, "k-note", core.Writes{Items: []core.ItemWrite{{Op: core.PutNew, Key: "NOTE#n", Set: core.Item{},
		Effect: &core.Effect{Kind: "note", ID: "n", Payload: json.RawMessage(`{"type":"note"}`), DueAt: now}}}})
	if _, err := s.Claim(ctx, "NOTE#n", "w", now, lease); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "NOTE#n", "w", delivery.Update{State: delivery.StateFailed, Attempts: 1, Error: "refused"}); err != nil {
		t.Fatal(err)
	}
	l, err := s.List(ctx, delivery.StateFailed, 10)
	if err != nil || len(l) != 1 || l[0].TicketID != "NOTE#n" || l[0].Kind != "note" || l[0].Error != "refused" {
		t.Fatalf("List(failed) = %+v, %v", l, err)
	}
	read := l[0]
	if err := s.Settle(ctx, "NOTE#n", read, delivery.Update{State: delivery.StatePending, DueAt: later}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Delivery(ctx, "NOTE#n"); err != nil || r.State != delivery.StatePending || !r.DueAt.Equal(later) || r.Kind != "note" {
		t.Fatalf("settled: %+v, %v", r, err)
	}
	var se *delivery.StateError
	if err := s.Settle(ctx, "NOTE#n", read, delivery.Update{State: delivery.StateFailed}); !errors.As(err, &se) ||
		se.State != delivery.StatePending || se.Want != delivery.StateFailed {
		t.Fatalf("Settle from a stale read: %v, want a StateError", err)
	}
	if err := s.Settle(ctx, "NOTE#none", read, delivery.Update{State: delivery.StateFailed}); !errors.Is(err, delivery.ErrNoRecord) {
		t.Fatalf("Settle of no record: %v", err)
	}
	if ids, err := s.Due(ctx, later, 10); err != nil || !slices.Equal(ids, []string{"tk", "NOTE#n"}) {
		t.Fatalf("Due = %v, %v; want the ticket (due first), then the note", ids, err)
	}
}

// Neighbours orders a ticket's records as its follow-ups list does; Wake
// makes due at once a record that waits, and nothing else.
func TestNeighboursAndWake(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "sequence.sqlite"))
	now := time.Now().Truncate(time.Second)
	hour := now.Add(time.Hour)
	mustClaim(t, s, "k-ticket", core.Writes{Tickets: []core.Ticket{newTicket("tk", now)}})
	mustClaim(t, s, "k-alone", core.Writes{Tickets: []core.Ticket{newTicket("alone", now)}})
	mustClaim(t, s, "k-c1", core.Writes{Items: commentWrites("tk", "c1", hour)})
	mustClaim(t, s, "k-c2", core.Writes{Items: commentWrites("tk", "c2", hour)})
	mustClaim(t, s, "k-note", core.Writes{Items: []core.ItemWrite{{Op: core.PutNew, Key: "NOTE#n",
		Effect: &core.Effect{Kind: "note", ID: "n", Payload: json.RawMessage(`{}`), DueAt: hour}}}})

	for _, c := range []struct{ id, ticket, before, after string }{
		{"tk", "tk", "", "COMMENT#c1"},
		{"COMMENT#c1", "tk", "tk", "COMMENT#c2"},
		{"COMMENT#c2", "tk", "COMMENT#c1", ""},
		{"alone", "alone", "", ""},
		{"NOTE#n", "", "", ""},
	} {
		ticket, before, after, err := s.Neighbours(ctx, c.id)
		if err != nil || ticket != c.ticket || before != c.before || after != c.after {
			t.Errorf("Neighbours(%s) = %q, %q, %q, %v; want %q, %q, %q", c.id, ticket, before, after, err, c.ticket, c.before, c.after)
		}
	}
	if _, _, _, err := s.Neighbours(ctx, "COMMENT#none"); !errors.Is(err, delivery.ErrNoRecord) {
		t.Errorf("Neighbours of no record: %v", err)
	}

	// A waiting follow-up becomes due at now (whole seconds).
	wake := now.Add(1500 * time.Millisecond)
	if err := s.Wake(ctx, "COMMENT#c1", wake); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Delivery(ctx, "COMMENT#c1"); !r.DueAt.Equal(now.Add(time.Second)) {
		t.Fatalf("woken: due %v, want %v", r.DueAt, now.Add(time.Second))
	}
	// One due before now stays as it is: Wake never delays.
	if err := s.Wake(ctx, "tk", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Delivery(ctx, "tk"); !r.DueAt.Equal(now) {
		t.Fatalf("a due ticket woken later: due %v, want %v", r.DueAt, now)
	}
	// One that was sent is not woken.
	if _, err := s.Claim(ctx, "COMMENT#c1", "w", wake, wake.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "COMMENT#c1", "w", delivery.Update{State: delivery.StatePending, Attempts: 1, DueAt: hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Wake(ctx, "COMMENT#c1", wake); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Delivery(ctx, "COMMENT#c1"); !r.DueAt.Equal(hour) {
		t.Fatalf("a sent follow-up woken: due %v, want %v", r.DueAt, hour)
	}
	// Nor one under a lease.
	if err := s.Wake(ctx, "NOTE#n", wake); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "NOTE#n", "w", wake, hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Wake(ctx, "NOTE#n", wake); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Delivery(ctx, "NOTE#n"); r.State != delivery.StateDelivering || !r.DueAt.Equal(hour.Add(time.Second)) {
		t.Fatalf("a delivering record woken: %+v", r)
	}
	if err := s.Wake(ctx, "COMMENT#none", wake); err != nil {
		t.Fatalf("Wake of no record: %v", err)
	}
}

// The schema of a database made before item writes existed: the tickets
// table without attrs, the deliveries table, neither items nor
// effect_deliveries.
const schemaBeforeItems = `
CREATE TABLE tickets (
	ticket_id     TEXT PRIMARY KEY,
	operation_key TEXT NOT NULL,
	generation    INTEGER NOT NULL,
	tenant_id     TEXT NOT NULL,
	user_id       TEXT NOT NULL,
	arguments     TEXT NOT NULL,
	created_at    TEXT NOT NULL,
	UNIQUE (operation_key, generation),
	FOREIGN KEY (operation_key, generation) REFERENCES claims (operation_key, generation)
) WITHOUT ROWID;
CREATE TABLE deliveries (
	ticket_id       TEXT PRIMARY KEY REFERENCES tickets (ticket_id),
	state           TEXT NOT NULL CHECK (state IN ('pending', 'delivering', 'delivered', 'failed', 'unknown')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	lookup_failures INTEGER NOT NULL DEFAULT 0,
	sent_unknown    INTEGER NOT NULL DEFAULT 0,
	sent_at         INTEGER,
	due_at          INTEGER,
	lease_until     INTEGER,
	lease_owner     TEXT,
	error           TEXT,
	external_id     TEXT,
	external_url    TEXT,
	delivered_at    TEXT,
	traceparent     TEXT
) WITHOUT ROWID;
CREATE INDEX deliveries_due ON deliveries (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX deliveries_state ON deliveries (state, ticket_id);
`

// A database made before item writes opens: its tickets read with empty
// Attrs and their deliveries as they were, and take follow-ups from then
// on.
func TestDatabaseBeforeItemsOpens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "before-items.sqlite")
	now := time.Now().Truncate(time.Second)
	db := sqlitetest.Open(t, path) // the operations and claims tables
	if _, err := db.ExecContext(ctx, schemaBeforeItems); err != nil {
		t.Fatal(err)
	}
	created := now.UTC().Format(time.RFC3339Nano)
	for _, q := range []struct {
		query string
		args  []any
	}{
		{`INSERT INTO claims (operation_key, generation, claimed_at) VALUES ('k-old', 1, ?)`, []any{created}},
		{`INSERT INTO tickets (ticket_id, operation_key, generation, tenant_id, user_id, arguments, created_at)
			VALUES ('old', 'k-old', 1, 't', 'u', '{"title":"old"}', ?)`, []any{created}},
		{`INSERT INTO deliveries (ticket_id, state, due_at) VALUES ('old', 'pending', ?)`, []any{now.Unix()}},
	} {
		if _, err := db.ExecContext(ctx, q.query, q.args...); err != nil {
			t.Fatal(err)
		}
	}

	s := open(t, path)
	tk, err := s.Ticket(ctx, "old")
	if err != nil || len(tk.Attrs) != 0 || tk.TenantID != "t" || tk.Delivery == nil || tk.Delivery.State != core.DeliveryPending {
		t.Fatalf("old ticket: %+v, %v; want empty Attrs and its pending delivery", tk, err)
	}
	want := core.Item{core.AttrTenantID: "t", core.AttrUserID: "u"}
	if it := item(t, s, core.TicketKey("old")); it == nil || !reflect.DeepEqual(it.Attrs, want) {
		t.Fatalf("old ticket's item: %+v, want %v", it, want)
	}
	if ids, err := s.Due(ctx, now, 10); err != nil || !slices.Equal(ids, []string{"old"}) {
		t.Fatalf("Due = %v, %v", ids, err)
	}
	if ticket, before, after, err := s.Neighbours(ctx, "old"); err != nil || ticket != "old" || before != "" || after != "" {
		t.Fatalf("Neighbours(old) = %q, %q, %q, %v", ticket, before, after, err)
	}
	mustClaim(t, s, "k-comment", core.Writes{Items: commentWrites("old", "c1", now)})
	if tk, err := s.Ticket(ctx, "old"); err != nil || !slices.Equal(tk.Attrs.List(core.AttrFollowUps), []string{"COMMENT#c1"}) {
		t.Fatalf("old ticket after a comment: %+v, %v", tk.Attrs, err)
	}
	if ids, err := s.Due(ctx, now, 10); err != nil || !slices.Equal(ids, []string{"COMMENT#c1", "old"}) {
		t.Fatalf("Due = %v, %v; want both (same second, by id)", ids, err)
	}
}

// Appends to one ticket's follow-ups under SizeBelow from many goroutines
// on two stores over one file (two connection pools, so SQLite's own
// write lock decides between them): every committed append is in the
// list once, none is lost, every refusal is the condition's and wrote
// nothing, and the list never passes the bound.
func TestConcurrentAppendsKeepTheBound(t *testing.T) {
	const n, bound = 130, 100
	path := filepath.Join(t.TempDir(), "appends.sqlite")
	stores := []*sqlite.Store{open(t, path), open(t, path)}
	mustClaim(t, stores[0], "k-ticket", core.Writes{Tickets: []core.Ticket{newTicket("tk", time.Time{})}})

	errs := make([]error, n)
	writes := make([]core.Writes, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		key := fmt.Sprintf("COMMENT#%03d", i)
		writes[i] = core.Writes{Items: []core.ItemWrite{
			{Op: core.Update, Key: core.TicketKey("tk"), Append: map[string]string{core.AttrFollowUps: key},
				If: []core.Cond{{Op: core.Exists}, {Op: core.SizeBelow, Attr: core.AttrFollowUps, Value: bound}}},
			{Op: core.PutNew, Key: key, Set: core.Item{"i": int64(i)}},
		}}
		wg.Go(func() {
			<-start
			rec, _, now := hardeningRecords(fmt.Sprintf("k-%d", i), "")
			_, errs[i] = stores[i%2].Claims().Claim(context.Background(), rec, writes[i], now)
		})
	}
	close(start)
	wg.Wait()

	ctx := context.Background()
	tk, err := stores[1].Ticket(ctx, "tk")
	if err != nil {
		t.Fatal(err)
	}
	list := tk.Attrs.List(core.AttrFollowUps)
	seen := map[string]bool{}
	for _, k := range list {
		if seen[k] {
			t.Fatalf("%s is in the list twice", k)
		}
		seen[k] = true
	}
	committed := 0
	for i, err := range errs {
		key := fmt.Sprintf("COMMENT#%03d", i)
		switch {
		case err == nil:
			committed++
			if !seen[key] || item(t, stores[0], key) == nil {
				t.Errorf("%s committed, yet in the list %v, item present %v", key, seen[key], item(t, stores[0], key) != nil)
			}
		case writes[i].Refused(err) == 0:
			if seen[key] || item(t, stores[0], key) != nil {
				t.Errorf("%s refused, yet written", key)
			}
		default:
			t.Errorf("%s: %v, want committed or refused by the bound", key, err)
		}
	}
	if len(list) != committed || committed != bound {
		t.Fatalf("list of %d, %d committed; want %d of each", len(list), committed, bound)
	}
}
