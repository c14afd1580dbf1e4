// Package lambdaurl adapts the callback function's Lambda function URL
// events (payload 2.0, BUFFERED invoke mode) to a plain http.Handler, so
// the deployed function and the local server serve the very same
// handler. Each request's context carries its invocation's ids
// (lambdart.WithInvocation), which the functions' logger adds to its
// lines.
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
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/aivax-examples/idempotent-callback/internal/lambdart"
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
		ctx = lambdart.WithInvocation(ctx, invocation(ctx, ev))
		r := Request(ctx, ev)
		w := &recorder{header: http.Header{}, status: http.StatusOK}
		h.ServeHTTP(w, r)
		return w.response(), nil
	}
}

// traceContextKey is where aws-lambda-go puts the invocation's
// Lambda-Runtime-Trace-Id header.
const traceContextKey = "x-amzn-trace-id"

// invocation is the ids of the invocation that carried ev.
func invocation(ctx context.Context, ev events.LambdaFunctionURLRequest) lambdart.Invocation {
	inv := lambdart.Invocation{RequestID: ev.RequestContext.RequestID}
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
