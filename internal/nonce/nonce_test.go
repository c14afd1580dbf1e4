package nonce_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/nonce"
)

const hookKey = "local-demo-hook-key"

var (
	once               sync.Once
	cost4, cost9       string
	cost4err, cost9err error
)

// hashes makes one real nonce at cost 4 and one at cost 9 (AIVAX's work
// factor today), once for the whole package.
func hashes(t *testing.T) (c4, c9 string) {
	t.Helper()
	once.Do(func() {
		cost4, cost4err = nonce.Generate(hookKey, 4)
		cost9, cost9err = nonce.Generate(hookKey, 9)
	})
	if cost4err != nil || cost9err != nil {
		t.Fatalf("Generate: %v %v", cost4err, cost9err)
	}
	return cost4, cost9
}

func verifier(t *testing.T, min, max int) *nonce.Verifier {
	t.Helper()
	v, err := nonce.New(hookKey, min, max)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// withCost returns h with its two cost digits replaced.
func withCost(h, digits string) string { return h[:4] + digits + h[6:] }

// TestCostCheckedBeforeHashing: a header of valid format whose cost is
// outside the range is refused with ErrCost. For cost 31 the body is a
// real hash of the right key with only the cost digits changed; if Verify
// hashed it, bcrypt at cost 31 (2^31 rounds) would take hours, so this
// test finishing at all proves no hashing happened. There is deliberately
// no timing assertion.
func TestCostCheckedBeforeHashing(t *testing.T) {
	c4, _ := hashes(t)
	v := verifier(t, nonce.DefaultMinCost, nonce.DefaultMaxCost)
	for _, tc := range []struct {
		name, header string
	}{
		{"cost-31-real-body", withCost(c4, "31")},
		{"cost-31-made-up-body", "$2a$31$" + strings.Repeat("a", 53)},
		{"cost-31-version-2b", "$2b$31$" + c4[7:]},
		{"cost-31-version-2y", "$2y$31$" + c4[7:]},
		{"cost-13-just-above", withCost(c4, "13")},
		{"cost-99", withCost(c4, "99")},
		{"cost-03-below", withCost(c4, "03")},
		{"cost-00", withCost(c4, "00")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.header) != 60 {
				t.Fatalf("test header has %d bytes, want 60", len(tc.header))
			}
			if err := v.Verify(tc.header); !errors.Is(err, nonce.ErrCost) {
				t.Fatalf("Verify = %v; want ErrCost", err)
			}
		})
	}
	// The lower bound applies to a nonce that would match: a real cost-4
	// hash of the right key is ErrCost (not nil) for a verifier from 5 up.
	if err := verifier(t, 5, 12).Verify(c4); !errors.Is(err, nonce.ErrCost) {
		t.Fatalf("cost-4 nonce with min cost 5: %v; want ErrCost", err)
	}
}

func TestCost(t *testing.T) {
	c4, _ := hashes(t)
	for _, tc := range []struct {
		header string
		want   int
	}{
		{c4, 4},
		{withCost(c4, "31"), 31},
		{withCost(c4, "09"), 9},
		{"$2b$12$" + c4[7:], 12},
		{"$2y$07$" + c4[7:], 7},
	} {
		if got, err := nonce.Cost(tc.header); err != nil || got != tc.want {
			t.Errorf("Cost(%q) = %d, %v; want %d", tc.header, got, err, tc.want)
		}
	}
}

// TestVerify: each malformed header gets ErrMalformed (ErrMissing when
// empty), a wrong key ErrMismatch, the right key nil.
func TestVerify(t *testing.T) {
	c4, c9 := hashes(t)
	other, err := nonce.Generate("another-hook-key", 9)
	if err != nil {
		t.Fatal(err)
	}
	body := c4[7:]
	v := verifier(t, nonce.DefaultMinCost, nonce.DefaultMaxCost)
	for _, tc := range []struct {
		name, header string
		want         error
	}{
		{"right-key-cost-9", c9, nil},
		{"right-key-cost-4", c4, nil},
		{"version-2b-accepted", "$2b$" + c4[4:], nil},
		{"version-2y-accepted", "$2y$" + c4[4:], nil},
		{"wrong-key", other, nonce.ErrMismatch},
		{"hash-digit-changed", c4[:59] + flip(c4[59]), nonce.ErrMismatch},
		{"salt-changed", c4[:7] + flip(c4[7]) + c4[8:], nonce.ErrMismatch},
		{"empty", "", nonce.ErrMissing},
		{"too-short", c4[:59], nonce.ErrMalformed},
		{"too-long", c4 + "a", nonce.ErrMalformed},
		{"trailing-space", c4 + " ", nonce.ErrMalformed},
		{"leading-space", " " + c4[:59], nonce.ErrMalformed},
		{"version-2c", "$2c$04$" + body, nonce.ErrMalformed},
		{"version-2x", "$2x$04$" + body, nonce.ErrMalformed},
		{"version-2$", "$2$04$" + body + "a", nonce.ErrMalformed},
		{"version-3a", "$3a$04$" + body, nonce.ErrMalformed},
		{"version-1a", "$1a$04$" + body, nonce.ErrMalformed},
		{"no-leading-dollar", "x2a$04$" + body, nonce.ErrMalformed},
		{"no-dollar-after-version", "$2ax04$" + body, nonce.ErrMalformed},
		{"no-dollar-after-cost", "$2a$04x" + body, nonce.ErrMalformed},
		{"cost-non-digit", "$2a$0x$" + body, nonce.ErrMalformed},
		{"cost-non-digit-first", "$2a$x4$" + body, nonce.ErrMalformed},
		{"cost-sign", "$2a$-4$" + body, nonce.ErrMalformed},
		{"cost-space", "$2a$ 4$" + body, nonce.ErrMalformed},
		{"alphabet-plus", c4[:30] + "+" + c4[31:], nonce.ErrMalformed},
		{"alphabet-equals", c4[:59] + "=", nonce.ErrMalformed},
		{"alphabet-dollar", c4[:40] + "$" + c4[41:], nonce.ErrMalformed},
		{"alphabet-nul", c4[:20] + "\x00" + c4[21:], nonce.ErrMalformed},
		{"alphabet-non-ascii", c4[:58] + "é", nonce.ErrMalformed},
		{"plain-key", hookKey, nonce.ErrMalformed},
		{"sixty-dots", strings.Repeat(".", 60), nonce.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Verify(tc.header)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v; want %v", err, tc.want)
			}
		})
	}
}

// flip returns a different character of BCrypt's alphabet.
func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func TestVerifierOnlyMatchesItsKey(t *testing.T) {
	c4, _ := hashes(t)
	v, err := nonce.New(hookKey+"x", 4, 12)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(c4); !errors.Is(err, nonce.ErrMismatch) {
		t.Fatalf("a nonce of another key: %v; want ErrMismatch", err)
	}
}

// TestNew: an empty key is ErrNoKey; a key BCrypt would cut short and bad
// cost ranges are errors; no Verifier comes with an error.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name     string
		key      string
		min, max int
		ok       bool
		is       error
	}{
		{"default", hookKey, nonce.DefaultMinCost, nonce.DefaultMaxCost, true, nil},
		{"72-bytes", strings.Repeat("k", 72), 4, 12, true, nil},
		{"72-bytes-multibyte", strings.Repeat("é", 36), 4, 12, true, nil},
		{"73-bytes", strings.Repeat("k", 73), 4, 12, false, nil},
		{"73-bytes-multibyte", strings.Repeat("é", 36) + "k", 4, 12, false, nil},
		{"empty-key", "", 4, 12, false, nonce.ErrNoKey},
		{"min-below-4", hookKey, 3, 12, false, nil},
		{"max-above-31", hookKey, 4, 32, false, nil},
		{"min-above-max", hookKey, 10, 9, false, nil},
		{"up-to-the-cap", hookKey, 4, nonce.CapCost, true, nil},
		{"single-cost", hookKey, 9, 9, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := nonce.New(tc.key, tc.min, tc.max)
			if tc.ok {
				if err != nil || v == nil {
					t.Fatalf("New = %v, %v; want a verifier", v, err)
				}
				return
			}
			if err == nil || v != nil {
				t.Fatalf("New = %v, %v; want an error and no verifier", v, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("New error %v; want %v", err, tc.is)
			}
			if tc.key != "" && strings.Contains(err.Error(), tc.key) {
				t.Fatalf("New error echoes the key: %v", err)
			}
		})
	}
}

// TestKeyOf72Bytes: the whole 72-byte key counts; a nonce of a key that
// differs only in its last byte does not match.
func TestKeyOf72Bytes(t *testing.T) {
	key := strings.Repeat("k", 71) + "a"
	h, err := nonce.Generate(strings.Repeat("k", 71)+"b", 4)
	if err != nil {
		t.Fatal(err)
	}
	v, err := nonce.New(key, 4, 12)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(h); !errors.Is(err, nonce.ErrMismatch) {
		t.Fatalf("Verify = %v; want ErrMismatch", err)
	}
}

func TestRefuseAndOff(t *testing.T) {
	c4, _ := hashes(t)
	for _, h := range []string{"", c4, "garbage", withCost(c4, "31")} {
		if err := (nonce.Refuse{}).Verify(h); !errors.Is(err, nonce.ErrNoKey) {
			t.Errorf("Refuse.Verify(%q) = %v; want ErrNoKey (fail closed)", h, err)
		}
		if err := (nonce.Off{}).Verify(h); err != nil {
			t.Errorf("Off.Verify(%q) = %v; want nil", h, err)
		}
	}
}

func TestGenerate(t *testing.T) {
	h, err := nonce.Generate(hookKey, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$2a$04$") || len(h) != 60 {
		t.Fatalf("Generate = %q; want $2a$04$ and 60 bytes", h)
	}
	h2, _ := nonce.Generate(hookKey, 4)
	if h == h2 {
		t.Fatal("two nonces are equal: the salt must be fresh")
	}
	if _, err := nonce.Generate(hookKey, 32); err == nil {
		t.Fatal("Generate at cost 32 succeeded")
	}
}
