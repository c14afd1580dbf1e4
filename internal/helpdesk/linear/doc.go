// Package linear is the delivery destination for Linear: it creates an
// issue with the GraphQL mutation issueCreate at POST {url}/graphql and
// looks it up with the query issue(id:).
//
// Exactly once by construction. Linear's published schema (the SDK's
// packages/sdk/src/schema.graphql, IssueCreateInput.id) documents the
// create's id as "The identifier in UUID v4 format. If none is provided,
// the backend will generate one." The ticket id is such a UUID, so the
// issue is created with id = ticket id and Linear can hold at most one
// issue per ticket whatever is resent; Query.issue is "One specific
// issue, looked up by its unique identifier", so the lookup reads the
// issue by its primary key, with no index to lag. The Client says so to
// the engine (CreatesKeyedByID): after a send whose outcome is unknown the
// engine looks the issue up, and on absent resends at once with the same
// id, with no outcome window.
//
// Authentication, as the SDK's LinearClient sends it (packages/sdk/src/
// client.ts: "Use bearer if oauth token exists, otherwise use the provided
// apiKey"): a personal API key (lin_api_...) is the Authorization header's
// whole value, with no "Bearer"; an OAuth access token goes as "Bearer
// <token>", left as it is when it already starts with "Bearer ". A key
// configured with "Bearer " in front, or starting with lin_oauth_ (the
// prefix of Linear's OAuth tokens), is taken for an OAuth token.
//
// Errors. Linear answers GraphQL errors in a 200 as well as with a 4xx;
// the SDK (packages/sdk/src/error.ts) reads each error's extensions.type
// ("authentication error", "forbidden", "ratelimited", "invalid input",
// ...) and falls back on the HTTP status (403 forbidden, 429 rate
// limited, other 4xx authentication, 5xx internal or network); Linear's
// docs name the same errors by code (AUTHENTICATION_ERROR, FORBIDDEN,
// RATELIMITED, INVALID_INPUT). Both spellings are read: upper-cased, with
// spaces as underscores, they are the same names. A create's answer is:
//
//   - AUTHENTICATION_ERROR or 401, FORBIDDEN or 403, 404 (the URL is not
//     Linear's GraphQL endpoint), USAGE_LIMIT_EXCEEDED (the workspace's
//     plan takes no more issues): Misconfigured, about the destination,
//     not the ticket.
//   - RATELIMITED or 429: NotCreated (the rate limiter refuses before the
//     mutation runs), due no earlier than the latest reset the
//     X-RateLimit-{Requests,Complexity,Endpoint-Requests}-Reset headers
//     give for a budget that is spent (the SDK's RatelimitedLinearError
//     reads them as Unix timestamps; values above 10^11 are read as
//     milliseconds, others as seconds), or Retry-After.
//   - a refusal of the input (INVALID_INPUT, USER_ERROR, GRAPHQL_ERROR,
//     FEATURE_NOT_ACCESSIBLE, or a 400 or 422 without a code we know): the
//     id may already exist, and what Linear answers for a duplicate id is
//     not published, so the Client looks the id up before it calls the
//     create refused: found is delivered, absent is Refused (a wrong
//     teamId, say), a failed lookup is Unknown.
//   - an error that says the entity exists (a conflict, duplicate or
//     unique-constraint message, whatever its code): looked up the same
//     way, found is delivered, anything else Unknown.
//   - 5xx, INTERNAL_ERROR, LOCK_TIMEOUT, any other code, success false,
//     or an answer that cannot be read: Unknown, so looked up before the
//     resend; a resend is safe, since it carries the same id.
//   - a success that returns an issue, ours or the one the id already
//     names: delivered.
//
// A lookup's answer is found (data.issue), absent (an error saying the
// entity was not found: the SDK's end-to-end test expects "Entity not
// found - Could not find referenced Issue" of type invalid input), or a
// *delivery.SendError: Misconfigured for AUTHENTICATION_ERROR, FORBIDDEN,
// 401 and 403; Unknown otherwise, with the rate limit's reset as above.
//
// external_id is the issue's identifier (ENG-123, "Issue's human readable
// identifier" in the schema), external_url its url. Priority maps to
// Linear's numbering ("0 = No priority, 1 = Urgent, 2 = High, 3 = Medium,
// 4 = Low", IssueCreateInput.priority): urgent 1, high 2, normal 3, low 4,
// anything else 0.
//
// Follow-ups (delivery.EffectSender). A comment is commentCreate(input:
// {id: comment_id, issueId: ticket_id, body}) (CommentCreateInput.id is
// the same client-chosen UUID v4 as the issue's), classified as issueCreate
// is, a duplicate id looked up with comment(id:) and delivered when found;
// its receipt is the comment's id and url. A close reads the team's
// workflow states once per Client (team(id:) { states }) and takes the
// first of type completed by position; it creates the resolution, when
// there is one, as a comment whose id is the close_id, then sends
// issueUpdate(id: ticket_id, input: {stateId}); its receipt is the
// issue's. Both steps can be repeated with no effect, so closes are keyed
// by construction too. A close's lookup reads the state (found
// when its type is completed) and, with a resolution, the comment under
// the close_id. Any other kind is refused.
//
// HTTP behaviour (one request per call, no replays, a timeout on every
// call) is httpsend's. Credentials are never part of an error text or of
// the Client's printed or logged form.
package linear
