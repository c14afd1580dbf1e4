package nonce_test

import (
	"strconv"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/nonce"
)

// BenchmarkVerify: one X-Request-Nonce check at BCrypt work factors 9
// (AIVAX's today) and 10, on one core. This is the dominant CPU cost of a
// callback; on Lambda it scales with the memory size (one full vCPU at
// 1769 MB), see docs/benchmarks.md. The mismatch case costs the same: the
// hash is computed in full either way.
func BenchmarkVerify(b *testing.B) {
	v, err := nonce.New(hookKey, nonce.DefaultMinCost, nonce.DefaultMaxCost)
	if err != nil {
		b.Fatal(err)
	}
	for _, cost := range []int{9, 10} {
		h, err := nonce.Generate(hookKey, cost)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("cost="+strconv.Itoa(cost), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Verify(h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
