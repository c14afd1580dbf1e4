package opkey

import "github.com/aivax-examples/idempotent-callback/idem"

// The product's names for the operation key of package idem, which holds
// the implementation, its tests, vectors and fuzz target. The benchmarks
// of this package measure that implementation.

// MaxDepth is how many levels below the arguments object a value may sit.
const MaxDepth = idem.MaxDepth

// Policy chooses what the operation key covers.
type Policy = idem.Policy

// The two key policies.
const (
	PolicyArguments = idem.PolicyArguments
	PolicyRequest   = idem.PolicyRequest
)

// ErrInvalid marks arguments that cannot be canonicalized.
var ErrInvalid = idem.ErrInvalid

// ParsePolicy accepts "arguments", "request" or "" (the default).
func ParsePolicy(s string) (Policy, error) { return idem.ParsePolicy(s) }

// Canonical returns the RFC 8785 text of a JSON object (idem.Canonical).
func Canonical(raw []byte) (string, error) { return idem.Canonical(raw) }

// Key derives the operation key and the argument fingerprint (idem.Key).
func Key(policy Policy, tenantID, requestID, function, canonical string) (key, fingerprint string) {
	return idem.Key(policy, tenantID, requestID, function, canonical)
}
