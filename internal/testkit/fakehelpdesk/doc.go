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
// Webhook side (WebhookURL): every request is verified by the Standard
// Webhooks convention with the convention's own Go library: webhook-id,
// webhook-timestamp and webhook-signature ("v1,<base64 HMAC-SHA256 of
// {id}.{timestamp}.{data}>" under the decoded whsec_ secret), the timestamp
// within SignatureTolerance (five minutes) of the fake's clock, else 401. An
// exact replay (the same id, timestamp and signature seen before) is counted
// by Replays and, with Config.RejectReplays, answered 409. POST signs the body bytes, requires
// Idempotency-Key and that it equal the signed webhook-id (400 otherwise,
// so a captured request cannot be replayed under a fresh key); the same key
// replays, another body under the same key answers 422. GET with
// idempotency_key=X signs the text "idempotency_key=X" (unescaped), with
// webhook-id X, and answers 200 with the ticket or 404. The shape of the 2xx
// body is chosen with SetWebhookReply.
//
// Linear side (LinearURL): POST /graphql takes the Authorization header's
// whole value as the key (401 AUTHENTICATION_ERROR otherwise, or while
// revoked) and answers three documents: issueCreate (the input's id is the
// issue's primary key, so an id can be at most one issue, even for a
// create committed late; a wrong teamId is an INVALID_INPUT error in a
// 200; a duplicate id is answered as SetLinearDuplicate says, since Linear
// does not publish its answer), issue(id:) (the issue, or "Entity not
// found" as Linear's SDK tests expect) and viewer/team(id:). LinearError
// and LinearRateLimited script its GraphQL errors and its RATELIMITED
// answer with the X-RateLimit-* headers; the other faults apply as on the
// other sides.
//
// Follow-ups. Zendesk side: PUT /api/v2/tickets/{id} applies an update as
// Zendesk does (a closed ticket answers 422, an unknown one 404
// RecordNotFound, an update that changes nothing makes no audit) and keeps
// the update's "metadata" object as its audit's metadata.custom; GET
// /api/v2/tickets/{id} shows the ticket and its status; GET
// /api/v2/tickets/{id}/audits lists its audits oldest first, by cursor
// (page[size], page[after], meta.has_more, links.next) or by offset
// (page, next_page), at most Config.AuditPageSize (2 by default) a page,
// and lags as lookups do, once per listing. Linear side: commentCreate
// (the input's id is the comment's primary key; a taken id is answered
// as SetLinearDuplicate says), comment(id:), issueUpdate (stateId) and
// team(id:) { states } over LinearStates. Order(ticketID) lists what the
// helpdesk committed of a ticket, in order (create, comments, close), on
// every side; Held counts follow-ups under their keys too.
//
// The fake's clock (Now) is the real clock plus whatever Advance added, so
// a client signing on the real clock is accepted until a test advances the
// fake; such a test gives its client the fake's Now as its clock. No fixed
// calendar date is involved.
//
// A second request under a key still being processed (for instance while a
// scripted slow answer is pending) answers 409 on both sides.
//
// Failures are scripted with Script: a Rule matches the n-th request of a
// kind, or the requests under one key, and applies a Fault (commit first or
// not, then drop the connection, answer a status with Retry-After, answer
// late, or hold a create and commit it after the client gave up:
// LateCommit, timed on the real clock from the request's arrival, as the
// client's own timeout is). SetRevoked makes every request answer 401, as a
// revoked token or a changed secret would. Lookups can be made to lag
// behind writes with SetLookupLag. The server counts tickets per key and in
// total, requests per kind and connections, and records every request it
// received. All methods are safe for concurrent use.
package fakehelpdesk
