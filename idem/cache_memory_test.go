package idem

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkCacheMemory fills a Cache of 4096 entries (the callback
// function's default size) with completed create_ticket records, each
// with strings of its own (key, fingerprint, tenant, owner) and a
// created answer as its result, and reports the heap the full cache
// holds: bytes/entry and MiB in all.
func BenchmarkCacheMemory(b *testing.B) {
	const n = 4096
	now := time.Now()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := NewCache(n)
		for i := range n {
			c.put(Record{
				Key: fmt.Sprintf("%064x", i), State: StateCompleted,
				Tenant: fmt.Sprintf("tenant-%06d", i), Owner: fmt.Sprintf("user-%06d", i), Function: "create_ticket",
				Fingerprint: fmt.Sprintf("%064x", n+i),
				Result:      fmt.Appendf(nil, `{"status":"created","ticket_id":"3f1c1f0e-8a4b-4c1d-9e2f-%012x","deduplicated":false}`, i),
				CreatedAt:   now, ExpiresAt: now.Add(24 * time.Hour),
			}, now)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := len(c.byKey); got != n {
			b.Fatalf("cache holds %d entries, want %d", got, n)
		}
		held := float64(after.HeapAlloc - before.HeapAlloc)
		b.ReportMetric(held/n, "bytes/entry")
		b.ReportMetric(held/(1<<20), "MiB")
		runtime.KeepAlive(c)
	}
}
