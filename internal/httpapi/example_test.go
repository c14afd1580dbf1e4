package httpapi_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// The handler's wiring: a core.Service over a store and the users, an
// authenticator for the nonce header, and a logger for the one line per
// request. The same call twice: the ticket, then the stored answer again.
func ExampleHandler() {
	h := &httpapi.Handler{
		Service: &core.Service{
			Store:     memtest.New(), // internal/store/sqlite or internal/store/dynamo in the product
			Users:     memstore.Users{"user-a": {TenantID: "tenant-a", UserID: "alice"}},
			Policy:    idem.PolicyArguments,
			Retention: 24 * time.Hour,
			NewID:     func() string { return "ticket-1" },
		},
		Auth:   nonce.Off{}, // a *nonce.Verifier of the hook key in the product
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	body := callbacktest.Create("user-a", "request-example", `{"title":"Cannot sign in"}`)
	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(body)))
		fmt.Print(w.Code, " ", w.Body.String())
	}
	// Output:
	// 200 {"status":"created","ticket_id":"ticket-1","deduplicated":false}
	// 200 {"status":"created","ticket_id":"ticket-1","deduplicated":true}
}
