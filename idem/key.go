package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is how many levels below the arguments object a value may sit.
// The arguments object itself is level 0, as in the reference
// canonicalJson of testdata/keyvectors.mjs.
const MaxDepth = 64

// Policy chooses what the operation key covers.
type Policy string

const (
	// PolicyArguments keys on tenant, request_id, function and canonical
	// arguments: changed arguments are a new operation (the default).
	PolicyArguments Policy = "arguments"
	// PolicyRequest keys on tenant, request_id and function; the arguments'
	// fingerprint is stored and a repeat with other arguments is refused.
	PolicyRequest Policy = "request"
)

// ParsePolicy accepts "arguments", "request" or "" (the default).
func ParsePolicy(s string) (Policy, error) {
	switch Policy(s) {
	case "", PolicyArguments:
		return PolicyArguments, nil
	case PolicyRequest:
		return PolicyRequest, nil
	}
	return "", fmt.Errorf("key policy %q: want %q or %q", s, PolicyArguments, PolicyRequest)
}

// Other is the policy p is not: PolicyRequest for PolicyArguments (and for
// the empty default), PolicyArguments otherwise. A store checks the key a
// call has under it (Record.AltKey), so that switching the policy of a
// live stack re-keys no live operation.
func (p Policy) Other() Policy {
	if p == PolicyRequest {
		return PolicyArguments
	}
	return PolicyRequest
}

// ErrInvalid marks a call that cannot be keyed: arguments that cannot be
// canonicalized (Canonical) and, from KeyOf, a missing or non-UTF-8
// tenant, owner, request id or function name. It also marks a record a
// store refuses to claim with (Record.Check). Every such error is an
// *InvalidError, which wraps it.
var ErrInvalid = errors.New("idem: invalid")

// InvalidError is the error of a call, arguments or record that cannot be
// keyed or claimed. Reason says what, and is safe to show to the caller
// (a model that can correct its arguments): it names the limit, never the
// input. errors.Is(err, ErrInvalid) holds for it.
type InvalidError struct {
	Reason string
}

// Error is "idem: invalid: " and the reason.
func (e *InvalidError) Error() string { return "idem: invalid: " + e.Reason }

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// invalid is an *InvalidError whose reason is formatted.
func invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

// Canonical returns the RFC 8785 text of a JSON object. It refuses
// anything that is not an object, nesting deeper than MaxDepth, duplicate
// member names, numbers outside the double range and invalid Unicode. A
// call with no arguments sends {}: empty or nil raw is refused, not taken
// for {}, so that every client derives the same key for such a call.
//
// The text comes from the standard library's RFC 8785 implementation
// (encoding/json/jsontext, Value.Canonicalize). It writes a number beyond
// the double range as the largest double, where RFC 8785 refuses it, so
// such numbers are refused here first. The tests hold it to the RFC's own
// vectors and, by fuzzing, to github.com/gowebpki/jcs.
func Canonical(raw []byte) (string, error) {
	if len(raw) == 0 {
		return "", errNoArguments
	}
	outOfRange, err := checkDepth(raw)
	if err != nil {
		return "", err
	}
	// Canonicalize rewrites its receiver: work on a copy, never the
	// caller's bytes.
	v := jsontext.Value(append(make([]byte, 0, len(raw)), raw...))
	if err := v.Canonicalize(); err != nil {
		if errors.Is(err, jsontext.ErrDuplicateName) {
			return "", errDuplicate
		}
		return "", errSyntax
	}
	if v[0] != '{' {
		return "", errNotObject
	}
	if outOfRange {
		return "", errRange
	}
	return string(v), nil
}

// The errors of Canonical: each names the limit, never the input.
var (
	errNoArguments = invalid("no arguments: send {} for none")
	errNotObject   = invalid("the arguments must be a JSON object")
	errDuplicate   = invalid("a member name appears twice in the same object")
	errRange       = invalid("a number is outside the IEEE-754 double range")
	errSyntax      = invalid("the arguments are not valid JSON text")
	errTooDeep     = invalid("values may be nested at most %d levels deep", MaxDepth)
)

// checkDepth refuses a value more than MaxDepth levels below the top
// object. A value's level is the number of containers open around it; a
// member name sits at the level of its value, so counting names as values
// changes nothing. It also reports whether a number token lies outside the
// double range, for the caller to refuse once the syntax is known to be
// valid. Syntax is left to the parser: this only counts and looks.
func checkDepth(raw []byte) (outOfRange bool, err error) {
	open := 0
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r', ',', ':':
			continue
		case '}', ']':
			open--
			continue
		}
		if open > MaxDepth {
			return false, errTooDeep
		}
		switch c {
		case '{', '[':
			open++
		case '"':
			inString = true
		default:
			// A number or literal: skip to its end so one token counts once.
			start := i
			for i+1 < len(raw) && !isDelim(raw[i+1]) {
				i++
			}
			if c == '-' || c >= '0' && c <= '9' {
				f, err := strconv.ParseFloat(string(raw[start:i+1]), 64)
				outOfRange = outOfRange || err != nil && math.IsInf(f, 0)
			}
		}
	}
	return outOfRange, nil
}

func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', '{', '}', '[', ']', '"':
		return true
	}
	return false
}

// Key derives the operation key and the argument fingerprint. Under
// PolicyArguments the fingerprint is the SHA-256 of canonical as well (it
// is what the stored item carries either way).
func Key(policy Policy, tenantID, requestID, function, canonical string) (key, fingerprint string) {
	return keyOnly(policy, tenantID, requestID, function, canonical), hashHex([]byte(canonical))
}

// keyOnly is Key's key, without the fingerprint.
func keyOnly(policy Policy, tenantID, requestID, function, canonical string) string {
	// Sized for the common case: a string grows when escaped (a control
	// character becomes six bytes), append handles the rest.
	size := 16 + len(tenantID) + len(requestID) + len(function)
	if policy != PolicyRequest {
		size += len(canonical) + len(canonical)/4
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	buf = appendString(buf, tenantID)
	buf = append(buf, ',')
	buf = appendString(buf, requestID)
	buf = append(buf, ',')
	buf = appendString(buf, function)
	if policy != PolicyRequest {
		buf = append(buf, ',')
		buf = appendString(buf, canonical)
	}
	buf = append(buf, ']')
	return hashHex(buf)
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as RFC 8785 and
// JavaScript's JSON.stringify write it: only '"', '\\' and characters
// below U+0020 are escaped, with the short forms \b \t \n \f \r and
// lower-case \u00xx for the rest. Everything else, including '<', '>',
// '&', U+2028 and U+2029, is written as is. Invalid UTF-8 is written as
// U+FFFD, which is what a JavaScript string decoded from it holds.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for _, r := range s {
		switch {
		case r == '"':
			buf = append(buf, '\\', '"')
		case r == '\\':
			buf = append(buf, '\\', '\\')
		case r >= 0x20:
			buf = utf8.AppendRune(buf, r)
		case r == '\b':
			buf = append(buf, '\\', 'b')
		case r == '\t':
			buf = append(buf, '\\', 't')
		case r == '\n':
			buf = append(buf, '\\', 'n')
		case r == '\f':
			buf = append(buf, '\\', 'f')
		case r == '\r':
			buf = append(buf, '\\', 'r')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
		}
	}
	return append(buf, '"')
}
