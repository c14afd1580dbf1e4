package lambdaurl

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/aivax-examples/idempotent-callback/internal/lambdart"
)

// TestInvocation: the handler's request context carries the Lambda
// request id and the X-Ray trace id of the invocation, for the log line.
func TestInvocation(t *testing.T) {
	const header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	lc := func(id string) context.Context {
		return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
	}
	tests := []struct {
		name   string
		ctx    context.Context
		header string // the event's x-amzn-trace-id
		urlID  string // requestContext.requestId of the event
		want   lambdart.Invocation
		wantOK bool
	}{
		{"runtime context and trace value",
			context.WithValue(lc("lambda-req-1"), traceContextKey, header), "", "url-req", //nolint:staticcheck // aws-lambda-go's own key
			lambdart.Invocation{RequestID: "lambda-req-1", TraceID: "1-5759e988-bd862e3fe1be46a994272793"}, true},
		{"trace from the event's header", lc("lambda-req-2"), header, "",
			lambdart.Invocation{RequestID: "lambda-req-2", TraceID: "1-5759e988-bd862e3fe1be46a994272793"}, true},
		{"untraced", lc("lambda-req-3"), "", "",
			lambdart.Invocation{RequestID: "lambda-req-3"}, true},
		{"no runtime context: the event's request id", context.Background(), "", "url-req-4",
			lambdart.Invocation{RequestID: "url-req-4"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got lambdart.Invocation
			var ok bool
			h := Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got, ok = lambdart.InvocationFrom(r.Context())
			}))
			ev := event("GET", "/functions", "", nil, "", false)
			ev.RequestContext.RequestID = tc.urlID
			if tc.header != "" {
				ev.Headers = map[string]string{"x-amzn-trace-id": tc.header}
			}
			if _, err := h(tc.ctx, ev); err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("InvocationFrom = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	if _, ok := lambdart.InvocationFrom(context.Background()); ok {
		t.Error("InvocationFrom of a plain context: ok, want none")
	}
}

func TestTraceID(t *testing.T) {
	for in, want := range map[string]string{
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1": "1-5759e988-bd862e3fe1be46a994272793",
		"Parent=53995c3f42cd8ad8; Root=1-abc;Sampled=0":                              "1-abc",
		"Root=1-abc":                             "1-abc",
		"":                                       "",
		"  1-5759e988-bd862e3fe1be46a994272793 ": "1-5759e988-bd862e3fe1be46a994272793",
	} {
		if got := TraceID(in); got != want {
			t.Errorf("TraceID(%q) = %q, want %q", in, got, want)
		}
	}
}
