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
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
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
	// Metrics, when set, is told of each request once, where its line is
	// logged; the attribute it returns goes into that line (the Lambda's
	// Embedded Metric Format rides on it).
	Metrics metrics.Recorder
}

// ServeHTTP routes, recovers from panics with a 500, and logs one line.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var out core.Outcome
	var row response
	defer func() {
		if p := recover(); p != nil {
			out = core.Outcome{Kind: core.KindInternal, Function: out.Function, TenantID: out.TenantID,
				Key: out.Key, Err: panicError{p}}
			row = write(w, out)
		}
		h.log(r.Context(), r, out, row, time.Since(start))
	}()
	switch r.URL.Path {
	case "/callback":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			out = core.Outcome{Kind: core.KindMethodNotAllowed}
			break
		}
		out = h.callback(r)
	case "/functions":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			out = core.Outcome{Kind: core.KindMethodNotAllowed}
			break
		}
		if err := h.Auth.Verify(r.Header.Get(NonceHeader)); err != nil {
			out = core.Outcome{Kind: core.KindUnauthenticated, Err: err}
			break
		}
		row = writeCatalogue(w, h.callbackURL(r))
		return
	default:
		out = core.Outcome{Kind: core.KindNotFound}
	}
	row = write(w, out)
}

// callback runs SPEC section 3 in order.
func (h *Handler) callback(r *http.Request) core.Outcome {
	// Step 1: size (after base64 decoding), and bodies that do not decode.
	body, out, ok := h.readBody(r)
	if !ok {
		return out
	}
	// Step 2: the nonce, before the body is parsed.
	if err := h.Auth.Verify(r.Header.Get(NonceHeader)); err != nil {
		return core.Outcome{Kind: core.KindUnauthenticated, Err: err}
	}
	// Step 3: JSON of the documented shape.
	call, err := ParseCall(body)
	if err != nil {
		return core.Outcome{Kind: core.KindBadRequest, Err: err}
	}
	// Steps 4 to 8.
	return h.Service.Handle(r.Context(), call)
}

func (h *Handler) readBody(r *http.Request) ([]byte, core.Outcome, bool) {
	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	if r.ContentLength > limit {
		return nil, core.Outcome{Kind: core.KindTooLarge}, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case err != nil:
		if corrupt := base64.CorruptInputError(0); errors.As(err, &corrupt) {
			return nil, core.Outcome{Kind: core.KindBadRequest, Err: errors.New("base64 body does not decode")}, false
		}
		return nil, core.Outcome{Kind: core.KindBadRequest, Err: err}, false
	case int64(len(body)) > limit:
		return nil, core.Outcome{Kind: core.KindTooLarge}, false
	}
	return body, core.Outcome{}, true
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

// log writes the one line of SPEC section 8: never the arguments, the
// nonce, the hook key or the body.
func (h *Handler) log(ctx context.Context, r *http.Request, o core.Outcome, row response, d time.Duration) {
	// The response is already written and any commit done: a failing log
	// handler must not turn that into a crash.
	defer func() { _ = recover() }()
	l := h.Logger
	if l == nil {
		l = slog.Default()
	}
	level := slog.LevelInfo
	if row.status >= 500 {
		level = slog.LevelError
	}
	var buf [10]slog.Attr // on the stack: LogAttrs copies the attributes
	attrs := append(buf[:0],
		slog.String("path", r.URL.Path),
		slog.String("function", o.Function),
		slog.String("tenant", o.TenantID),
		slog.String("outcome", row.name),
		slog.Int("http_status", row.status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
	)
	if o.Key != "" {
		attrs = append(attrs, slog.String("operation_key", o.Key))
	} else {
		attrs = append(attrs, slog.Bool("operation_key", false))
	}
	if o.Code != "" {
		attrs = append(attrs, slog.String("code", o.Code))
	}
	if o.Err != nil && row.status >= 500 {
		attrs = append(attrs, slog.String("error", o.Err.Error()))
	}
	if h.Metrics != nil {
		// The same function, outcome and code as the line: EMF names these
		// members as its dimensions.
		attrs = append(attrs, h.Metrics.Callback(ctx, metrics.Callback{
			Function: o.Function, Outcome: row.name, Code: o.Code, Duration: d}))
	}
	l.LogAttrs(ctx, level, "callback", attrs...)
}
