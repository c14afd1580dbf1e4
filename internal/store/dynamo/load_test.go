package dynamo_test

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/storetest"
)

func childEnv(endpoint, table string) []string {
	return []string{envEndpoint + "=" + endpoint, envTable + "=" + table}
}

// 100 identical new callbacks from 4 OS processes against DynamoDB Local:
// exactly one ticket, 99 deduplicated with its ticket_id, 0 busy, 0 errors.
// TransactionConflict is retried with full jitter (the dynamo.Options
// defaults), which is what makes 0 busy hold: every loser of a conflict
// retries and then finds the claim.
func TestLoadHundredIdenticalFromFourProcesses(t *testing.T) {
	s, endpoint := newTable(t)
	got := storetest.CheckExactlyOnce(t, 4, 100, s, childEnv(endpoint, s.table)...)
	t.Logf("outcomes: %v", got)
}

// 1,000 distinct callbacks at 16-way concurrency (4 processes × 4 workers):
// 1,000 tickets stored, none lost, none doubled.
func TestLoadThousandDistinct(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	s, endpoint := newTable(t)
	got := storetest.CheckNoneLost(t, 4, 1000, 4, s, childEnv(endpoint, s.table)...)
	t.Logf("outcomes: %v", got)
}

// A new process (cold start) returns the saved result for an old key.
func TestRestartInNewProcess(t *testing.T) {
	s, endpoint := newTable(t)
	storetest.CheckRestart(t, childEnv(endpoint, s.table)...)
}
