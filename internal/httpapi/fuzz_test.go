package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// FuzzParseCall: ParseCall never panics, and what it accepts has a JSON
// value as function.content (one that is not an object is the service's
// invalid_arguments).
//
//	go test -run='^$' -fuzz=FuzzParseCall -fuzztime=20s ./internal/httpapi
func FuzzParseCall(f *testing.F) {
	f.Add([]byte(callBody(core.CreateTicket, "user-a", "r-1", `{"title":"t"}`)))
	f.Add([]byte(`{"function":{"name":"x","content":{}},"context":{"metadata":{"request_id":1}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := httpapi.ParseCall(body)
		if err != nil {
			return
		}
		trimmed := bytes.TrimLeft(c.Content, " \t\r\n")
		if !json.Valid(c.Content) || len(trimmed) == 0 {
			t.Fatalf("accepted %q with content %q", body, c.Content)
		}
		if c.RequestIDNotString && c.RequestID != "" {
			t.Fatalf("request_id both a string and not: %+v", c)
		}
	})
}

// FuzzHandler: on any body, nonce header and content type the handler
// never panics and never answers 500; the body is JSON; and the store,
// fresh for each input, holds exactly one operation and one ticket after a
// 200 "created" and nothing after anything else. It runs each input with
// authentication off and with a real verifier (costs 4..4, so a mutated
// cost is refused before hashing and the fuzzer is not slowed by bcrypt).
//
//	go test -run='^$' -fuzz=FuzzHandler -fuzztime=20s ./internal/httpapi
func FuzzHandler(f *testing.F) {
	n := testNonce(f)
	v, err := nonce.New(hookKey, 4, 4)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(createBody("user-a", "r-1", "Cannot sign in")), n, "application/json")
	f.Add([]byte(callBody(core.GetTicket, "user-a", "", `{"ticket_id":"ticket-1"}`)), n, "application/json")
	f.Add([]byte(`{"function":`), "bad", "text/plain")
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, body []byte, nonceHeader, contentType string) {
		for _, auth := range []httpapi.Authenticator{nonce.Off{}, v} {
			st := memtest.New()
			h := newHandler(st, auth, time.Hour, logger)
			h.Service.NewID = func() string { return "ticket-1" }
			h.MaxBody = 4096
			r := httptest.NewRequest(http.MethodPost, "/callback", bytes.NewReader(body))
			r.Header.Set(httpapi.NonceHeader, nonceHeader)
			r.Header.Set("Content-Type", contentType)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code == http.StatusInternalServerError {
				t.Fatalf("500 for %q (auth %T)", body, auth)
			}
			var out struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
				t.Fatalf("body %q is not JSON: %v", w.Body, err)
			}
			ops, tickets := st.Count()
			if w.Code == http.StatusOK && out.Status == "created" {
				if ops != 1 || tickets != 1 {
					t.Fatalf("created, but the store holds %d operations, %d tickets", ops, tickets)
				}
			} else if ops != 0 || tickets != 0 {
				t.Fatalf("%d %s wrote %d operations, %d tickets", w.Code, w.Body, ops, tickets)
			}
		}
	})
}

// TestFuzzCorpusNonce: the committed FuzzHandler seeds carry a real nonce
// of hookKey, so with the verifier they reach the service, not only 401.
func TestFuzzCorpusNonce(t *testing.T) {
	raw, err := os.ReadFile("testdata/fuzz/FuzzHandler/created_with_nonce")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	if len(lines) < 3 {
		t.Fatalf("corpus file %q", raw)
	}
	h, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[2], "string("), ")"))
	if err != nil {
		t.Fatal(err)
	}
	if err := testVerifier(t).Verify(h); err != nil {
		t.Fatalf("corpus nonce %q does not verify: %v", h, err)
	}
}
