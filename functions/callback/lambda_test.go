package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// TestLambdaHookKeyParameterWins: with both HOOK_KEY_PARAMETER and
// HOOK_KEY set, the handler Handler builds accepts nonces of the SSM
// parameter's value and refuses nonces of HOOK_KEY. SSM is an HTTP server
// of the test, reached through the SDK's own endpoint override.
func TestLambdaHookKeyParameterWins(t *testing.T) {
	const paramName, paramKey, envKey = "/aivax/hook-key", "key-from-ssm", "key-from-env"
	var asked atomic.Int32
	testenv.IsolatedAWSEnv(t, map[string]string{
		"AWS_ENDPOINT_URL_SSM": testenv.FakeSSM(t, paramName, paramKey, &asked), "AWS_REGION": "eu-west-1"})
	env := map[string]string{"TABLE_NAME": "tickets", "HOOK_KEY_PARAMETER": paramName, "HOOK_KEY": envKey}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(context.Background(), cfg, discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 1 {
		t.Fatalf("SSM answered %d GetParameter calls, want 1", asked.Load())
	}
	for _, tc := range []struct {
		key    string
		status int
	}{{paramKey, http.StatusOK}, {envKey, http.StatusUnauthorized}} {
		n, err := nonce.Generate(tc.key, nonce.DefaultMinCost)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodGet, "/functions", nil)
		r.Header.Set(httpapi.NonceHeader, n)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Fatalf("nonce of %s: %d %s; want %d", tc.key, w.Code, w.Body, tc.status)
		}
	}
}
