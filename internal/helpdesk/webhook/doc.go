// Package webhook is the delivery destination for a team's own endpoint: it
// POSTs each ticket as JSON to the configured URL with the ticket id as the
// Idempotency-Key header, signed by the Standard Webhooks convention
// (webhook-id: the ticket id, webhook-timestamp: the unix second of this
// send, webhook-signature: "v1," and the base64 HMAC-SHA256 of
// "{id}.{timestamp}.{body}" under the decoded whsec_ secret), and, when the
// endpoint offers it, looks tickets up with a GET carrying idempotency_key
// and the same three headers, signed over "idempotency_key=<id>".
//
// The body is built from the ticket alone, fields in a fixed order and
// created_at as RFC 3339 UTC seconds, so every resend of a ticket carries
// the same bytes; each send is signed afresh with its own timestamp, so a
// receiver that rejects stale timestamps and replays accepts a resend.
//
// Answers to a send: any 2xx is delivered; when its body is a JSON object,
// "id" (string or number) becomes the external id, defaulting to the
// ticket id, and "url" the external URL. 409 means the key is being
// processed (Unknown); 401, 403 and 404 mean the secret or the URL is wrong
// (Misconfigured); 400 and 422 are permanent refusals; everything else is
// classified by httpsend. Answers to a lookup: 200 with a JSON object is
// found, 404 absent, and anything else (an empty 2xx, a JSON array, text,
// another status) a *delivery.SendError: Misconfigured for 401 and 403,
// Unknown otherwise, with the status, Retry-After and a clipped body.
//
// Follow-ups (delivery.EffectSender): every effect, whatever its kind, is
// its own signed POST to the same URL, its delivery key (the comment_id,
// the close_id) as webhook-id and Idempotency-Key and its payload as the
// body, byte for byte, so the receiver tells a ticket ("type":
// "ticket.created"), a comment ("comment.created") and a close
// ("ticket.closed") apart by the body's "type". Answers are classified as
// a ticket's, and a lookup asks for the delivery key as a ticket's does.
package webhook
