package destination

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// echoServer is a helpdesk that answers every request with status and a
// body quoting every credential it knows: the request's Authorization
// header, its Basic pair and password, and known (the configured secrets,
// which a webhook receiver holds too), raw and JSON-escaped, as a JSON
// error, a GraphQL error and plain text in one.
func echoServer(t *testing.T, status *atomic.Int32, known ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		quoted := append([]string{}, known...)
		if a := r.Header.Get("Authorization"); a != "" {
			quoted = append(quoted, a)
			if scheme, rest, ok := strings.Cut(a, " "); ok {
				quoted = append(quoted, rest)
				if pair, err := base64.StdEncoding.DecodeString(rest); err == nil && strings.EqualFold(scheme, "Basic") {
					_, pass, _ := strings.Cut(string(pair), ":")
					quoted = append(quoted, string(pair), pass)
				}
			}
		}
		msg := "echo: " + strings.Join(quoted, " | ")
		body, _ := json.Marshal(map[string]any{"error": msg, "description": strings.ReplaceAll(msg, "/", `\/`),
			"errors": []any{map[string]any{"message": msg, "extensions": map[string]any{"code": "INTERNAL_ERROR", "userPresentableMessage": msg}}}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEchoedCredentialsScrubbed: for each destination kind, built as the
// programs build it (New), a helpdesk that echoes every credential in its
// error answers (500, 401, 400, and a 200 the adapter cannot read) gets
// none of them into the send error's text, the lookup error's text, the
// check line (deliveries check), the engine's stored delivery_error or
// the engine's log lines, while the errors keep what the engine reads of
// them (Failure, Status).
func TestEchoedCredentialsScrubbed(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("echoed-signing-key-0123456789"))
	var status atomic.Int32
	for _, c := range []struct {
		kind string
		cfg  func(url string) config.Destination
	}{
		{"zendesk", func(url string) config.Destination {
			return config.Destination{Kind: "zendesk", URL: url, Email: "agent@acme.example", Token: "zdTOKEN0123456789abcdefECHO"}
		}},
		{"webhook", func(url string) config.Destination {
			return config.Destination{Kind: "webhook", URL: url + "/hook", Secret: secret, Lookup: true}
		}},
		{"linear", func(url string) config.Destination {
			return config.Destination{Kind: "linear", URL: url, TeamID: "team-1", APIKey: "lin_api_ECHOEDKEY0123456789abcdef"}
		}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			probe := c.cfg("https://x.example")
			srv := echoServer(t, &status, probe.Credentials()...)
			cfg := c.cfg(srv.URL)
			d, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			leaks := func(what, text string) {
				t.Helper()
				for _, cred := range cfg.Credentials() {
					if strings.Contains(text, cred) {
						t.Errorf("%s carries the credential %q:\n%s", what, cred, text)
					}
				}
			}
			ticket := delivery.HelpdeskTicket{ID: "t-1", OperationKey: "op", TenantID: "ten", UserID: "u", Title: "Printer",
				Priority: "normal", CreatedAt: time.Unix(1700000000, 0).UTC()}
			for _, st := range []int{500, 401, 400, 200} {
				status.Store(int32(st))
				_, sendErr := d.Send(context.Background(), ticket)
				_, _, lookErr := d.Lookup(context.Background(), "t-1")
				line, _ := delivery.Check(context.Background(), d)
				if sendErr != nil {
					leaks(fmt.Sprintf("HTTP %d: the send error", st), sendErr.Error())
					leaks(fmt.Sprintf("HTTP %d: the send error, printed", st), fmt.Sprintf("%v %+v %#v", sendErr, sendErr, sendErr))
				}
				if lookErr != nil {
					leaks(fmt.Sprintf("HTTP %d: the lookup error", st), lookErr.Error())
				}
				leaks(fmt.Sprintf("HTTP %d: the check line", st), line)
				if st == 500 {
					// What the test means to check: the answer is quoted.
					var se *delivery.SendError
					if !errors.As(sendErr, &se) || se.Failure != delivery.Unknown || se.Status != 500 || !strings.Contains(sendErr.Error(), "echo: ") {
						t.Errorf("HTTP 500: send error %v; want an unknown outcome, HTTP 500, quoting the answer", sendErr)
					}
					if !errors.As(lookErr, &se) || se.Status != 500 || !strings.Contains(lookErr.Error(), "echo: ") {
						t.Errorf("HTTP 500: lookup error %v; want HTTP 500, quoting the answer", lookErr)
					}
				}
			}

			// The engine: a send answered 500 (unknown), a lookup answered
			// 500, then a send and lookups refused with 401 (the pause and
			// its log lines).
			store := memtest.New()
			now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
			var logs bytes.Buffer
			eng := &delivery.Engine{Store: store, Destination: d, Now: func() time.Time { return now },
				Log: slog.New(slog.NewJSONHandler(&logs, nil))}
			op := idem.Record{Key: fmt.Sprintf("%064d", 1), State: idem.StateCompleted, Result: []byte(`{}`), ExpiresAt: now.Add(time.Hour)}
			if _, err := store.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{{ID: "t-1", OperationKey: op.Key,
				TenantID: "tenant-a", UserID: "alice", Arguments: `{"title":"Printer on fire"}`, CreatedAt: now,
				Delivery: &core.DeliveryStatus{State: core.DeliveryPending, DueAt: now}}}}, now); err != nil {
				t.Fatal(err)
			}
			var stored []string
			for i, st := range []int{500, 500, 401, 401, 401} {
				status.Store(int32(st))
				r, err := store.Delivery(context.Background(), "t-1")
				if err != nil {
					t.Fatal(err)
				}
				if !r.State.Live() {
					break
				}
				now = maxTime(now, r.DueAt).Add(time.Second)
				if _, err := eng.Deliver(context.Background(), "t-1"); err != nil && !errors.Is(err, delivery.ErrNotClaimable) {
					t.Fatalf("step %d: %v", i, err)
				}
				if r, err = store.Delivery(context.Background(), "t-1"); err != nil {
					t.Fatal(err)
				}
				stored = append(stored, r.Error)
				leaks(fmt.Sprintf("step %d (HTTP %d): the stored delivery_error", i, st), r.Error)
			}
			leaks("the engine's log lines", logs.String())
			if !strings.Contains(strings.Join(stored, "\n"), "echo: ") {
				t.Errorf("no stored delivery_error quotes the answer: %q", stored)
			}
		})
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
