// Package httpsend is the HTTP client the helpdesk adapters share: one call,
// one request, a timeout on every call, and a classification of every
// failure into what is known of the outcome (delivery.Outcome).
//
// The client never resends on its own. Go's net/http transport replays a
// request on a new connection when a reused keep-alive connection closes
// without an answer, if it judges the request replayable; a request carrying
// an Idempotency-Key header is judged replayable whenever its body can be
// rewound (GetBody set, as http.NewRequest does for a bytes.Reader). Three
// independent guards rule that out:
//
//   - keep-alives are off: every call dials its own connection, and the
//     transport never retries a request that failed on a fresh connection
//     (the first test of its shouldRetryRequest);
//   - the transport speaks HTTP/1.1 only, so HTTP/2's own retry of a request
//     on a connection that went away does not apply;
//   - the request body has no GetBody, so it cannot be rewound for a replay,
//     and redirects are never followed (a 307 or 308 would resend the body).
//
// The price is a connection (and a TLS handshake) per call, which a
// delivery worker sending one ticket at a time can afford.
//
// Classification (Do and Classify):
//
//   - the request was never wholly written (dial or DNS error, TLS handshake,
//     a timeout before the last byte left): NotCreated. A server cannot act
//     on a request body it has not received.
//   - a timeout, or the connection lost, after the request was written:
//     Unknown.
//   - 2xx: success (no error).
//   - 3xx: Unknown. Redirects are not followed, and a 303 after a POST
//     usually means "created, see there".
//   - 408 Request Timeout: NotCreated. The server gave up waiting for the
//     request, so it did not act on it.
//   - 409 Conflict: Unknown (the same key is being processed).
//   - 429 Too Many Requests: NotCreated, with Retry-After.
//   - 401 Unauthorized, 403 Forbidden, and 404 Not Found on the create URL:
//     Misconfigured. Our credentials or the URL are wrong, not the ticket.
//   - other 4xx (400 and 422 among them): Refused.
//   - 5xx (503 included): Unknown, since a 5xx may come after a commit.
//
// Retry-After (seconds or an HTTP-date) is reported on every answer that
// carries it. Error texts name the method and the URL as urls.Redacted
// shows it (scheme and host; never a path segment, the query or user
// info), never a header, so credentials stay out of errors and logs,
// including a secret a webhook URL carries in its path. A helpdesk that
// echoes a credential in its answer is answered by value: the request's
// credential headers (HeaderCredentials) and Options.Secrets are scrubbed
// from every error text the client returns and from StatusError's quote
// of an answer.
package httpsend
