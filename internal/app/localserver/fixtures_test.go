package localserver

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testenv"
)

// The four calls and their counts are the same as the callback
// function's (internal/app/callbackfn metrics_test.go): both programs
// count them by the same labels.

const metricsHookKey = "metrics-test-hook-key"

// fourCalls are one create, its repeat, one rejection and one 401, with
// what each must count.
func fourCalls(t *testing.T) []struct {
	name, nonce, body string
} {
	t.Helper()
	n, err := nonce.Generate(metricsHookKey, 4)
	if err != nil {
		t.Fatal(err)
	}
	create := callbacktest.Create("user-a", "metrics-r-1", callbacktest.Title("Cannot sign in"))
	bad := `{"type":"tool_call","function":{"name":"create_ticket","content":{"title":""}},` +
		`"context":{"externalUserId":"user-a","metadata":{"request_id":"metrics-r-2"}}}`
	return []struct{ name, nonce, body string }{
		{"create", n, create}, {"repeat", n, create}, {"rejection", n, bad}, {"401", "", create},
	}
}

// secrets are what the calls carry that no metric may: tenant, user,
// external user, title and, once known, the operation key and the nonce.
var secrets = []string{"tenant-a", "alice", "user-a", "Cannot sign in"}

// wantCallbacks is what the four calls count, by the label values every
// side emits (empty values are absent labels / dimensions).
var wantCallbacks = map[string]float64{
	"callbacks_total{door=aivax,function=create_ticket,outcome=created}":                         1,
	"callbacks_total{door=aivax,function=create_ticket,outcome=deduplicated}":                    1,
	"callbacks_total{code=invalid_arguments,door=aivax,function=create_ticket,outcome=rejected}": 1,
	"callbacks_total{door=aivax,outcome=unauthenticated}":                                        1,
}

func TestMain(m *testing.M) { testenv.Main(m) }
