package httpapi

import (
	"slices"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// TestOutcomesAreMetricValues: every status name the log line can carry
// is a value of the metrics' outcome label, so no outcome is counted as
// another or dropped from its dimension sets.
func TestOutcomesAreMetricValues(t *testing.T) {
	names := []string{"catalogue", badRequest.name, tooLarge.name, unauthenticated.name, notFound.name,
		methodNotAllowed.name, internalError.name}
	for _, r := range answers {
		names = append(names, r.name)
	}
	for _, n := range names {
		if !slices.Contains(metrics.Outcomes, n) {
			t.Errorf("outcome %q is missing from metrics.Outcomes", n)
		}
	}
}
