// Package nonce checks AIVAX's X-Request-Nonce header: a fresh BCrypt hash
// of the account's hook key (docs/contract.md, Request and Order of checks,
// step 2).
//
// The header's shape and cost are checked before any hashing, so a
// "$2a$31$..." header costs microseconds, not hours. The nonce proves the
// call came from the account that holds the hook key; it does not sign the
// body and does not prevent replay.
package nonce

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Costs. AIVAX sends work factor AIVAXCost today; the default range admits
// it with one step of headroom. Every step doubles the work a request can
// make this function do before it is refused, and the function URL is
// public: a nonce of any accepted cost is hashed whoever sent it. CapCost
// is the most any configuration may allow (cost 12 is 8 times AIVAX's
// work, about a quarter of a second of one vCPU per request); MinCost is
// the least BCrypt has.
const (
	AIVAXCost      = 9
	MinCost        = bcrypt.MinCost
	DefaultMinCost = MinCost
	DefaultMaxCost = AIVAXCost + 1
	CapCost        = 12
)

// MaxKeyLen is BCrypt's input limit; a longer hook key is a configuration
// error rather than a key silently cut short.
const MaxKeyLen = 72

// Errors of Verify. All of them answer 401 without detail; they differ for
// tests and logs.
var (
	ErrMissing   = errors.New("nonce missing")
	ErrMalformed = errors.New("nonce malformed")
	ErrCost      = errors.New("nonce cost outside the allowed range")
	ErrMismatch  = errors.New("nonce does not match the hook key")
	ErrNoKey     = errors.New("no hook key configured: every callback is refused")
)

// Verifier checks nonces against one hook key.
type Verifier struct {
	key              []byte
	minCost, maxCost int
}

// New builds a Verifier. An empty key, a key longer than 72 bytes or a bad
// cost range is an error.
func New(hookKey string, minCost, maxCost int) (*Verifier, error) {
	if hookKey == "" {
		return nil, ErrNoKey
	}
	s := Settings{HookKey: hookKey, MinCost: minCost, MaxCost: maxCost}
	if minCost < MinCost || maxCost < MinCost {
		return nil, fmt.Errorf("nonce cost range %d..%d: want %d <= min <= max <= %d", minCost, maxCost, MinCost, CapCost)
	}
	if err := s.CheckAndSetDefaults(); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return &Verifier{key: []byte(hookKey), minCost: minCost, maxCost: maxCost}, nil
}

// Verify checks one header value.
func (v *Verifier) Verify(header string) error {
	if header == "" {
		return ErrMissing
	}
	cost, err := Cost(header)
	if err != nil {
		return err
	}
	if cost < v.minCost || cost > v.maxCost {
		return ErrCost
	}
	if bcrypt.CompareHashAndPassword([]byte(header), v.key) != nil {
		return ErrMismatch
	}
	return nil
}

// Cost parses "$2a$NN$" + 53 characters of BCrypt's base64 alphabet and
// returns NN, without hashing anything. The versions 2a, 2b and 2y are
// accepted.
func Cost(h string) (int, error) {
	const size = 60 // "$2a$09$" + 22 salt + 31 hash
	if len(h) != size || h[0] != '$' || h[1] != '2' || h[3] != '$' || h[6] != '$' {
		return 0, ErrMalformed
	}
	if !strings.ContainsRune("aby", rune(h[2])) {
		return 0, ErrMalformed
	}
	if h[4] < '0' || h[4] > '9' || h[5] < '0' || h[5] > '9' {
		return 0, ErrMalformed
	}
	for i := 7; i < size; i++ {
		c := h[i]
		if !(c == '.' || c == '/' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return 0, ErrMalformed
		}
	}
	return int(h[4]-'0')*10 + int(h[5]-'0'), nil
}

// Generate returns a fresh nonce for hookKey, as AIVAX would send it: for
// local curl runs and tests.
func Generate(hookKey string, cost int) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(hookKey), cost)
	return string(h), err
}

// Refuse is the Authenticator used when no hook key is configured: it
// refuses everything (fail closed).
type Refuse struct{}

// Verify always fails.
func (Refuse) Verify(string) error { return ErrNoKey }

// Off accepts every callback. Only the local server's explicit
// "insecure_no_auth" uses it; Lambda has no such switch.
type Off struct{}

// Verify always succeeds.
func (Off) Verify(string) error { return nil }
