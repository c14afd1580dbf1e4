package httpapi_test

import (
	"slices"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
)

// TestOutcomeNames: every name a response carries, each once, in the documented
// order (the service's outcomes by kind, then the HTTP refusals and the
// catalogue).
func TestOutcomeNames(t *testing.T) {
	want := []string{"internal", "created", "deduplicated", "found", "in_progress", "busy", "rejected",
		"forbidden", "bad_request", "too_large", "unauthenticated", "not_found", "method_not_allowed", "catalogue"}
	if got := httpapi.OutcomeNames(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v\nwant      %v", got, want)
	}
	for k, r := range httpapi.Responses {
		if !slices.Contains(httpapi.OutcomeNames(), r.Name) {
			t.Errorf("kind %v: name %q missing", k, r.Name)
		}
	}
}
