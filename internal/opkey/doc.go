// Package opkey is the product's name for the operation key of the public
// package idem (github.com/aivax-examples/idempotent-callback/idem): the
// RFC 8785 text of a call's arguments and the SHA-256 key of
// [tenant_id, request_id, function_name, canonical] (docs/contract.md,
// Operation key). The implementation, the RFC and Node vectors and the
// fuzz target live in idem; the benchmarks here are the ones make bench
// reports.
package opkey
