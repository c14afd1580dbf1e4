package idem_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// FuzzCanonicalKey: on any bytes Canonical does not panic and either
// refuses with ErrInvalid or returns valid JSON text of an object that is
// its own canonical form, whatever the white space; Key on it is the
// definition's SHA-256, under both policies.
// Canonical agrees with github.com/gowebpki/jcs, an independent RFC 8785
// implementation: the same text, and the same inputs refused.
// The seed corpus is in testdata/fuzz/FuzzCanonicalKey.
//
//	go test -run='^$' -fuzz=FuzzCanonicalKey -fuzztime=20s ./idem
func FuzzCanonicalKey(f *testing.F) {
	f.Add([]byte(`{"title":"Cannot sign in","priority":"high"}`))
	f.Add([]byte(`{"\ud83d\ude02":[1e21,-0,{"a":null}],"\u20ac":"<>&\u2028"}`))
	for _, levels := range []int{idem.MaxDepth, idem.MaxDepth + 1} { // the edge of the depth limit
		f.Add([]byte(`{"a":` + strings.Repeat("[", levels) + strings.Repeat("]", levels) + `}`))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := string(raw)
		out, err := idem.Canonical(raw)
		if string(raw) != in {
			t.Fatalf("Canonical changed its input %q to %q", in, raw)
		}
		ref, refErr := idem.CanonicalJCS(raw)
		if out != ref || (err == nil) != (refErr == nil) {
			t.Fatalf("Canonical(%q) = %q, %v; the jcs reference says %q, %v", raw, out, err, ref, refErr)
		}
		if err != nil {
			if !errors.Is(err, idem.ErrInvalid) {
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
		again, err := idem.Canonical([]byte(out))
		if err != nil || again != out {
			t.Fatalf("not idempotent: Canonical(%q) = %q, %v", out, again, err)
		}
		// The same value written another way (re-indented) has the same
		// canonical text, so the same key.
		var indented bytes.Buffer
		if err := json.Indent(&indented, raw, "", "\t"); err == nil {
			if c, err := idem.Canonical(indented.Bytes()); err != nil || c != out {
				t.Fatalf("re-indented %q: Canonical = %q, %v; want %q", indented.Bytes(), c, err, out)
			}
		}
		// Key against the definition, computed with jcs and crypto/sha256.
		for _, p := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
			key, fp := idem.Key(p, "tenant-a", "request-1", "create_ticket", out)
			parts := []string{"tenant-a", "request-1", "create_ticket", out}
			wantFP := ""
			if p == idem.PolicyRequest {
				parts, wantFP = parts[:3], sha256Hex([]byte(out))
			}
			if want := referenceKey(t, parts); key != want {
				t.Fatalf("Key(%s) = %s; the definition gives %s", p, key, want)
			}
			if p == idem.PolicyRequest && fp != wantFP {
				t.Fatalf("fingerprint = %s; want SHA-256 of the canonical text %s", fp, wantFP)
			}
		}
	})
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// referenceKey is the key's definition: lower-case hex SHA-256 of the
// RFC 8785 text of the array of parts, through jcs.
func referenceKey(t *testing.T, parts []string) string {
	t.Helper()
	arr, err := json.Marshal(parts)
	if err != nil {
		t.Fatal(err)
	}
	text, err := jcs.Transform(arr)
	if err != nil {
		t.Fatal(err)
	}
	return sha256Hex(text)
}
