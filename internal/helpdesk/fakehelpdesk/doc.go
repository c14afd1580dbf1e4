// Package fakehelpdesk is an in-process helpdesk for tests: one httptest
// server speaking both destination contracts, Zendesk's ticket API and the
// signed webhook, that keeps what it is sent and fails the way real
// helpdesks fail.
//
// Zendesk side: POST /api/v2/tickets checks HTTP Basic "{email}/token:{token}",
// creates a ticket and remembers its Idempotency-Key for KeyTTL on the
// fake's clock: the same key with the same body replays the first answer,
// with another body answers 400 IdempotentRequestError, and once the key has
// expired a resend creates a second ticket, as Zendesk does. GET
// /api/v2/tickets?external_id=X lists the tickets under that external id,
// newest first, so a client has to pick the oldest itself.
//
// Webhook side (WebhookURL): POST checks X-Signature-256 over the body bytes
// and requires Idempotency-Key; the same key replays, another body under the
// same key answers 422. GET with idempotency_key=X checks the signature over
// that query parameter's text and answers 200 with the ticket or 404. The
// shape of the 2xx body is chosen with SetWebhookReply.
//
// A second request under a key still being processed (for instance while a
// scripted slow answer is pending) answers 409 on both sides.
//
// Failures are scripted with Script: a Rule matches the n-th request of a
// kind, or the requests under one key, and applies a Fault (commit first or
// not, then drop the connection, answer a status with Retry-After, or answer
// late). Lookups can be made to lag behind writes with SetLookupLag. The
// server counts tickets per key and in total, requests per kind and
// connections, and records every request it received. All methods are safe
// for concurrent use.
package fakehelpdesk
