package bench

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// cell is one measured combination.
type cell struct {
	store, kind string
	mode        string
	clients     int
	ops         int
	elapsed     time.Duration
	p50, p99    time.Duration
	other       map[string]int // answers other than the expected one
}

// TestThroughput drives the full callback path (handler with nonce.Off →
// service → store) from 1, 4, 16 and 64 concurrent clients, for new
// operations (a fresh request_id per call) and repeated ones (each client
// repeats its own completed operation), on DynamoDB Local and on SQLite,
// for a bounded time per cell. Clients and store share this machine.
func TestThroughput(t *testing.T) {
	out := outFile(t, results.ThroughputEnv)
	d := 2 * time.Second
	if v := os.Getenv(results.CellDurationEnv); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s: %v", results.CellDurationEnv, err)
		}
	}
	ctx := context.Background()

	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	_, ddb := dynamoHandler(t, testenv.DynamoClient(t, endpoint), table)
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "throughput.sqlite"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })

	stores := []struct {
		name, kind string
		h          http.Handler
	}{
		{"DynamoDB Local", "dynamodb", ddb},
		{"SQLite (file, WAL, synchronous=FULL)", "sqlite", newHandler(lite, usersOf(benchUser))},
	}
	var cells []cell
	for _, st := range stores {
		ids := requestIDs("load")
		run(t, st.h, ids, 16, time.Second, false) // warm-up: connections, JIT, page cache
		for _, mode := range []string{"new", "repeat"} {
			for _, clients := range []int{1, 4, 16, 64} {
				c := run(t, st.h, ids, clients, d, mode == "repeat")
				c.store, c.kind, c.mode = st.name, st.kind, mode
				cells = append(cells, c)
				t.Logf("%s %s %d clients: %.0f ops/s, p50 %v, p99 %v, other %v", c.store, c.mode, c.clients,
					float64(c.ops)/c.elapsed.Seconds(), c.p50, c.p99, c.other)
			}
		}
	}
	res := results.Throughput{CellSeconds: d.Seconds()}
	for _, c := range cells {
		res.Cells = append(res.Cells, results.ThroughputCell{Store: c.store, StoreKind: c.kind, Mode: c.mode, Clients: c.clients,
			Ops: c.ops, Seconds: c.elapsed.Seconds(), P50ms: ms(c.p50), P99ms: ms(c.p99), Other: c.other})
	}
	if err := results.WriteJSON(out, res); err != nil {
		t.Fatal(err)
	}
	// The table shows them, but a figure measured over wrong answers is
	// not the product's: any answer other than created (new) or
	// deduplicated (repeat) fails the run.
	for _, c := range cells {
		if len(c.other) > 0 {
			t.Errorf("%s %s %d clients: unexpected answers %v", c.store, c.mode, c.clients, c.other)
		}
	}
}

// run sends callbacks from clients goroutines for d and measures each.
// With repeat, each client first creates one operation, then repeats it.
func run(t *testing.T, h http.Handler, ids func() string, clients int, d time.Duration, repeat bool) cell {
	t.Helper()
	want := "created"
	rids := make([]string, clients)
	for i := range rids {
		rids[i] = ids()
		if repeat {
			if code, body := serve(h, rids[i]); outcome(code, body) != "created" {
				t.Fatalf("setting up a repeat: %d %s", code, body)
			}
			want = "deduplicated"
		}
	}
	deadline := time.Now().Add(d)
	latencies, other, elapsed := fanOut(clients, want, func(i int, record func(time.Duration, string)) {
		for time.Now().Before(deadline) {
			rid := rids[i]
			if !repeat {
				rid = ids()
			}
			t0 := time.Now()
			code, body := serve(h, rid)
			record(time.Since(t0), outcome(code, body))
		}
	})
	slices.Sort(latencies)
	return cell{clients: clients, ops: len(latencies), elapsed: elapsed,
		p50: percentile(latencies, 0.50), p99: percentile(latencies, 0.99), other: other}
}

// fanOut runs worker from n goroutines at once, each given its index and
// record for every operation it times: the operation's time, and its
// answer, counted in other when it is not want. It returns every time
// recorded, the answers other than want, and the time until the last
// worker returned.
func fanOut(n int, want string, worker func(i int, record func(time.Duration, string))) (times []time.Duration, other map[string]int, elapsed time.Duration) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	other = map[string]int{}
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 4096)
			bad := map[string]int{}
			worker(i, func(d time.Duration, answer string) {
				mine = append(mine, d)
				if answer != want {
					bad[answer]++
				}
			})
			mu.Lock()
			defer mu.Unlock()
			times = append(times, mine...)
			for k, v := range bad {
				other[k] += v
			}
		})
	}
	wg.Wait()
	return times, other, time.Since(start)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
