package mcpdoor_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

func benchRequest(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	callbacktest.SetMCPHeaders(r, "bench")
	return r
}

// BenchmarkMCPHandlerOverhead: a create_ticket tools/call through the
// whole door (size check, bearer middleware, user lookup, the SDK's
// stateless handler, the service) on the in-memory store, without JWT
// verification: the MCP door's counterpart of the callback's
// BenchmarkHandlerOverhead (internal/httpapi, without BCrypt). new_key
// makes a new operation each time, repeat_key repeats one.
func BenchmarkMCPHandlerOverhead(b *testing.B) {
	for _, c := range []struct {
		name   string
		repeat bool
	}{{"new_key", false}, {"repeat_key", true}} {
		b.Run(c.name, func(b *testing.B) {
			h := benchDoor(b, memtest.New(), testUsers)
			var n atomic.Int64
			b.ReportAllocs()
			for b.Loop() {
				rid := "req-bench"
				if !c.repeat {
					rid = "req-bench-" + strconv.FormatInt(n.Add(1), 10)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, benchRequest(toolsCall("create_ticket", `{"title":"Bench"}`, `"`+rid+`"`)))
				if w.Code != 200 || !strings.Contains(w.Body.String(), `\"created\"`) {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// TestMCPRoundTrips counts the DynamoDB requests of MCP tool calls on
// DynamoDB Local, through the door and the deployed function's user cache:
// a new operation and its repeat cost two requests each once the user is
// cached, the claim's transaction and the read-ahead GetItem sent beside
// it, one round trip waited for, as through the callback
// (TestRoundTripsPerCallback, internal/store/dynamo). The request a call
// did not wait for still runs to its end, so the counts are taken after
// store.Wait.
func TestMCPRoundTrips(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	var calls atomic.Int64
	store := dynamo.New(testenv.DynamoClient(t, endpoint, testenv.CountCalls(&calls)), table, dynamo.Options{})
	if err := store.PutUser(context.Background(), core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	h := benchDoor(t, store, usercache.New(store, time.Minute, 16))
	for _, st := range []struct {
		name      string
		rid       string
		want      string
		wantCalls int64
	}{
		{"new operation, cold user cache", "r1", `\"deduplicated\":false`, 3},
		{"repeat, warm cache", "r1", `\"deduplicated\":true`, 2},
		{"new operation, warm cache", "r2", `\"deduplicated\":false`, 2},
		{"repeat of the second", "r2", `\"deduplicated\":true`, 2},
	} {
		before := calls.Load()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, benchRequest(toolsCall("create_ticket", `{"title":"Round trips"}`, `"`+st.rid+`"`)))
		store.Wait()
		n := calls.Load() - before
		t.Logf("%s: %d DynamoDB requests", st.name, n) // read back by make bench
		if w.Code != 200 || !strings.Contains(w.Body.String(), st.want) || n != st.wantCalls {
			t.Errorf("%s: %d %s with %d DynamoDB calls; want %s with %d", st.name, w.Code, w.Body, n, st.want, st.wantCalls)
		}
	}
}
