package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json/jsontext"
	"encoding/json/v2"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// DefaultMaxBody is the default body limit (docs/contract.md, Order of
// checks, step 1).
const DefaultMaxBody = 64 << 10

// NonceHeader carries AIVAX's BCrypt nonce.
const NonceHeader = "X-Request-Nonce"

// Authenticator checks a nonce header. *nonce.Verifier, nonce.Refuse and
// nonce.Off implement it.
type Authenticator interface {
	Verify(header string) error
}

// Handler serves POST /callback and GET /functions.
type Handler struct {
	Service *core.Service
	Auth    Authenticator
	// MaxBody bounds the (decoded) body; DefaultMaxBody when zero.
	MaxBody int64
	// Logger receives one line per request; slog.Default() when nil.
	Logger *slog.Logger
	// PublicURL is the base URL AIVAX reaches this function at; when empty
	// the catalogue derives it from the request.
	PublicURL string
	// Metrics, when set, is told of each request once, where its line is
	// logged; the attribute it returns goes into that line (the Lambda's
	// Embedded Metric Format rides on it). The store calls it counts are
	// those of a core.TimedStore under Service, collected per request
	// by Collect around the handler.
	Metrics metrics.Recorder
}

// ServeHTTP routes, recovers from panics with a 500, and logs one line.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var rep reply
	defer func() {
		if p := recover(); p != nil {
			rep = write(w, refuse(ResponseInternal, panicError{p}))
		}
		h.log(r.Context(), r, rep, time.Since(start))
	}()
	switch r.URL.Path {
	case "/callback":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			rep = refuse(ResponseMethodNotAllowed, nil)
			break
		}
		rep = h.callback(r)
	case "/functions":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			rep = refuse(ResponseMethodNotAllowed, nil)
			break
		}
		if err := h.Auth.Verify(r.Header.Get(NonceHeader)); err != nil {
			rep = refuse(ResponseUnauthenticated, err)
			break
		}
		rep = catalogue(h.Service, h.callbackURL(r))
	default:
		rep = refuse(ResponseNotFound, nil)
	}
	rep = write(w, rep)
}

// callback runs the checks in order: size, nonce, shape, then the service
// (the steps of docs/contract.md, Order of checks).
func (h *Handler) callback(r *http.Request) reply {
	// Step 1: size (after base64 decoding), and bodies that do not decode.
	body, refused, ok := h.readBody(r)
	if !ok {
		return refused
	}
	// Step 2: the nonce, before the body is parsed.
	if err := h.Auth.Verify(r.Header.Get(NonceHeader)); err != nil {
		return refuse(ResponseUnauthenticated, err)
	}
	// Step 3: JSON of the documented shape.
	call, err := ParseCall(body)
	if err != nil {
		return refuse(ResponseBadRequest, err)
	}
	// Steps 4 to 8.
	return answer(h.Service.Answer(r.Context(), call))
}

func (h *Handler) readBody(r *http.Request) ([]byte, reply, bool) {
	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	if r.ContentLength > limit {
		return nil, refuse(ResponseTooLarge, nil), false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case err != nil:
		if corrupt := base64.CorruptInputError(0); errors.As(err, &corrupt) {
			return nil, refuse(ResponseBadRequest, errors.New("base64 body does not decode")), false
		}
		return nil, refuse(ResponseBadRequest, err), false
	case int64(len(body)) > limit:
		return nil, refuse(ResponseTooLarge, nil), false
	}
	return body, reply{}, true
}

// wireCall is the body of a callback. Member names match exactly, as
// JavaScript's JSON.parse matches them: "EXTERNALUSERID" or "Request_ID" is
// an unknown field, never an alias. Unknown fields are ignored; every
// context field may be missing or null. The strings that make identity
// and keys (externalUserId, request_id) are decoded strictly (exactText),
// and the arguments are kept raw for validation and canonicalization.
type wireCall struct {
	Type     *string                  `json:"type"`
	Function lastObject[wireFunction] `json:"function"`
	Context  lastObject[wireContext]  `json:"context"`
}

type wireFunction struct {
	Name    *string        `json:"name"`
	Content jsontext.Value `json:"content"`
}

type wireContext struct {
	ExternalUserID exactText                `json:"externalUserId"`
	Metadata       lastObject[wireMetadata] `json:"metadata"`
}

type wireMetadata struct {
	RequestID exactText `json:"request_id"`
}

// lastObject is an optional object member whose last occurrence wins
// whole, as in JavaScript: a repeated "context" replaces the first one
// instead of being merged into it. p is nil when the member is missing or
// null.
type lastObject[T any] struct{ p *T }

// UnmarshalJSONFrom implements json.UnmarshalerFrom.
func (o *lastObject[T]) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		o.p = nil
		return err
	}
	o.p = new(T)
	return json.UnmarshalDecode(dec, o.p)
}

// exactText is a member that should be a string, decoded strictly straight
// from the decoder's buffer: invalid UTF-8 and lone surrogate escapes
// ("\ud800"), which a lenient decoder silently turns into U+FFFD, mark it
// malformed, so that two different texts never become one. A missing or
// null member leaves it zero.
type exactText struct {
	s         string
	malformed bool // a string with invalid UTF-8 or a lone surrogate escape
	notString bool // a number, object, array or boolean
}

// UnmarshalJSONFrom implements json.UnmarshalerFrom.
func (t *exactText) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	*t = exactText{}
	switch raw.Kind() {
	case 'n':
		return nil
	case '"':
	default:
		t.notString = true
		return nil
	}
	// The common case, a string without escapes: its text is the value.
	// (The envelope decoder has already refused control characters.)
	if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		t.s = string(body)
		return nil
	}
	if err := json.Unmarshal(raw, &t.s); err != nil {
		_ = json.Unmarshal(raw, &t.s, jsontext.AllowInvalidUTF8(true))
		t.malformed = true
	}
	return nil
}

// ErrShape is returned by ParseCall for a body that is not the documented
// shape.
var ErrShape = errors.New("body is not a tool_call")

// envelopeOptions decode the envelope: names matched exactly (the v2
// default), duplicate names left to the canonicalization of the arguments
// (which refuses them there, with a message for the model), and invalid
// UTF-8 tolerated in fields that are ignored. The raw values of the fields
// that make identity and keys keep their bytes and are checked strictly.
var envelopeOptions = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// ParseCall reads the body of a callback. It fails for a body that is not
// JSON or not the documented shape: no function object, no string
// function.name, no function.content, a type other than "tool_call", or a
// context field of the wrong JSON type. A function.content that is present
// but not an object is passed on: the model can correct it, so the service
// answers it with invalid_arguments.
func ParseCall(body []byte) (core.Call, error) {
	var w wireCall
	if err := json.Unmarshal(body, &w, envelopeOptions); err != nil {
		return core.Call{}, ErrShape
	}
	if w.Type != nil && *w.Type != "tool_call" {
		return core.Call{}, ErrShape
	}
	fn, ctx := w.Function.p, w.Context.p
	if fn == nil || fn.Name == nil || len(fn.Content) == 0 {
		return core.Call{}, ErrShape
	}
	c := core.Call{Function: *fn.Name, Content: []byte(fn.Content)}
	if ctx != nil {
		id := ctx.ExternalUserID
		if id.notString {
			return core.Call{}, ErrShape
		}
		c.ExternalUserID, c.ExternalUserIDMalformed = id.s, id.malformed
		if md := ctx.Metadata.p; md != nil {
			rid := md.RequestID
			c.RequestID, c.RequestIDMalformed, c.RequestIDNotString = rid.s, rid.malformed, rid.notString
		}
	}
	return c, nil
}

func (h *Handler) callbackURL(r *http.Request) string {
	if h.PublicURL != "" {
		return strings.TrimRight(h.PublicURL, "/") + "/callback"
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host + "/callback"
}

// The doors a call comes through, as log lines and metrics name them:
// AIVAX's callback, and the MCP door (internal/mcpdoor).
const (
	DoorAIVAX = "aivax"
	DoorMCP   = "mcp"
)

// MaxLoggedLen bounds, in bytes, what the log line carries of a value the
// caller chose (the path, the function name): a caller must not be able to
// write megabytes into the logs per request.
const MaxLoggedLen = 64

// clipLogged cuts s to at most MaxLoggedLen bytes on a character boundary,
// marking the cut with "…".
func clipLogged(s string) string {
	if len(s) <= MaxLoggedLen {
		return s
	}
	cut := MaxLoggedLen - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

type panicError struct{ v any }

func (p panicError) Error() string { return "panic while serving a request" }

// log writes the one line of a request: never the arguments, the nonce,
// the hook key or the body. The operation key is there once derived, and
// absent otherwise.
func (h *Handler) log(ctx context.Context, r *http.Request, rep reply, d time.Duration) {
	// The response is already written and any commit done: a failing log
	// handler must not turn that into a crash.
	defer func() { _ = recover() }()
	l := h.Logger
	if l == nil {
		l = slog.Default()
	}
	level := slog.LevelInfo
	if rep.Status >= 500 {
		level = slog.LevelError
	}
	o := rep.out
	tracing.SetOutcome(trace.SpanFromContext(ctx), SpanOutcome(DoorAIVAX, o, rep.Name))
	attrs := AppendCallbackAttrs(make([]slog.Attr, 0, LineAttrs), clipLogged(r.URL.Path), DoorAIVAX, o, rep.Name, rep.Status, d)
	if rep.err != nil && rep.Status >= 500 {
		attrs = append(attrs, slog.Any("error", rep.err))
	}
	if h.Metrics != nil {
		// The same function, outcome and code as the line: EMF names these
		// members as its dimensions.
		attrs = append(attrs, h.Metrics.Callback(ctx, metrics.Callback{
			Door: DoorAIVAX, Function: o.Function, Outcome: rep.Name, Code: o.Code, Duration: d}))
	}
	l.LogAttrs(ctx, level, "callback", attrs...)
}

// Collect wraps next so that each request's context collects the store
// calls made for it (metrics.WithRequest), for the line that reports the
// request.
func Collect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, _ := metrics.WithRequest(r.Context())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
