package opkey

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxDepth is how many levels below the arguments object a value may sit.
// The arguments object itself is level 0, as in the seed's canonicalJson.
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

// ErrInvalid marks arguments that cannot be canonicalized. Its message is
// safe to show to the model: it names the limit, never the input.
var ErrInvalid = errors.New("invalid arguments")

// Canonical returns the RFC 8785 text of a JSON object. It refuses
// anything that is not an object, nesting deeper than MaxDepth, duplicate
// member names, numbers outside the double range and invalid Unicode.
func Canonical(raw []byte) (string, error) {
	if err := checkDepth(raw); err != nil {
		return "", err
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return "", classify(err)
	}
	if len(out) == 0 || out[0] != '{' {
		return "", fmt.Errorf("%w: the arguments must be a JSON object", ErrInvalid)
	}
	return string(out), nil
}

// classify turns a jcs error into a message for the model that does not
// echo the input.
func classify(err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "Duplicate key"):
		return fmt.Errorf("%w: a member name appears twice in the same object", ErrInvalid)
	case strings.HasPrefix(msg, "Number out of range"):
		return fmt.Errorf("%w: a number is outside the IEEE-754 double range", ErrInvalid)
	}
	return fmt.Errorf("%w: the arguments are not valid JSON text", ErrInvalid)
}

// checkDepth refuses a value more than MaxDepth levels below the top
// object. A value's level is the number of containers open around it; a
// member name sits at the level of its value, so counting names as values
// changes nothing. Syntax is left to the parser: this only counts.
func checkDepth(raw []byte) error {
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
			return fmt.Errorf("%w: values may be nested at most %d levels deep", ErrInvalid, MaxDepth)
		}
		switch c {
		case '{', '[':
			open++
		case '"':
			inString = true
		default:
			// A number or literal: skip to its end so one token counts once.
			for i+1 < len(raw) && !isDelim(raw[i+1]) {
				i++
			}
		}
	}
	return nil
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
	fingerprint = hashHex([]byte(canonical))
	buf := make([]byte, 0, 16+len(tenantID)+len(requestID)+len(function)+len(canonical)*5/4)
	buf = append(buf, '[')
	buf = AppendString(buf, tenantID)
	buf = append(buf, ',')
	buf = AppendString(buf, requestID)
	buf = append(buf, ',')
	buf = AppendString(buf, function)
	if policy != PolicyRequest {
		buf = append(buf, ',')
		buf = AppendString(buf, canonical)
	}
	buf = append(buf, ']')
	return hashHex(buf), fingerprint
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string exactly as RFC 8785 and
// JavaScript's JSON.stringify write it: only '"', '\\' and characters
// below U+0020 are escaped, with the short forms \b \t \n \f \r and
// lower-case \u00xx for the rest. Everything else, including '<', '>',
// '&', U+2028 and U+2029, is written as is. Invalid UTF-8 is written as
// U+FFFD, which is what a JavaScript string decoded from it holds.
func AppendString(buf []byte, s string) []byte {
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
