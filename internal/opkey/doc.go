// Package opkey turns a tool call into its operation key (docs/contract.md,
// Operation key).
//
// Canonical arguments are the RFC 8785 (JSON Canonicalization Scheme) text
// of function.content, produced by the standard library's
// encoding/json/jsontext, with the limits the contract adds on top: at most
// 64 levels below the arguments object, no duplicate member names, no
// number outside the IEEE-754 double range. The tests check it against the
// RFC's vectors and, by fuzzing, against github.com/gowebpki/jcs.
//
// The key is the lower-case hex SHA-256 of the RFC 8785 text of the string
// array [tenant_id, request_id, function_name, canonical] (policy
// "arguments") or [tenant_id, request_id, function_name] (policy "request").
// For an array of strings that text is byte-for-byte what JavaScript's
// JSON.stringify writes, which Go's encoding/json is not (it escapes <, >,
// &, U+2028 and U+2029); the vectors in testdata were computed with Node.
package opkey
