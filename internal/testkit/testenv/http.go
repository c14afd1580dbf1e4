package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Get fetches url and returns the status and the whole body; the test
// stops when the request or the read fails.
func Get(tb testing.TB, url string) (status int, body []byte) {
	tb.Helper()
	resp, err := http.Get(url) //nolint:gosec // a test's own loopback server
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, body
}

// Invoke sends event to the function under the emulator at invokeURL (as
// StartRIE returns it) and returns the function's answer; the test stops
// when the call fails or the emulator reports a function error.
func Invoke(t testing.TB, invokeURL string, event []byte) []byte {
	t.Helper()
	answer, err := InvokeErr(invokeURL, event)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	return answer
}

// InvokeErr is Invoke for a goroutine other than the test's: it returns
// the error instead of stopping the test.
func InvokeErr(invokeURL string, event []byte) ([]byte, error) {
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Post(invokeURL, "application/json", bytes.NewReader(event))
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the emulator answered %d (a function error, not the function's answer): %s", resp.StatusCode, b)
	}
	return b, nil
}
