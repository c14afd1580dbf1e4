package dynamo_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// A 3000-character externalUserId: DynamoDB itself refuses the lookup (the
// key is over 2048 bytes), and the callback answers 403, as on every store,
// not 500.
func TestOverlongExternalUserIDIsForbidden(t *testing.T) {
	s, _ := newTable(t)
	long := strings.Repeat("u", 3000)
	if _, err := s.User(context.Background(), long); err == nil || err == core.ErrNotFound {
		t.Fatalf("GetItem of a 3005-byte key: %v; DynamoDB refuses it, which is why the service must not ask", err)
	}
	svc := &core.Service{Store: s, Users: s, Policy: idem.PolicyArguments, Retention: time.Hour,
		NewID: func() string { return "t-1" }}
	o := svc.Answer(context.Background(), core.Call{Function: core.CreateTicket,
		Content: json.RawMessage(`{"title":"t"}`), ExternalUserID: long, RequestID: "r"})
	if o.Kind != core.KindForbidden {
		t.Fatalf("kind %v (err %v), want forbidden", o.Kind, o.Err)
	}
}
