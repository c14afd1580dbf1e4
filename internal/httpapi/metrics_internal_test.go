package httpapi

import (
	"slices"
	"testing"
)

// TestOutcomesAreMetricValues: every status name the log line can carry
// is a value of the metrics' outcome label, so no outcome is counted as
// another or dropped from its dimension sets.
func TestOutcomesAreMetricValues(t *testing.T) {
	names := []string{ResponseCatalogue.Name, ResponseBadRequest.Name, ResponseTooLarge.Name, ResponseUnauthenticated.Name,
		ResponseNotFound.Name, ResponseMethodNotAllowed.Name, ResponseInternal.Name}
	for _, r := range Responses {
		names = append(names, r.Name)
	}
	for _, n := range names {
		if !slices.Contains(MetricLabels(nil).Outcomes, n) {
			t.Errorf("outcome %q is missing from MetricLabels(nil).Outcomes", n)
		}
	}
}
