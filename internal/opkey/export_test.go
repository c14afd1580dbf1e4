package opkey

import "github.com/gowebpki/jcs"

// CanonicalJCS is an independent RFC 8785 implementation to hold Canonical
// to: github.com/gowebpki/jcs after the same depth check. The two must
// produce the same text and refuse the same inputs (their error messages
// differ).
func CanonicalJCS(raw []byte) (string, error) {
	if _, err := checkDepth(raw); err != nil {
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
