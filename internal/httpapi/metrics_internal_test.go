package httpapi

import (
	"slices"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/httpapi/outcome"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// TestOutcomesAreMetricValues: every status name the log line can carry
// is a value of the metrics' outcome label, so no outcome is counted as
// another or dropped from its dimension sets.
func TestOutcomesAreMetricValues(t *testing.T) {
	names := []string{outcome.Catalogue.Name, outcome.BadRequest.Name, outcome.TooLarge.Name, outcome.Unauthenticated.Name,
		outcome.NotFound.Name, outcome.MethodNotAllowed.Name, outcome.Internal.Name}
	for _, r := range outcome.ByKind {
		names = append(names, r.Name)
	}
	for _, n := range names {
		if !slices.Contains(metrics.Outcomes, n) {
			t.Errorf("outcome %q is missing from metrics.Outcomes", n)
		}
	}
}
