package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The caller of every callback here.
var benchUser = core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}

// callBody is a create_ticket callback as AIVAX sends it.
func callBody(requestID string) string {
	return callbacktest.Create(benchUser.ExternalID, requestID, callbacktest.Arguments)
}

// newHandler is the product's handler on store and users, with
// authentication off (BCrypt is measured on its own, in internal/nonce)
// and the log line going to io.Discard.
func newHandler(store core.Store, users core.Users) *httpapi.Handler {
	return &httpapi.Handler{
		Service: &core.Service{Store: store, Users: users, Policy: idem.PolicyArguments,
			Retention: 24 * time.Hour, NewID: uuid.NewString},
		Auth:   nonce.Off{},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
}

// dynamoHandler is a DynamoDB store on client and table holding benchUser,
// and the product's handler on it with the user cache the callback
// function keeps.
func dynamoHandler(tb testing.TB, client dynamo.Client, table string) (*dynamo.Store, *httpapi.Handler) {
	tb.Helper()
	store := dynamo.New(client, table, dynamo.Options{})
	if err := store.PutUser(context.Background(), benchUser); err != nil {
		tb.Fatal(err)
	}
	return store, newHandler(store, usercache.New(store, time.Hour, 16))
}

// serve sends one callback and returns the body's status field ("created",
// "deduplicated" is reported as "created" with deduplicated true, so the
// answer is returned whole).
func serve(h http.Handler, requestID string) (int, string) {
	return serveBody(h, callBody(requestID))
}

// serveBody sends one callback of body and returns the answer's status
// and body.
func serveBody(h http.Handler, body string) (int, string) {
	r := httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// outcome names an answer: created, deduplicated, or what went wrong.
func outcome(code int, body string) string {
	switch {
	case code != http.StatusOK:
		return "http " + strconv.Itoa(code)
	case strings.Contains(body, `"deduplicated":true`):
		return "deduplicated"
	case strings.Contains(body, `"status":"created"`):
		return "created"
	}
	status, _, _ := strings.Cut(strings.TrimPrefix(body, `{"status":"`), `"`)
	return status
}

// outFile is the results file the environment variable name gives a
// measurement that only `make bench` runs; when it is unset, t skips.
func outFile(t *testing.T, name string) string {
	t.Helper()
	out := os.Getenv(name)
	if out == "" {
		t.Skip(name + " not set: make bench sets it")
	}
	return out
}

// envInt is the positive integer in the environment variable name, or def
// when it is unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

var runSeq atomic.Int64

// requestIDs returns a generator of request ids unique to this process
// and run, so repeated runs on one table or file never collide.
func requestIDs(prefix string) func() string {
	run := strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(runSeq.Add(1), 10)
	var n atomic.Int64
	return func() string { return prefix + "-" + run + "-" + strconv.FormatInt(n.Add(1), 10) }
}

// countingClient is a DynamoDB client on endpoint that counts every HTTP
// attempt (after the SDK's own retries), as the store's
// TestRoundTripsPerCallback does.
func countingClient(endpoint string) (*dynamodb.Client, *atomic.Int64) {
	var n atomic.Int64
	client, err := testenv.NewDynamoClient(endpoint, testenv.CountCalls(&n))
	if err != nil {
		panic(err) // only a broken AWS SDK configuration fails here
	}
	return client, &n
}

// usersOf is a fixed user table, as the local server builds from its
// configuration file.
func usersOf(u core.User) memstore.Users { return memstore.Users{u.ExternalID: u} }
