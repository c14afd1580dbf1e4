package doors

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestAuthenticator(t *testing.T) {
	common := config.Common{MinCost: 4, MaxCost: 12}
	key := "local-demo-hook-key"
	good, err := nonce.Generate(key, 4)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		key        string
		insecure   bool
		wantErr    bool
		wantType   any
		acceptGood bool // Verify(nonce of key) succeeds
		acceptNone bool // Verify("") succeeds
	}{
		{"empty key -> nonce.Refuse (fail closed)", "", false, false, nonce.Refuse{}, false, false},
		{"insecure -> nonce.Off", "", true, false, nonce.Off{}, true, true},
		{"key of 73 bytes -> error", strings.Repeat("k", 73), false, true, nil, false, false},
		{"key -> *nonce.Verifier", key, false, false, &nonce.Verifier{}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Authenticator(tc.key, tc.insecure, common, discard())
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %T and no error", a)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch tc.wantType.(type) {
			case nonce.Refuse:
				if _, ok := a.(nonce.Refuse); !ok {
					t.Errorf("got %T, want nonce.Refuse", a)
				}
			case nonce.Off:
				if _, ok := a.(nonce.Off); !ok {
					t.Errorf("got %T, want nonce.Off", a)
				}
			case *nonce.Verifier:
				if _, ok := a.(*nonce.Verifier); !ok {
					t.Errorf("got %T, want *nonce.Verifier", a)
				}
			}
			if got := a.Verify(good) == nil; got != tc.acceptGood {
				t.Errorf("Verify(good nonce) accepted=%v, want %v", got, tc.acceptGood)
			}
			if got := a.Verify("") == nil; got != tc.acceptNone {
				t.Errorf("Verify(\"\") accepted=%v, want %v", got, tc.acceptNone)
			}
		})
	}
}
