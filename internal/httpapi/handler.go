package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// DefaultMaxBody is the default body limit (SPEC section 3 step 1).
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
}

// ServeHTTP routes, recovers from panics with a 500, and logs one line.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var rep reply
	defer func() {
		if p := recover(); p != nil {
			rep = write(w, refuse(internalError, panicError{p}))
		}
		h.log(r.Context(), r, rep, time.Since(start))
	}()
	switch r.URL.Path {
	case "/callback":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			rep = refuse(methodNotAllowed, nil)
			break
		}
		rep = h.callback(r)
	case "/functions":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			rep = refuse(methodNotAllowed, nil)
			break
		}
		if err := h.Auth.Verify(r.Header.Get(NonceHeader)); err != nil {
			rep = refuse(unauthenticated, err)
			break
		}
		rep = catalogue(h.callbackURL(r))
	default:
		rep = refuse(notFound, nil)
	}
	rep = write(w, rep)
}

// callback runs the checks in order: size, nonce, shape, then the service.
func (h *Handler) callback(r *http.Request) reply {
	// Step 1: size (after base64 decoding), and bodies that do not decode.
	body, refused, ok := h.readBody(r)
	if !ok {
		return refused
	}
	// Step 2: the nonce, before the body is parsed.
	if err := h.Auth.Verify(r.Header.Get(NonceHeader)); err != nil {
		return refuse(unauthenticated, err)
	}
	// Step 3: JSON of the documented shape.
	call, err := ParseCall(body)
	if err != nil {
		return refuse(badRequest, err)
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
		return nil, refuse(tooLarge, nil), false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case err != nil:
		if corrupt := base64.CorruptInputError(0); errors.As(err, &corrupt) {
			return nil, refuse(badRequest, errors.New("base64 body does not decode")), false
		}
		return nil, refuse(badRequest, err), false
	case int64(len(body)) > limit:
		return nil, refuse(tooLarge, nil), false
	}
	return body, reply{}, true
}

// wireCall is the body of SPEC section 2. Unknown fields are ignored;
// every context field may be missing or null.
type wireCall struct {
	Type     *string `json:"type"`
	Function *struct {
		Name    *string         `json:"name"`
		Content json.RawMessage `json:"content"`
	} `json:"function"`
	Context *struct {
		ExternalUserID *string `json:"externalUserId"`
		Metadata       *struct {
			RequestID json.RawMessage `json:"request_id"`
		} `json:"metadata"`
	} `json:"context"`
}

// ErrShape is returned by ParseCall for a body that is not the documented
// shape.
var ErrShape = errors.New("body is not a tool_call")

// ParseCall reads the body of a callback. It fails for a body that is not
// JSON or not the shape of SPEC section 2: no function object, no string
// function.name, function.content not an object, a type other than
// "tool_call", or a context field of the wrong JSON type.
func ParseCall(body []byte) (core.Call, error) {
	var w wireCall
	if err := json.Unmarshal(body, &w); err != nil {
		return core.Call{}, ErrShape
	}
	if w.Type != nil && *w.Type != "tool_call" {
		return core.Call{}, ErrShape
	}
	if w.Function == nil || w.Function.Name == nil || !isObject(w.Function.Content) {
		return core.Call{}, ErrShape
	}
	c := core.Call{Function: *w.Function.Name, Content: w.Function.Content}
	if w.Context != nil {
		if w.Context.ExternalUserID != nil {
			c.ExternalUserID = *w.Context.ExternalUserID
		}
		if md := w.Context.Metadata; md != nil && len(md.RequestID) > 0 && string(md.RequestID) != "null" {
			if err := json.Unmarshal(md.RequestID, &c.RequestID); err != nil {
				c.RequestIDNotString = true
			}
		}
	}
	return c, nil
}

func isObject(raw json.RawMessage) bool {
	s := bytes.TrimLeft(raw, " \t\r\n")
	return len(s) > 0 && s[0] == '{'
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
	if rep.status >= 500 {
		level = slog.LevelError
	}
	o := rep.out
	attrs := []slog.Attr{
		slog.String("path", r.URL.Path),
		slog.String("function", o.Function),
		slog.String("tenant", o.TenantID),
		slog.String("outcome", rep.name),
		slog.Int("http_status", rep.status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
	}
	if o.Key != "" {
		attrs = append(attrs, slog.String("operation_key", o.Key))
	}
	if o.Code != "" {
		attrs = append(attrs, slog.String("code", o.Code))
	}
	if rep.err != nil && rep.status >= 500 {
		attrs = append(attrs, slog.Any("error", rep.err))
	}
	l.LogAttrs(ctx, level, "callback", attrs...)
}
