package redact_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/redact"
)

// TestValues: each value is scrubbed as it is and as an answer may quote
// it (JSON-escaped, "/" as "\/", URL-escaped); other text is kept, and a
// value shorter than MinLen is not scrubbed.
func TestValues(t *testing.T) {
	const secret = `agent@example.com/token:s3cr+t/"x"&y`
	v := redact.New(secret, "", "abc", "tok-1")
	for _, quoted := range []string{
		secret,
		`agent@example.com/token:s3cr+t/\"x\"\u0026y`,
		`agent@example.com\/token:s3cr+t\/"x"&y`,
		`agent%40example.com%2Ftoken%3As3cr%2Bt%2F%22x%22%26y`,
		"tok-1",
	} {
		got := v.Scrub("before " + quoted + " after")
		if got != "before "+redact.Mark+" after" {
			t.Errorf("Scrub(%q) = %q", quoted, got)
		}
	}
	if got := v.Scrub("nothing to hide, abc"); got != "nothing to hide, abc" {
		t.Errorf("Scrub changed a clean text: %q", got)
	}
	if !redact.New().Empty() || !redact.New("").Empty() || v.Empty() {
		t.Error("Empty is wrong")
	}
	if s := fmt.Sprintf("%v %+v %#v %s", v, v, v, v); strings.Contains(s, "tok-1") {
		t.Errorf("printing the values shows them: %s", s)
	}
	if got := v.Add("more-1").Scrub("tok-1 more-1"); strings.Contains(got, "tok") || strings.Contains(got, "more") {
		t.Errorf("Add: %q", got)
	}
}
