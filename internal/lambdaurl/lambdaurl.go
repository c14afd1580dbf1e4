// Package lambdaurl is what a deployed function takes from the Lambda
// runtime: it adapts Lambda function URL events (payload 2.0, BUFFERED
// invoke mode) to a plain http.Handler, so the deployed function and the
// local server serve the very same handler; it is both functions'
// logger (NewLogger: JSON lines carrying each invocation's ids) and their
// reader of SSM parameters at cold start (ReadParameter), so the local
// programs link neither.
//
// A base64 body is decoded on the way in; the handler sees the decoded
// bytes, applies its size limit to them and answers 400 when they do not
// decode. Panics are the handler's business (httpapi recovers them into a
// 500); this adapter never returns an error to the runtime for a request,
// so a bad request cannot turn into a function error.
//
// # Why not github.com/aws/aws-lambda-go/lambdaurl
//
// aws-lambda-go ships a package of the same name whose Wrap also turns an
// http.Handler into a Lambda handler, but only for function URLs configured
// with InvokeMode RESPONSE_STREAM: it answers with a streaming response
// (events.LambdaFunctionURLStreamingResponse, the
// application/vnd.awslambda.http-integration-response encoding) and its
// lambdaurl.Start needs the provided runtimes' streaming support. The
// callback's answers are small JSON documents and its function URL uses the
// default BUFFERED mode, whose events are LambdaFunctionURLRequest and
// LambdaFunctionURLResponse; this package serves those, and keeps upstream's
// entry point name (Wrap) so the two read alike.
package lambdaurl

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// DeadlineMargin is kept free before the Lambda deadline, so store calls
// time out (and answer busy) before the runtime kills the invocation.
const DeadlineMargin = 500 * time.Millisecond

// Wrap returns the function the Lambda runtime calls for a BUFFERED function
// URL: it serves each event with h and returns h's buffered answer.
func Wrap(h http.Handler) func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	return func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl.Add(-DeadlineMargin))
			defer cancel()
		}
		ctx = context.WithValue(ctx, invocationKey{}, invocation(ctx, ev))
		r := Request(ctx, ev)
		w := &recorder{header: http.Header{}, status: http.StatusOK}
		h.ServeHTTP(w, r)
		return w.response(), nil
	}
}

// Invocation identifies the Lambda invocation that carried a request, for
// its log lines: the Lambda request id and the X-Ray trace id, so that one
// callback's lines can be found together and beside its trace.
type Invocation struct {
	RequestID string
	TraceID   string // "" when the invocation carries no trace header
}

type invocationKey struct{}

// InvocationFrom returns the invocation a request's context came from.
func InvocationFrom(ctx context.Context) (Invocation, bool) {
	inv, ok := ctx.Value(invocationKey{}).(Invocation)
	return inv, ok
}

// traceContextKey is where aws-lambda-go puts the invocation's
// Lambda-Runtime-Trace-Id header.
const traceContextKey = "x-amzn-trace-id"

func invocation(ctx context.Context, ev events.LambdaFunctionURLRequest) Invocation {
	inv := Invocation{RequestID: ev.RequestContext.RequestID}
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		inv.RequestID = lc.AwsRequestID
	}
	header, _ := ctx.Value(traceContextKey).(string)
	if header == "" {
		// The function URL passes the request's own X-Ray header on.
		header = ev.Headers["x-amzn-trace-id"]
	}
	inv.TraceID = TraceID(header)
	return inv
}

// TraceID returns the Root of an X-Ray trace header
// ("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=…;Sampled=1"), or the
// header itself when it has no Root field.
func TraceID(header string) string {
	for field := range strings.SplitSeq(header, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(field), "Root="); ok {
			return v
		}
	}
	return strings.TrimSpace(header)
}

// Request builds the http.Request of a function URL event.
func Request(ctx context.Context, ev events.LambdaFunctionURLRequest) *http.Request {
	var body io.Reader = strings.NewReader(ev.Body)
	length := int64(len(ev.Body))
	if ev.IsBase64Encoded {
		body = base64.NewDecoder(base64.StdEncoding, strings.NewReader(ev.Body))
		length = -1
	}
	path := ev.RawPath
	if path == "" {
		path = "/"
	}
	u := &url.URL{Scheme: "https", Path: path, RawQuery: ev.RawQueryString}
	if p, err := url.PathUnescape(path); err == nil { // rawPath is percent-encoded
		u.Path, u.RawPath = p, path
	}
	method := ev.RequestContext.HTTP.Method
	if method == "" {
		method = http.MethodGet
	}
	r, _ := http.NewRequestWithContext(ctx, method, u.String(), body)
	if r == nil { // an unparsable path or method: serve it as an unknown route
		r, _ = http.NewRequestWithContext(ctx, http.MethodGet, "https://invalid/", body)
	}
	r.ContentLength = length
	for k, v := range ev.Headers {
		r.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	r.Host = ev.Headers["host"]
	if r.Host == "" {
		r.Host = ev.RequestContext.DomainName
	}
	r.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	r.Header.Set("X-Forwarded-Proto", "https")
	return r
}

type recorder struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = status, true
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

func (w *recorder) response() events.LambdaFunctionURLResponse {
	headers := make(map[string]string, len(w.header))
	for k, v := range w.header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	return events.LambdaFunctionURLResponse{StatusCode: w.status, Headers: headers, Body: w.body.String()}
}

// NewLogger is the deployed function's logger: JSON lines on stdout in
// Lambda's shape (timestamp, level, message; ReplaceAttr from
// lambdacontext), with each request's Lambda requestId and, when the
// invocation is traced, its xrayTraceId (Wrap passes both).
// Lines are JSON whatever AWS_LAMBDA_LOG_FORMAT says (docs/contract.md,
// Logs and metrics, wants JSON everywhere, and EMF needs it);
// level is its level (config.LogLevel: AWS_LAMBDA_LOG_LEVEL).
func NewLogger(level slog.Level) *slog.Logger {
	return slog.New(LogHandler(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		Level: level, ReplaceAttr: lambdacontext.ReplaceAttr})))
}

// LogHandler is h with each request's invocation ids added, as
// NewLogger's lines have them.
func LogHandler(h slog.Handler) slog.Handler { return invocationHandler{h} }

// invocationHandler adds the invocation's ids to each line logged with a
// request's context.
type invocationHandler struct{ slog.Handler }

func (h invocationHandler) Handle(ctx context.Context, r slog.Record) error {
	if inv, ok := InvocationFrom(ctx); ok {
		r.AddAttrs(slog.String("requestId", inv.RequestID))
		if inv.TraceID != "" {
			r.AddAttrs(slog.String("xrayTraceId", inv.TraceID))
		}
	} else if lc, ok := lambdacontext.FromContext(ctx); ok {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h invocationHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return invocationHandler{h.Handler.WithAttrs(a)}
}

func (h invocationHandler) WithGroup(name string) slog.Handler {
	return invocationHandler{h.Handler.WithGroup(name)}
}
