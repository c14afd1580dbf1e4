package localserver

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testenv"
)

// The four calls are callbacktest.FourCalls, as the callback
// function's metrics test sends them: both programs count them by the
// same labels.

// secrets are what the calls carry that no metric may.
var secrets = callbacktest.MetricsSecrets

// wantCallbacks is what the four calls count, by the label values every
// side emits (empty values are absent labels / dimensions).
var wantCallbacks = map[string]float64{
	"callbacks_total{door=aivax,function=create_ticket,outcome=created}":                         1,
	"callbacks_total{door=aivax,function=create_ticket,outcome=deduplicated}":                    1,
	"callbacks_total{code=invalid_arguments,door=aivax,function=create_ticket,outcome=rejected}": 1,
	"callbacks_total{door=aivax,outcome=unauthenticated}":                                        1,
}

func TestMain(m *testing.M) { testenv.Main(m) }
