// Package webhook is the delivery destination for a team's own endpoint: it
// POSTs each ticket as JSON to the configured URL with the ticket id as the
// Idempotency-Key header, signed with X-Signature-256 (HMAC-SHA256 of the
// exact body bytes under the shared secret), and, when the endpoint offers
// it, looks tickets up with a signed GET carrying idempotency_key.
//
// The body is built from the ticket alone, fields in a fixed order and
// created_at as RFC 3339 UTC seconds, so every resend of a ticket carries
// the same bytes and the same signature, and a receiver that deduplicates
// by key and body sees the same request.
//
// Answers: any 2xx is delivered; when its body is a JSON object, "id"
// (string or number) becomes the external id, defaulting to the ticket id,
// and "url" the external URL. 409 means the key is being processed
// (Unknown); 400 and 422 are permanent refusals; everything else is
// classified by httpsend.
package webhook
