package matrixtest

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// The figures the matrix writes for make bench read back field for field,
// with the matrix's settings.
func TestMatrixResultsRoundTrip(t *testing.T) {
	figs := []figure{
		{mode: "commit then 5xx", dest: destZendesk, state: delivery.StateDelivered, creates: 1, lookups: 2, steps: 3},
		{mode: "permanent 422", dest: destNoLookup, state: delivery.StateFailed, creates: 4, lookups: 0, steps: 1},
	}
	path := filepath.Join(t.TempDir(), "matrix.json")
	if err := results.WriteJSON(path, matrixResults(figs)); err != nil {
		t.Fatal(err)
	}
	var got results.DeliveryMatrix
	if err := results.ReadJSON(path, &got); err != nil {
		t.Fatal(err)
	}
	want := results.DeliveryMatrix{MaxAttempts: matrixMaxAttempts, ClientTimeoutMs: 300, Rows: []results.DeliveryMatrixRow{
		{Mode: "commit then 5xx", Destination: "zendesk", State: "delivered", Creates: 1, Lookups: 2, Steps: 3},
		{Mode: "permanent 422", Destination: "webhook-no-lookup", State: "failed", Creates: 4, Lookups: 0, Steps: 1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %+v, want %+v", got, want)
	}
	if got.Rows[0].Calls() != 3 {
		t.Errorf("calls = %d, want creates + lookups = 3", got.Rows[0].Calls())
	}
}
