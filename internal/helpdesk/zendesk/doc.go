// Package zendesk is the delivery destination for Zendesk: it creates a
// ticket with POST {url}/api/v2/tickets under HTTP Basic
// "{email}/token:{token}", sending the ticket id as the Idempotency-Key
// header and as the Zendesk ticket's external_id, and looks tickets up by
// that external id.
//
// Zendesk keeps an idempotency key about two hours: within that window a
// resend with the same key and body is answered with the first ticket, and
// the same key with another body gets 400 IdempotentRequestError, which
// means a ticket may exist (Unknown), not a refusal. After the window a
// resend would create a second ticket, which is why every send whose
// outcome is unknown is followed by a Lookup before any resend. A lookup
// may list several tickets under one external id; the oldest (by
// created_at, then id) is the one that counts.
//
// HTTP behaviour and the classification of failed sends are httpsend's
// (401, 403 and 404 on the create URL: Misconfigured). A lookup answered
// with anything but 200 and a tickets list is a *delivery.SendError:
// Misconfigured for 401 and 403, Unknown otherwise (429 and 503 with their
// Retry-After).
// Credentials are never part of an error text or of the Client's printed
// or logged form.
package zendesk
