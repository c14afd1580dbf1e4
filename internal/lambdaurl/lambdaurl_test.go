package lambdaurl

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

func event(method, rawPath, query string, headers map[string]string, body string, b64 bool) events.LambdaFunctionURLRequest {
	return events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: rawPath, RawQueryString: query, Headers: headers,
		Body: body, IsBase64Encoded: b64,
		RequestContext: events.LambdaFunctionURLRequestContext{
			DomainName: "abc123.lambda-url.us-east-1.on.aws",
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: method, Path: rawPath, SourceIP: "203.0.113.7",
			},
		},
	}
}

func TestRequest(t *testing.T) {
	tests := []struct {
		name                string
		ev                  events.LambdaFunctionURLRequest
		method, path, query string
		host                string
		headers             map[string]string // canonical or not: read with Header.Get
		body                string
	}{
		{"plain POST",
			event("POST", "/callback", "", map[string]string{"content-type": "application/json", "x-request-nonce": "$2a$09$x", "host": "tickets.example.org"}, `{"a":1}`, false),
			"POST", "/callback", "", "tickets.example.org",
			map[string]string{"Content-Type": "application/json", "X-Request-Nonce": "$2a$09$x", "x-request-nonce": "$2a$09$x"}, `{"a":1}`},
		{"percent-encoded rawPath /call%62ack -> /callback",
			event("POST", "/call%62ack", "", nil, "", false),
			"POST", "/callback", "", "abc123.lambda-url.us-east-1.on.aws", nil, ""},
		{"encoded slash-free path with space /a%20b -> /a b",
			event("GET", "/a%20b", "", nil, "", false),
			"GET", "/a b", "", "abc123.lambda-url.us-east-1.on.aws", nil, ""},
		{"query string kept",
			event("GET", "/functions", "a=1&b=x%20y", nil, "", false),
			"GET", "/functions", "a=1&b=x%20y", "abc123.lambda-url.us-east-1.on.aws", nil, ""},
		{"no host header -> domainName",
			event("GET", "/functions", "", map[string]string{"accept": "*/*"}, "", false),
			"GET", "/functions", "", "abc123.lambda-url.us-east-1.on.aws", map[string]string{"Accept": "*/*"}, ""},
		{"base64 body decoded",
			event("POST", "/callback", "", nil, base64.StdEncoding.EncodeToString([]byte(`{"type":"tool_call"}`)), true),
			"POST", "/callback", "", "abc123.lambda-url.us-east-1.on.aws", nil, `{"type":"tool_call"}`},
		{"empty rawPath -> /",
			event("GET", "", "", nil, "", false),
			"GET", "/", "", "abc123.lambda-url.us-east-1.on.aws", nil, ""},
		{"empty method -> GET",
			event("", "/functions", "", nil, "", false),
			"GET", "/functions", "", "abc123.lambda-url.us-east-1.on.aws", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Request(context.Background(), tc.ev)
			if r.Method != tc.method {
				t.Errorf("method %q, want %q", r.Method, tc.method)
			}
			if r.URL.Path != tc.path {
				t.Errorf("path %q, want %q", r.URL.Path, tc.path)
			}
			if r.URL.RawQuery != tc.query {
				t.Errorf("query %q, want %q", r.URL.RawQuery, tc.query)
			}
			if r.Host != tc.host {
				t.Errorf("host %q, want %q", r.Host, tc.host)
			}
			if got := r.Header.Get("X-Forwarded-Proto"); got != "https" {
				t.Errorf("X-Forwarded-Proto %q, want https", got)
			}
			for k, v := range tc.headers {
				if got := r.Header.Get(k); got != v {
					t.Errorf("header %s: %q, want %q", k, got, v)
				}
			}
			if r.RemoteAddr != "203.0.113.7" {
				t.Errorf("RemoteAddr %q", r.RemoteAddr)
			}
			b, err := io.ReadAll(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.body {
				t.Errorf("body %q, want %q", b, tc.body)
			}
		})
	}
}

func TestRequestQueryParsed(t *testing.T) {
	r := Request(context.Background(), event("GET", "/functions", "a=1&b=x%20y", nil, "", false))
	if got := r.URL.Query().Get("b"); got != "x y" {
		t.Errorf("query b %q, want %q", got, "x y")
	}
}

func TestRequestCorruptBase64(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		corrupt bool // the error is a base64.CorruptInputError; else any read error
	}{
		{"not base64 at all -> CorruptInputError", "!!!not base64!!!", true},
		{"illegal character inside a quantum -> CorruptInputError", "eyJh*joxfQ==", true},
		// A partial last quantum ends in io.ErrUnexpectedEOF from
		// base64.NewDecoder; httpapi answers 400 for any read error.
		{"partial last quantum -> read error", "eyJhIjox=", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Request(context.Background(), event("POST", "/callback", "", nil, tc.body, true))
			_, err := io.ReadAll(r.Body)
			var ce base64.CorruptInputError
			switch {
			case err == nil:
				t.Error("reading the body: no error")
			case tc.corrupt && !errors.As(err, &ce):
				t.Errorf("reading the body: %v (%T), want base64.CorruptInputError", err, err)
			}
		})
	}
}

func TestRequestContext(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	r := Request(ctx, event("GET", "/", "", nil, "", false))
	if r.Context().Value(key{}) != "v" {
		t.Error("request does not carry the context")
	}
}

func TestWrapResponse(t *testing.T) {
	tests := []struct {
		name       string
		h          http.HandlerFunc
		wantStatus int
		wantHeader map[string]string // lower-case names
		wantBody   string
	}{
		{"JSON 201 with headers -> lower-case names",
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Custom-Thing", "1")
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, `{"status":"created"}`)
			},
			201, map[string]string{"content-type": "application/json", "x-custom-thing": "1"}, `{"status":"created"}`},
		{"writes nothing -> 200 empty body",
			func(w http.ResponseWriter, r *http.Request) {},
			200, map[string]string{}, ""},
		{"Write without WriteHeader -> 200",
			func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "a")
				_, _ = io.WriteString(w, "b")
			},
			200, map[string]string{}, "ab"},
		{"second WriteHeader ignored -> first status",
			func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusRequestEntityTooLarge)
				w.WriteHeader(http.StatusOK)
			},
			413, map[string]string{}, ""},
		{"multi-valued header -> joined",
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Add("Vary", "a")
				w.Header().Add("Vary", "b")
			},
			200, map[string]string{"vary": "a,b"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := Wrap(tc.h)(context.Background(), event("GET", "/", "", nil, "", false))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if resp.Body != tc.wantBody {
				t.Errorf("body %q, want %q", resp.Body, tc.wantBody)
			}
			if len(resp.Headers) != len(tc.wantHeader) {
				t.Errorf("headers %v, want %v", resp.Headers, tc.wantHeader)
			}
			for k, v := range tc.wantHeader {
				if resp.Headers[k] != v {
					t.Errorf("header %s: %q, want %q (all: %v)", k, resp.Headers[k], v, resp.Headers)
				}
			}
		})
	}
}

func TestWrapServesRequest(t *testing.T) {
	var gotPath, gotBody, gotNonce string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotNonce = r.URL.Path, r.Header.Get("X-Request-Nonce")
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
	})
	ev := event("POST", "/call%62ack", "", map[string]string{"x-request-nonce": "n"},
		base64.StdEncoding.EncodeToString([]byte("{}")), true)
	if _, err := Wrap(h)(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if gotPath != "/callback" || gotBody != "{}" || gotNonce != "n" {
		t.Errorf("handler saw path %q body %q nonce %q", gotPath, gotBody, gotNonce)
	}
}

func TestWrapDeadline(t *testing.T) {
	tests := []struct {
		name     string
		deadline time.Duration // from now; 0: none
	}{
		{"deadline in 3s -> shortened by DeadlineMargin", 3 * time.Second},
		{"no deadline -> none added", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var want time.Time
			if tc.deadline > 0 {
				want = time.Now().Add(tc.deadline)
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, want)
				defer cancel()
			}
			var got time.Time
			var ok bool
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, ok = r.Context().Deadline() })
			if _, err := Wrap(h)(ctx, event("GET", "/", "", nil, "", false)); err != nil {
				t.Fatal(err)
			}
			if tc.deadline == 0 {
				if ok {
					t.Errorf("handler got a deadline %v, want none", got)
				}
				return
			}
			if !ok {
				t.Fatal("handler got no deadline")
			}
			if !got.Equal(want.Add(-DeadlineMargin)) {
				t.Errorf("deadline %v, want %v (Lambda deadline minus %v)", got, want.Add(-DeadlineMargin), DeadlineMargin)
			}
		})
	}
}
