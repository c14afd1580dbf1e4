package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/memstore"
)

// BenchmarkRepeatCache is a repeat of a completed call in process, over
// the in-memory store, with and without a Cache: what the Guard itself
// costs around a claim (key derivation, plan, judging), with claims/op
// counted. dynamostore's BenchmarkRepeatCache measures it over DynamoDB.
func BenchmarkRepeatCache(b *testing.B) {
	for _, cached := range []bool{false, true} {
		b.Run(map[bool]string{false: "memstore", true: "memstore+cache"}[cached], func(b *testing.B) {
			store := &counting{Store: memstore.New()}
			g := &idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour}
			if cached {
				g.Cache = idem.NewCache(1024)
			}
			c := orderCall("c-7", "r-bench", `{"sku":"A-1","qty":2}`)
			p := &planned{}
			if o := g.Do(context.Background(), c, p.plan); o.Status != idem.Created {
				b.Fatalf("%v %v", o.Status, o.Err)
			}
			before := store.Claims()
			b.ReportAllocs()
			for b.Loop() {
				if o := g.Do(context.Background(), c, p.plan); o.Status != idem.Replayed {
					b.Fatalf("%v %v", o.Status, o.Err)
				}
			}
			b.ReportMetric(float64(store.Claims()-before)/float64(b.N), "claims/op")
		})
	}
}
