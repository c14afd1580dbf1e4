package opkey_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/opkey"
)

// FuzzCanonicalKey: on any bytes Canonical does not panic and either
// refuses with ErrInvalid or returns valid JSON text of an object that is
// its own canonical form; Key on it is deterministic under both policies.
// Canonical agrees with github.com/gowebpki/jcs, an independent RFC 8785
// implementation: the same text, and the same inputs refused.
// The seed corpus is in testdata/fuzz/FuzzCanonicalKey.
//
//	go test -run='^$' -fuzz=FuzzCanonicalKey -fuzztime=20s ./internal/opkey
func FuzzCanonicalKey(f *testing.F) {
	f.Add([]byte(`{"title":"Cannot sign in","priority":"high"}`))
	f.Add([]byte(`{"\ud83d\ude02":[1e21,-0,{"a":null}],"\u20ac":"<>&\u2028"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := string(raw)
		out, err := opkey.Canonical(raw)
		if string(raw) != in {
			t.Fatalf("Canonical changed its input %q to %q", in, raw)
		}
		ref, refErr := opkey.CanonicalJCS(raw)
		if out != ref || (err == nil) != (refErr == nil) {
			t.Fatalf("Canonical(%q) = %q, %v; the jcs reference says %q, %v", raw, out, err, ref, refErr)
		}
		if err != nil {
			if !errors.Is(err, opkey.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			if out != "" {
				t.Fatalf("output %q alongside error %v", out, err)
			}
			return
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("Canonical(%q) = %q: not valid JSON", raw, out)
		}
		if out[0] != '{' {
			t.Fatalf("Canonical(%q) = %q: not an object", raw, out)
		}
		again, err := opkey.Canonical([]byte(out))
		if err != nil || again != out {
			t.Fatalf("not idempotent: Canonical(%q) = %q, %v", out, again, err)
		}
		for _, p := range []opkey.Policy{opkey.PolicyArguments, opkey.PolicyRequest} {
			k1, f1 := opkey.Key(p, "tenant-a", "request-1", "create_ticket", out)
			k2, f2 := opkey.Key(p, "tenant-a", "request-1", "create_ticket", again)
			if k1 != k2 || f1 != f2 || !isLowerHex64(k1) || !isLowerHex64(f1) {
				t.Fatalf("Key(%s) not deterministic: %s/%s vs %s/%s", p, k1, f1, k2, f2)
			}
		}
	})
}
