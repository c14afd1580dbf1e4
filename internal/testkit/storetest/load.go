package storetest

import (
	"context"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// The outcome names the checks count (Counts' keys).
var (
	kindCreated      = core.KindCreated.String()
	kindDeduplicated = core.KindDuplicate.String()
)

// Counter is the store the load checks count tickets in.
type Counter interface {
	CountTickets(ctx context.Context) (int, error)
}

func count(t *testing.T, s Counter) int {
	t.Helper()
	n, err := s.CountTickets(context.Background())
	if err != nil {
		t.Fatalf("CountTickets: %v", err)
	}
	return n
}

// CheckExactlyOnce runs the exactly-once load guarantee against one store
// shared by several OS processes: n identical new callbacks from procs
// processes make exactly one ticket, n-1 deduplicated with the same
// ticket_id, no busy and no error. count reads the number of stored
// tickets in s. It returns the summed outcomes.
func CheckExactlyOnce(t *testing.T, procs, n int, s Counter, env ...string) map[string]int {
	t.Helper()
	before := count(t, s)
	counts := Processes(t, procs, n/procs, n/procs, "same", env...)
	byOutcome, ids := Summary(counts)
	if byOutcome[kindCreated] != 1 || byOutcome[kindDeduplicated] != n-1 || len(byOutcome) != 2 {
		t.Fatalf("%d identical callbacks from %d processes: %v; want 1 created, %d deduplicated, nothing else",
			n, procs, byOutcome, n-1)
	}
	var created string
	for id := range ids[kindCreated] {
		created = id
	}
	if len(ids[kindDeduplicated]) != 1 || !ids[kindDeduplicated][created] {
		t.Fatalf("deduplicated answers carried %d ticket ids, want only %s", len(ids[kindDeduplicated]), created)
	}
	if got := count(t, s) - before; got != 1 {
		t.Fatalf("tickets stored = %d, want 1", got)
	}
	return byOutcome
}

// CheckNoneLost sends n distinct new callbacks from procs processes,
// workers at a time in each, and checks that exactly n tickets were
// stored: none lost, none doubled.
func CheckNoneLost(t *testing.T, procs, n, workers int, s Counter, env ...string) map[string]int {
	t.Helper()
	before := count(t, s)
	counts := Processes(t, procs, n/procs, workers, "distinct", env...)
	byOutcome, ids := Summary(counts)
	if byOutcome[kindCreated] != n || len(byOutcome) != 1 || len(ids[kindCreated]) != n {
		t.Fatalf("%d distinct callbacks: %v with %d distinct ids; want %d created", n, byOutcome, len(ids[kindCreated]), n)
	}
	if got := count(t, s) - before; got != n {
		t.Fatalf("tickets stored = %d, want %d", got, n)
	}
	return byOutcome
}

// CheckRestart creates a ticket in one process and repeats the call in a
// new process (a cold start): the second returns the saved ticket.
func CheckRestart(t *testing.T, env ...string) {
	t.Helper()
	run := RunID("restart-" + t.Name())
	first, firstIDs := Summary(Processes(t, 1, 1, 1, "same", append(env, run)...))
	second, secondIDs := Summary(Processes(t, 1, 1, 1, "same", append(env, run)...))
	if first[kindCreated] != 1 || second[kindDeduplicated] != 1 {
		t.Fatalf("first process %v, second %v; want created then deduplicated", first, second)
	}
	for id := range firstIDs[kindCreated] {
		if !secondIDs[kindDeduplicated][id] {
			t.Fatalf("second process returned %v, want %s", secondIDs, id)
		}
	}
}
