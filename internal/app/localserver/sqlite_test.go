//go:build !nosqlite

package localserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
)

func callbackBody(user, requestID string) string {
	return callbacktest.Create(user, requestID, callbacktest.Title("Cannot sign in"))
}

func post(t *testing.T, url, hookKey, body string) (int, map[string]any) {
	t.Helper()
	n := ""
	if hookKey != "" {
		var err error
		if n, err = nonce.Generate(hookKey, 4); err != nil {
			t.Fatal(err)
		}
	}
	code, b := callbacktest.Send(t, http.MethodPost, url+"/callback", n, body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return code, m
}

func TestLocalSQLite(t *testing.T) {
	const key = "local-demo-hook-key"
	h, closer, err := LocalServer(context.Background(), checked(t, localConfig(t, key)), discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	tests := []struct {
		name       string
		key        string // the nonce is made from it; empty: no nonce
		body       string
		wantStatus int
		want       map[string]any // members of the body
	}{
		{"first call -> 200 created", key, callbackBody("user-a", "r-1"), 200,
			map[string]any{"status": "created", "deduplicated": false}},
		{"repeat -> 200 deduplicated", key, callbackBody("user-a", "r-1"), 200,
			map[string]any{"status": "created", "deduplicated": true}},
		{"no nonce -> 401", "", callbackBody("user-a", "r-2"), 401, nil},
		{"nonce of another key -> 401", "other-key", callbackBody("user-a", "r-3"), 401, nil},
		{"disabled user from config -> 403", key, callbackBody("user-d", "r-4"), 403, nil},
		{"unknown user -> 403", key, callbackBody("user-z", "r-5"), 403, nil},
	}
	var ticket any
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, srv.URL, tc.key, tc.body)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d (body %v)", status, tc.wantStatus, body)
			}
			for k, v := range tc.want {
				if body[k] != v {
					t.Errorf("%s: %v, want %v (body %v)", k, body[k], v, body)
				}
			}
			if tc.want["status"] == "created" {
				if ticket == nil {
					ticket = body["ticket_id"]
				} else if body["ticket_id"] != ticket {
					t.Errorf("ticket_id %v, want %v (same ticket)", body["ticket_id"], ticket)
				}
			}
		})
	}
	if err := closer.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// A closed store answers no more callbacks with success.
	if status, body := post(t, srv.URL, key, callbackBody("user-a", "r-6")); status == 200 && body["status"] == "created" {
		t.Errorf("after Close: %d %v, want a failure", status, body)
	}
}
