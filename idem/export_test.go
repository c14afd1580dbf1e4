package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/gowebpki/jcs"
)

// CanonicalJCS is an independent RFC 8785 implementation to hold Canonical
// to: github.com/gowebpki/jcs, after a depth count of its own on the
// standard library's tokenizer (nothing of this package's code). The two
// must produce the same text and refuse the same inputs (their error
// messages differ).
func CanonicalJCS(raw []byte) (string, error) {
	if err := referenceDepth(raw); err != nil {
		return "", err
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return "", err
	}
	if out[0] != '{' {
		return "", errNotObject
	}
	return string(out), nil
}

var errReferenceDepth = errors.New("reference: nested too deep")

// referenceDepth refuses a value more than MaxDepth containers below the
// top-level value, counting with encoding/json's tokens: a value's level
// is the number of containers open around it. Text the tokenizer refuses
// is refused too (jcs would refuse it as well).
func referenceDepth(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	open := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		d, isDelim := tok.(json.Delim)
		switch {
		case isDelim && (d == '}' || d == ']'):
			open--
			continue
		case open > MaxDepth:
			return errReferenceDepth
		}
		if isDelim {
			open++
		}
	}
}

// AppendString exposes the JSON string writer of Key to the tests.
var AppendString = appendString

// Judge exposes the judgement of a Store.Claim's answer to the tests.
var Judge = judge
