package idem_test

import (
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/idem"
)

var benchArgs = []byte(`{"title":"Cannot sign in to the portal <after> reset & 2FA",
 "description":"` + strings.Repeat("The user reports that the login page loops. ", 20) + `",
 "priority":"high"}`)

func BenchmarkCanonical(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchArgs)))
	for b.Loop() {
		if _, err := idem.Canonical(benchArgs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKey(b *testing.B) {
	canonical, err := idem.Canonical(benchArgs)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
		b.Run(string(p), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				idem.Key(p, "tenant-a", "request-example", "create_ticket", canonical)
			}
		})
	}
}
