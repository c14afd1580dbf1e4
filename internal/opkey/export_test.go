package opkey

// CanonicalJCS is the reference Canonical (github.com/gowebpki/jcs alone,
// after the same depth check) that the fast path must agree with.
func CanonicalJCS(raw []byte) (string, error) {
	if _, err := checkDepth(raw); err != nil {
		return "", err
	}
	return canonicalJCS(raw)
}
