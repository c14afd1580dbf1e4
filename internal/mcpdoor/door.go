// Package mcpdoor is the MCP door (docs/contract.md, The MCP door): POST
// /mcp, MCP Streamable HTTP in stateless mode with one JSON answer per POST,
// built on the official Go SDK (github.com/modelcontextprotocol/go-sdk),
// whose tools are the catalogue's functions and whose calls go through the
// same core.Service as the callback, so an operation reached through both
// doors has one key and makes one ticket.
//
// The door is an OAuth 2.1 resource server: every /mcp request carries a
// JWT access token checked by internal/jwtauth inside the SDK's
// auth.RequireBearerToken, whose user claim names a user of the same user
// records as AIVAX's externalUserId. Its Protected Resource Metadata (RFC
// 9728) is served at the two well-known paths.
//
// Order of checks for /mcp: method (405 for anything but POST), size (413)
// and base64 (400), before the token; then the token (401), its scopes and
// user (403); then MCP-Protocol-Version, one rule for every method (400
// for a revision not served); then the SDK. Nothing is read or written for a request that
// fails before the SDK.
package mcpdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/json/jsontext"
	jsonv2 "encoding/json/v2"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// RequestIDMeta is the member of tools/call's params._meta that carries
// the request_id the application minted for the operation.
const RequestIDMeta = "io.github.aivax-examples/request_id"

// RequestIDPlace is where an MCP caller puts the request_id, as the
// request_id rejections name it.
const RequestIDPlace = `params._meta["` + RequestIDMeta + `"]`

// Revisions are the MCP revisions the door serves, newest first: the ones
// its tests drive with the Go and TypeScript SDKs' clients. initialize
// offering another is answered with 2025-11-25 (the lifecycle's version
// negotiation), and a request whose MCP-Protocol-Version names another is
// refused with 400.
var Revisions = []string{"2026-07-28", "2025-11-25"}

// modernRevision is the first revision without initialize, whose
// protocol errors carry their own HTTP status.
const modernRevision = "2026-07-28"

// methodListen opens a stream of change notifications (2026-07-28). The
// door has none to send and holds no request open: it answers at once
// that it does not implement the method.
const methodListen = "subscriptions/listen"

// The paths the door serves.
const (
	Path             = "/mcp"
	MetadataPath     = "/.well-known/oauth-protected-resource"
	MetadataPathMCP  = MetadataPath + Path
	serverName       = "idempotent-callback"
	defaultCallLimit = 25 * time.Second
)

// Config is what the door is built from.
type Config struct {
	Service  *core.Service // the callback's service
	Users    core.Users    // the service's user records
	Verifier TokenVerifier
	Issuer   string
	Audience string   // the public URL of /mcp
	Scopes   []string // each required in the token's scope claim
	MaxBody  int64    // httpapi.DefaultMaxBody when zero
	Logger   *slog.Logger
	Metrics  metrics.Recorder // nil: no metrics
	// CallLimit bounds a tool call that runs on after its client went
	// away, when the request carries no deadline of its own; 25 s when
	// zero.
	CallLimit time.Duration
	// Version is the server's version in the MCP handshake.
	Version string
}

// TokenVerifier checks an access token: *jwtauth.Verifier. An error
// wrapping jwtauth.ErrInvalid refuses the request with 401; another error
// (no key can be had) with 500.
type TokenVerifier interface {
	Verify(ctx context.Context, raw string) (jwtauth.Token, error)
}

// Door serves /mcp and the metadata paths.
type Door struct {
	cfg      Config
	mcp      http.Handler // the bearer check around the SDK's handler
	metadata http.Handler
	// resourceMetadata is the metadata's URL, the WWW-Authenticate
	// parameter of a 401.
	resourceMetadata string
}

// New builds the door: one SDK server with the catalogue's tools, and its
// stateless handler behind the bearer check.
func New(cfg Config) (*Door, error) {
	if cfg.Service == nil || cfg.Users == nil || cfg.Verifier == nil {
		return nil, errors.New("mcpdoor: Service, Users and Verifier are required")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = httpapi.DefaultMaxBody
	}
	if cfg.CallLimit <= 0 {
		cfg.CallLimit = defaultCallLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	aud, err := url.Parse(cfg.Audience)
	if err != nil || aud.Host == "" {
		return nil, fmt.Errorf("mcpdoor: audience %q is not an absolute URL", cfg.Audience)
	}
	d := &Door{cfg: cfg}
	// RFC 9728 section 3.1: the well-known path goes between the host and
	// the resource's path.
	d.resourceMetadata = aud.Scheme + "://" + aud.Host + MetadataPath + strings.TrimRight(aud.EscapedPath(), "/")

	server := mcp.NewServer(&mcp.Implementation{Name: serverName, Version: cfg.Version}, &mcp.ServerOptions{
		Logger: discard,
		// Tools, without listChanged: the door is stateless and has no
		// notification to send, so a client has no reason to open
		// subscriptions/listen. No logging either: the door sends no log
		// messages.
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		SupportedProtocolVersions: Revisions,
	})
	for _, fn := range cfg.Service.Functions() {
		f, _ := cfg.Service.Lookup(fn.Name)
		server.AddTool(Tool(f), d.toolHandler(f))
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              discard,
		MaxRequestBodyBytes: cfg.MaxBody,
	})
	bearer := auth.RequireBearerToken(d.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: d.resourceMetadata,
		Scopes:              cfg.Scopes,
		// The verifier checks exp itself, with the 60 s skew and the
		// injected clock; the middleware's own check would read the real
		// clock.
		AllowMissingExpiration: true,
	})
	d.mcp = bearer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		aw := w.(*authWriter)
		aw.passed = true
		d.afterToken(aw, r, sdk)
	}))
	meta := &oauthex.ProtectedResourceMetadata{
		Resource:               cfg.Audience,
		AuthorizationServers:   []string{cfg.Issuer},
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        cfg.Scopes,
	}
	d.metadata = auth.ProtectedResourceMetadataHandler(meta)
	return d, nil
}

var discard = slog.New(slog.DiscardHandler)

// Tool is the MCP tool of a catalogue function: its name, description and
// input schema (the catalogue's), its output schema and its hints.
func Tool(f *core.Function) *mcp.Tool {
	h := f.Hints()
	ann := &mcp.ToolAnnotations{ReadOnlyHint: h.ReadOnly, IdempotentHint: h.Idempotent}
	if !h.ReadOnly {
		ann.DestructiveHint = &h.Destructive
	}
	return &mcp.Tool{
		Name:         f.Name,
		Description:  f.Description,
		InputSchema:  f.Schema(),
		OutputSchema: f.OutputSchema(),
		Annotations:  ann,
	}
}

// Handles reports whether path is one of the door's.
func Handles(path string) bool {
	return path == Path || path == MetadataPath || path == MetadataPathMCP
}

// ServeHTTP serves the door's paths; any other path is 404.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case MetadataPath, MetadataPathMCP:
		d.metadata.ServeHTTP(w, r)
	case Path:
		d.serveMCP(w, r)
	default:
		httpapi.WriteRefusal(w, httpapi.ResponseNotFound)
	}
}

// call is one /mcp request as far as it got, for its log line and
// metrics. The tool handler fills it in.
type call struct {
	start   time.Time
	ctx     context.Context // the HTTP request's, for the log line's values
	body    []byte          // the request's body, read before the token
	user    string          // the token's user, once verified
	record  core.User       // user's record, once read
	rpc     rpcRequest
	timeout time.Time

	mu sync.Mutex
	// ran: a tool handler took the call, and its outcome goes in the line.
	ran bool
	// answered: the tool handler's outcome, once it has one and serveMCP
	// has not finished; serveMCP logs it with the status it wrote.
	answered *toolAnswer
	// finished: serveMCP returned, and status is what the client was
	// sent; a tool handler still running then logs its line itself.
	finished bool
	status   int
}

// toolAnswer is a tool handler's outcome, for its log line.
type toolAnswer struct {
	o    core.Outcome
	resp httpapi.Response
}

// rpcRequest is what the door reads of the JSON-RPC body itself: the
// method and tool name for the log line, the request_id member of
// params._meta, decoded with the callback's strict decoding of
// metadata.request_id (the SDK's decoder would turn a lone surrogate into
// U+FFFD, giving two request_ids one key), and the W3C trace context of
// params._meta (traceparent and tracestate: strings, "" when absent or
// not a string), the tool call span's parent. Everything else is the SDK's.
type rpcRequest struct {
	Method      string
	Tool        string
	RequestID   jsontext.Value // absent: nil
	Traceparent string
	Tracestate  string
}

type wireRPC struct {
	Method jsontext.Value `json:"method"`
	Params jsontext.Value `json:"params"`
}

type wireParams struct {
	Name jsontext.Value            `json:"name"`
	Meta map[string]jsontext.Value `json:"_meta"`
}

var rpcOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// parseRPC reads body's method, tool name and request_id. ok is false for
// a batch (a JSON array): the protocol revisions served have none, and a
// batch would carry several request_ids. A body the SDK will refuse
// anyway parses to the zero rpcRequest.
func parseRPC(body []byte) (rpcRequest, bool) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return rpcRequest{}, false
	}
	var w wireRPC
	if jsonv2.Unmarshal(body, &w, rpcOptions) != nil {
		return rpcRequest{}, true
	}
	var rr rpcRequest
	_ = jsonv2.Unmarshal(w.Method, &rr.Method)
	if w.Params.Kind() == '{' {
		var p wireParams
		if jsonv2.Unmarshal(w.Params, &p, rpcOptions) == nil {
			_ = jsonv2.Unmarshal(p.Name, &rr.Tool)
			if v, ok := p.Meta[RequestIDMeta]; ok {
				rr.RequestID = v
			}
			if v, ok := p.Meta[tracing.MetaTraceparent]; ok {
				_ = jsonv2.Unmarshal(v, &rr.Traceparent)
			}
			if v, ok := p.Meta[tracing.MetaTracestate]; ok {
				_ = jsonv2.Unmarshal(v, &rr.Tracestate)
			}
		}
	}
	return rr, true
}

func (d *Door) serveMCP(w http.ResponseWriter, r *http.Request) {
	c := &call{start: time.Now(), ctx: r.Context()}
	if dl, ok := r.Context().Deadline(); ok {
		c.timeout = dl
	}
	var rep httpapi.Response
	defer func() {
		if p := recover(); p != nil {
			rep = httpapi.ResponseInternal
			httpapi.WriteRefusal(w, rep)
		}
		c.mu.Lock()
		ran, answered := c.ran, c.answered
		c.ran = true // a tool handler starting after this point logs nothing twice
		c.finished, c.status = true, rep.Status
		c.mu.Unlock()
		switch {
		case answered != nil:
			d.logTool(c, answered.o, answered.resp, rep.Status)
		case !ran:
			d.logRequest(c, rep)
		}
		// Otherwise a tool handler is still running (its client went
		// away): it logs its line when done.
	}()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		rep = httpapi.ResponseMethodNotAllowed
		httpapi.WriteRefusal(w, rep)
		return
	}
	body, refusal, ok := httpapi.ReadBody(r, d.cfg.MaxBody)
	if !ok {
		rep = refusal
		httpapi.WriteRefusal(w, rep)
		return
	}
	c.body = body
	r.Body = readCloser{bytes.NewReader(body)}
	r.ContentLength = int64(len(body))
	r = r.WithContext(context.WithValue(r.Context(), callKey{}, c))
	aw := &authWriter{ResponseWriter: w}
	d.mcp.ServeHTTP(aw, r)
	aw.flush()
	switch {
	case aw.refused != (httpapi.Response{}):
		rep = aw.refused
	case aw.refusedAfter != (httpapi.Response{}):
		rep = aw.refusedAfter
	default:
		// The SDK's answer, with the status it wrote: 200, 202 for a
		// notification, 400 or 404 for a protocol error of 2026-07-28.
		// net/http sends 200 when nothing was written.
		rep = rpcAnswer
		if aw.status != 0 {
			rep.Status = aw.status
		}
	}
}

// rpcAnswer names, in the log line, a JSON-RPC answer the SDK gave to a
// request no tool handled (initialize, tools/list, server/discover, a
// notification); such lines are not counted in the metrics. Its status is
// the one written.
var rpcAnswer = httpapi.Response{Status: http.StatusOK, Name: "rpc"}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

type callKey struct{}

// verify is the SDK middleware's TokenVerifier: jwtauth's checks. The
// token is never logged or echoed; a failure is 401 (ErrInvalidToken),
// a JWK Set that cannot be had 500.
func (d *Door) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	t, err := d.cfg.Verifier.Verify(ctx, token)
	if err != nil {
		if errors.Is(err, jwtauth.ErrInvalid) {
			return nil, auth.ErrInvalidToken
		}
		if c, ok := ctx.Value(callKey{}).(*call); ok {
			d.cfg.Logger.LogAttrs(c.ctx, slog.LevelError, "mcp token keys unavailable", slog.Any("error", err))
		}
		return nil, errors.New("keys unavailable")
	}
	// No Expiration: the verifier has checked exp with the 60 s skew and
	// its own clock (see AllowMissingExpiration in New).
	return &auth.TokenInfo{UserID: t.User, Scopes: t.Scopes}, nil
}

// afterToken runs once the token and its scopes passed: the user must be
// a known, enabled user (403 otherwise, before the body is parsed), then
// the SDK answers.
func (d *Door) afterToken(aw *authWriter, r *http.Request, sdk http.Handler) {
	c, _ := r.Context().Value(callKey{}).(*call)
	ti := auth.TokenInfoFromContext(r.Context())
	if c == nil || ti == nil {
		aw.refuseAfter(httpapi.ResponseInternal)
		return
	}
	user := ti.UserID
	if core.NamesNoUser(user) {
		aw.refuseAfter(httpapi.Responses[core.KindForbidden])
		return
	}
	u, err := d.cfg.Users.User(r.Context(), user)
	switch {
	case errors.Is(err, core.ErrNotFound), err == nil && u.Disabled:
		aw.refuseAfter(httpapi.Responses[core.KindForbidden])
		return
	case errors.Is(err, core.ErrBusy):
		aw.refuseAfter(busyRefusal)
		return
	case err != nil:
		aw.refuseAfter(httpapi.ResponseInternal)
		return
	}
	c.user, c.record = user, u
	rr, ok := parseRPC(c.body)
	if !ok {
		aw.refuseAfter(httpapi.ResponseBadRequest)
		return
	}
	c.rpc = rr
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(Revisions, v) {
		refuseRevision(aw, v, c.body)
		return
	}
	if rr.Method == methodListen && noListen(aw, r, c.body) {
		return
	}
	ti.Extra = map[string]any{extraCall: c}
	sdk.ServeHTTP(aw, r)
}

// refuseRevision answers a request whose MCP-Protocol-Version the door
// does not serve, whatever its method: 400, before the door or the SDK
// dispatches it, so a method the door answers itself (subscriptions/listen)
// or the SDK would answer on another path (a notification's 202, an unknown
// method's 404) cannot answer otherwise. The body is the one the
// requested revision's client reads: for a request on 2026-07-28 or
// later, JSON-RPC -32022 with the revisions served in its data (the
// client's version negotiation reads it, as the SDK writes it for the
// methods it dispatches); otherwise the door's refusal, whose message
// lists them as the SDK's transport check does.
func refuseRevision(aw *authWriter, version string, body []byte) {
	supported := strings.Join(Revisions, ",")
	if version >= modernRevision {
		msg, err := jsonrpc.DecodeMessage(body)
		if req, ok := msg.(*jsonrpc.Request); err == nil && ok && req.IsCall() {
			data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: Revisions, Requested: version})
			out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{
				Code: mcp.CodeUnsupportedProtocolVersion, Message: "unsupported protocol version", Data: data}})
			if err == nil {
				h := aw.Header()
				h.Set("Content-Type", "application/json")
				h.Set("Cache-Control", "no-store")
				aw.WriteHeader(http.StatusBadRequest)
				_, _ = aw.Write(out)
				return
			}
		}
	}
	aw.refusedAfter = httpapi.ResponseBadRequest
	aw.status = http.StatusBadRequest
	httpapi.WriteRefusalMessage(aw.ResponseWriter, httpapi.ResponseBadRequest,
		"Unsupported protocol version (supported versions: "+supported+")")
}

// noListen answers a subscriptions/listen request at once, as a server
// answers a method it does not implement: JSON-RPC -32601 (Method not
// found), with HTTP 404 on 2026-07-28 (its Streamable HTTP transport
// requires that status for an unimplemented method) and 200 on the
// revisions before it, which carry JSON-RPC errors in a 200 answer and
// have no such method. The SDK would instead hold the request open as an
// event stream until the client leaves; the door has no notification to
// send on it. ok is false, and nothing written, for a body that is not a
// request (a notification by that name goes to the SDK: 202).
func noListen(aw *authWriter, r *http.Request, body []byte) (ok bool) {
	msg, err := jsonrpc.DecodeMessage(body)
	req, isReq := msg.(*jsonrpc.Request)
	if err != nil || !isReq || !req.IsCall() {
		return false
	}
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{
		Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + methodListen + " (this server sends no change notifications)"}})
	if err != nil {
		return false
	}
	status := http.StatusOK
	if r.Header.Get("Mcp-Protocol-Version") >= modernRevision {
		status = http.StatusNotFound
	}
	h := aw.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	aw.WriteHeader(status)
	_, _ = aw.Write(out)
	return true
}

// busyRefusal answers a user lookup the store could not make: the client
// retries.
var busyRefusal = httpapi.Response{Status: http.StatusServiceUnavailable, Name: core.KindBusy.String()}

const extraCall = "aivax-call"

// toolHandler answers tools/call for fn through the service.
func (d *Door) toolHandler(fn *core.Function) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var c *call
		if ti := req.Extra.TokenInfo; ti != nil {
			c, _ = ti.Extra[extraCall].(*call)
		}
		if c == nil {
			// Every request reaches the SDK through afterToken, which
			// sets it: this is a wiring fault, never a caller's.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
		}
		c.mu.Lock()
		logs := !c.ran
		c.ran = true
		c.mu.Unlock()
		// The call's span: a child of the trace context in params._meta
		// when the request carries one, else of the HTTP request's span.
		ctx, span := tracing.ToolCall(ctx, fn.Name, c.rpc.Traceparent, c.rpc.Tracestate)
		defer span.End()

		// The record afterToken read: the service does not read it again.
		call := core.Call{Function: fn.Name, Content: req.Params.Arguments, ExternalUserID: c.user, User: &c.record,
			RequestIDAt: RequestIDPlace}
		if len(call.Content) == 0 || string(call.Content) == "null" {
			call.Content = []byte("{}") // arguments are optional in MCP
		}
		if c.rpc.RequestID != nil {
			if err := httpapi.SetRequestID(&call, c.rpc.RequestID); err != nil {
				call.RequestIDMalformed = true
			}
		}
		// The operation runs to its end whether or not the client waits
		// for it (closing the stream is a cancellation in MCP): the claim
		// and the ticket commit together, and a re-issued call gets the
		// stored result.
		limit := c.timeout
		if limit.IsZero() {
			limit = time.Now().Add(d.cfg.CallLimit)
		}
		opCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), limit)
		defer cancel()
		o := d.cfg.Service.Answer(opCtx, call)
		resp, body := httpapi.Answer(o)
		if span.IsRecording() {
			// The outcome (door, function, tenant, outcome, code,
			// operation key) on the call's span; the HTTP status is the
			// request span's.
			tracing.SetOutcome(span, httpapi.SpanOutcome(httpapi.DoorMCP, o, resp.Name))
			if o.Kind == core.KindInternal {
				span.SetStatus(codes.Error, resp.Name)
			}
		}
		if logs {
			// serveMCP logs the line with the status it writes; if it has
			// already returned (the client went away), the line is this
			// handler's, with the status that was sent.
			c.mu.Lock()
			finished, status := c.finished, c.status
			if !finished {
				c.answered = &toolAnswer{o, resp}
			}
			c.mu.Unlock()
			if finished {
				d.logTool(c, o, resp, status)
			}
		}
		switch o.Kind {
		case core.KindInternal, core.KindForbidden:
			// No stored result to show; the client sees a protocol error
			// without detail.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(body)}},
			StructuredContent: json.RawMessage(body),
			IsError:           !o.Kind.ToolAnswer(),
		}, nil
	}
}

// authWriter stands between the SDK's bearer middleware and the client:
// the middleware's refusals (401, 403, and 500 when no key can be had)
// go out as the door's short JSON bodies, and a 403 for missing scopes
// carries error="insufficient_scope" as RFC 6750 has it. Once the token
// passed, writes go straight through, except the SDK's plain-text
// refusals, which go out as the door's JSON with the SDK's reason as the
// message. It notes the status written.
type authWriter struct {
	http.ResponseWriter
	passed       bool
	refused      httpapi.Response // a refusal of the middleware
	refusedAfter httpapi.Response // a refusal after the token (user, or the SDK's)
	wrote        bool
	swallow      bool             // the SDK's plain-text body is replaced
	pending      httpapi.Response // an SDK refusal waiting for its reason
	status       int              // the status written; 0 before any
}

// maxMessage bounds the reason an SDK refusal carries in its message.
const maxMessage = 200

// sdkRefusal names an SDK refusal by its status.
func sdkRefusal(code int) httpapi.Response {
	switch code {
	case http.StatusRequestEntityTooLarge:
		return httpapi.ResponseTooLarge
	case http.StatusMethodNotAllowed:
		return httpapi.ResponseMethodNotAllowed
	case http.StatusForbidden:
		return httpapi.Response{Status: code, Name: core.KindForbidden.String()}
	}
	if code >= 500 {
		return httpapi.Response{Status: code, Name: httpapi.ResponseInternal.Name}
	}
	return httpapi.Response{Status: code, Name: httpapi.ResponseBadRequest.Name}
}

func (a *authWriter) WriteHeader(code int) {
	if a.passed {
		if code >= 400 && strings.HasPrefix(a.Header().Get("Content-Type"), "text/plain") {
			// The SDK's own refusals (a body that is not JSON-RPC, a
			// wrong Accept or Content-Type, an unsupported revision) are
			// plain text: every answer of the door is JSON. The body the
			// SDK writes next is its reason.
			a.pending = sdkRefusal(code)
			a.swallow = true
			return
		}
		if a.status == 0 {
			a.status = code
		}
		a.ResponseWriter.WriteHeader(code)
		return
	}
	switch code {
	case http.StatusUnauthorized:
		a.refused = httpapi.ResponseUnauthenticated
	case http.StatusForbidden:
		a.refused = httpapi.Responses[core.KindForbidden]
		h := a.Header()
		if v := h.Get("WWW-Authenticate"); v != "" {
			h.Set("WWW-Authenticate", strings.Replace(v, "Bearer ", `Bearer error="insufficient_scope", `, 1))
		}
	case http.StatusBadRequest:
		a.refused = httpapi.ResponseBadRequest
	default:
		a.refused = httpapi.ResponseInternal
	}
	a.Header().Del("X-Content-Type-Options")
	httpapi.WriteRefusal(a.ResponseWriter, a.refused)
	a.status = a.refused.Status
	a.wrote = true
}

func (a *authWriter) Write(b []byte) (int, error) {
	if a.pending != (httpapi.Response{}) {
		a.writePending(string(b))
		return len(b), nil
	}
	if a.swallow {
		return len(b), nil
	}
	if a.passed {
		if a.status == 0 {
			a.status = http.StatusOK
		}
		return a.ResponseWriter.Write(b)
	}
	if !a.wrote {
		a.WriteHeader(http.StatusOK)
	}
	return len(b), nil // the middleware's plain-text body is replaced
}

// writePending sends the SDK refusal waiting in pending, with reason (the
// SDK's text, cut to maxMessage bytes) as its message when not empty.
func (a *authWriter) writePending(reason string) {
	r := a.pending
	a.pending = httpapi.Response{}
	a.refusedAfter = r
	a.status = r.Status
	a.Header().Del("X-Content-Type-Options")
	reason = strings.ToValidUTF8(strings.TrimSpace(reason), "\uFFFD")
	if len(reason) > maxMessage {
		reason = strings.ToValidUTF8(reason[:maxMessage], "") + "…"
	}
	httpapi.WriteRefusalMessage(a.ResponseWriter, r, reason)
}

// flush sends an SDK refusal that never got its reason.
func (a *authWriter) flush() {
	if a.pending != (httpapi.Response{}) {
		a.writePending("")
	}
}

func (a *authWriter) refuseAfter(r httpapi.Response) {
	a.refusedAfter = r
	a.status = r.Status
	httpapi.WriteRefusal(a.ResponseWriter, r)
}

// Unwrap lets http.ResponseController reach the connection.
func (a *authWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// logTool writes the line of one tool call: the callback's line (section
// Logs and metrics of docs/contract.md) with door mcp. Never the
// arguments, the token or the body.
func (d *Door) logTool(c *call, o core.Outcome, resp httpapi.Response, status int) {
	dur := time.Since(c.start)
	tracing.SetOutcome(trace.SpanFromContext(c.ctx), httpapi.SpanOutcome(httpapi.DoorMCP, o, resp.Name))
	attrs := httpapi.AppendCallbackAttrs(make([]slog.Attr, 0, httpapi.LineAttrs), Path, httpapi.DoorMCP, o, resp.Name, status, dur)
	level := slog.LevelInfo
	if o.Kind == core.KindInternal {
		level = slog.LevelError
		if o.Err != nil {
			attrs = append(attrs, slog.Any("error", o.Err))
		}
	}
	if d.cfg.Metrics != nil {
		attrs = append(attrs, d.cfg.Metrics.Callback(c.ctx, metrics.Callback{
			Door: httpapi.DoorMCP, Function: o.Function, Outcome: resp.Name, Code: o.Code, Duration: dur}))
	}
	d.cfg.Logger.LogAttrs(c.ctx, level, "callback", attrs...)
}

// logRequest writes the line of a request no tool handler took: a
// refusal before the SDK, or another method (initialize, tools/list, an
// unknown tool's call). Refusals are counted as the callback's are.
func (d *Door) logRequest(c *call, rep httpapi.Response) {
	dur := time.Since(c.start)
	name := rep.Name
	attrs := []slog.Attr{
		slog.String("path", Path),
		slog.String("door", httpapi.DoorMCP),
		slog.String("rpc_method", httpapi.ClipLogged(c.rpc.Method)),
	}
	var fn, code string
	if c.rpc.Method == "tools/call" && rep.Name == rpcAnswer.Name {
		// A tools/call no handler took: the SDK answered a JSON-RPC error
		// and nothing was written. Either the tool does not exist, or the
		// call's params were not the shape the SDK reads.
		fn, code, name = c.rpc.Tool, core.CodeUnknownFunction, core.KindRejected.String()
		if _, known := d.cfg.Service.Lookup(fn); known {
			code, name = "", httpapi.ResponseBadRequest.Name
		}
		attrs = append(attrs, slog.String("function", httpapi.ClipLogged(fn)))
		if code != "" {
			attrs = append(attrs, slog.String("code", code))
		}
	}
	tracing.SetOutcome(trace.SpanFromContext(c.ctx), tracing.Outcome{Door: httpapi.DoorMCP, Function: httpapi.ClipLogged(fn),
		Outcome: name, Code: code})
	attrs = append(attrs,
		slog.String("outcome", name),
		slog.Int("http_status", rep.Status),
		slog.Float64("duration_ms", float64(dur.Microseconds())/1000))
	level := slog.LevelInfo
	if rep.Status >= 500 {
		level = slog.LevelError
	}
	counted := rep.Name != rpcAnswer.Name || name != rep.Name
	if d.cfg.Metrics != nil && counted {
		attrs = append(attrs, d.cfg.Metrics.Callback(c.ctx, metrics.Callback{
			Door: httpapi.DoorMCP, Function: fn, Outcome: name, Code: code, Duration: dur}))
	}
	d.cfg.Logger.LogAttrs(c.ctx, level, "callback", attrs...)
}
