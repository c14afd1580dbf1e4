package core_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
)

// lookups counts the user lookups that reach the store.
type lookups struct {
	core.Users
	n int
}

func (l *lookups) User(ctx context.Context, id string) (core.User, error) {
	l.n++
	return l.Users.User(ctx, id)
}

// An externalUserId longer than any user record's key can be is 403
// without a store call (on DynamoDB the lookup itself would fail with a
// ValidationException); so is one that is not valid UTF-8.
func TestOverlongExternalUserIDIsForbiddenWithoutLookup(t *testing.T) {
	long := strings.Repeat("u", 3000)
	users := &lookups{Users: memstore.Users{long: {TenantID: "t", UserID: "u"}}}
	svc, _ := newService(users)
	for _, id := range []string{long, strings.Repeat("u", core.MaxExternalUserIDLen+1), "user-\xff"} {
		o := svc.Answer(context.Background(), core.Call{Function: core.CreateTicket,
			Content: json.RawMessage(`{"title":"t"}`), ExternalUserID: id, RequestID: "r"})
		if o.Kind != core.KindForbidden {
			t.Errorf("externalUserId of %d bytes: kind %v, want forbidden", len(id), o.Kind)
		}
	}
	if users.n != 0 {
		t.Errorf("%d user lookups, want 0", users.n)
	}
	// At the limit the lookup happens.
	svc.Answer(context.Background(), core.Call{Function: core.CreateTicket, Content: json.RawMessage(`{"title":"t"}`),
		ExternalUserID: strings.Repeat("u", core.MaxExternalUserIDLen), RequestID: "r"})
	if users.n != 1 {
		t.Errorf("%d user lookups at the limit, want 1", users.n)
	}
}

// A request_id that is not well-formed Unicode is invalid_request_id,
// whether the parser flagged it or the text itself is not UTF-8.
func TestMalformedRequestIDIsInvalid(t *testing.T) {
	svc, _ := newService(memstore.Users{"user-a": {TenantID: "t", UserID: "u"}})
	for _, c := range []core.Call{
		{RequestID: "\ufffd", RequestIDMalformed: true},
		{RequestID: "a\xffb"},
		{RequestID: "\xed\xa0\x80"}, // a surrogate encoded as UTF-8
	} {
		c.Function, c.Content, c.ExternalUserID = core.CreateTicket, json.RawMessage(`{"title":"t"}`), "user-a"
		if o := svc.Answer(context.Background(), c); o.Code != core.CodeInvalidRequestID {
			t.Errorf("%+v: %v %s, want invalid_request_id", c, o.Kind, o.Code)
		}
	}
}

// One set of white space for every blank rule: JavaScript's trim().
func TestBlankIsJavaScriptTrim(t *testing.T) {
	for _, r := range []rune{' ', '\t', '\n', '\v', '\f', '\r', '\u00a0', '\u1680', '\u2000', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff'} {
		if !core.IsBlank(r) {
			t.Errorf("U+%04X not blank; JavaScript's trim removes it", r)
		}
	}
	for _, r := range []rune{'a', '\u0085', '\u200b', '\u180e', '\u0000'} {
		if core.IsBlank(r) {
			t.Errorf("U+%04X blank; JavaScript's trim keeps it", r)
		}
	}
	fn, _ := core.LookupFunction(core.CreateTicket)
	for _, title := range []string{"\ufeff", "\ufeff \ufeff", "\u3000\ufeff"} {
		b, _ := json.Marshal(map[string]string{"title": title})
		if _, err := fn.Validate(b); err == nil {
			t.Errorf("title %q accepted; it is blank", title)
		}
	}
	if _, err := fn.Validate([]byte(`{"title":"\ufeffx\ufeff"}`)); err != nil {
		t.Errorf("title with a BOM around text refused: %v", err)
	}
}

// Each request_id rejection names the place the call's door reads the
// request_id from: metadata.request_id by default, the door's own place
// when the call names one, and never the other door's.
func TestRequestIDRejectionsNameTheDoorsPlace(t *testing.T) {
	svc, _ := newService(memstore.Users{"user-a": {TenantID: "t", UserID: "u"}})
	const mcpPlace = `params._meta["io.example/request_id"]`
	for _, c := range []core.Call{
		{},                         // missing
		{RequestIDNotString: true}, // not a string
		{RequestID: "a\xffb"},      // not UTF-8
		{RequestID: "r\u0007"},     // control character
		{RequestID: strings.Repeat("r", core.MaxRequestIDLen+1)},
	} {
		c.Function, c.Content, c.ExternalUserID = core.CreateTicket, json.RawMessage(`{"title":"t"}`), "user-a"
		o := svc.Answer(context.Background(), c)
		if o.Kind != core.KindRejected || !strings.Contains(o.Message, core.RequestIDField) {
			t.Errorf("%+v: %v %q; want a rejection naming %s", c, o.Kind, o.Message, core.RequestIDField)
		}
		c.RequestIDAt = mcpPlace
		o = svc.Answer(context.Background(), c)
		if o.Kind != core.KindRejected || !strings.Contains(o.Message, mcpPlace) || strings.Contains(o.Message, core.RequestIDField) {
			t.Errorf("%+v: %v %q; want a rejection naming %s only", c, o.Kind, o.Message, mcpPlace)
		}
	}
}
