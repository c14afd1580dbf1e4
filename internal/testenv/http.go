package testenv

import (
	"io"
	"net/http"
	"testing"
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
