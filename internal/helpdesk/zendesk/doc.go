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
//
// Follow-ups (delivery.EffectSender). Zendesk takes no idempotency key on
// a ticket update, so a comment or a close is one PUT
// {url}/api/v2/tickets/{id} that carries its delivery key in the update's
// custom metadata, and is found afterwards by reading every page of the
// ticket's audits (cursor pagination, page[size]=100; an offset listing's
// next_page is followed too when it names the same listing) for an audit
// whose metadata.custom carries it. Zendesk keeps the "metadata" object of
// an update as its audit's metadata.custom, so the {"custom":{...}}
// object the contract sends reads back as metadata.custom.custom; both
// places are looked at. A comment is {"comment":{"body","public":true},
// "metadata":{"custom":{"comment_id"}}}, its receipt the audit's id; a
// close is {"status":"solved", "comment" (the resolution, when there is
// one), "metadata":{"custom":{"close_id"}}}, its receipt the ticket's id,
// and it is found by the ticket's status (solved or closed) or else by
// its audit: an update that changes nothing (a ticket already solved, no
// resolution) makes no audit in Zendesk. The answers are classified as a
// create's, but for a 404 whose body is RecordNotFound: the ticket is
// gone (Refused), not a wrong URL. The engine's outcome window applies,
// since the audits listing may lag. Other kinds are refused.
package zendesk
