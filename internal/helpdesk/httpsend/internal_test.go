package httpsend

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// TestHTTP1OnlyOverTLS: against a TLS server that offers HTTP/2, the client
// still speaks HTTP/1.1 with a fresh connection per call, so HTTP/2's own
// request retries never come into play.
func TestHTTP1OnlyOverTLS(t *testing.T) {
	var protos []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		protos = append(protos, r.Proto)
		w.WriteHeader(http.StatusCreated)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if !srv.Client().Transport.(*http.Transport).ForceAttemptHTTP2 {
		t.Fatal("the test server's own client does not attempt HTTP/2: the test would prove nothing")
	}

	c := New(Options{})
	tr := c.hc.Transport.(*tracing.RoundTripper).Base.(*http.Transport)
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	u, _ := url.Parse(srv.URL)
	for range 2 {
		resp, err := c.Do(context.Background(), Request{Method: http.MethodPost, URL: u,
			Header: http.Header{"Idempotency-Key": {"k"}}, Body: []byte("{}")})
		if err != nil || resp.Status != http.StatusCreated {
			t.Fatalf("%v %v", resp, err)
		}
	}
	if len(protos) != 2 || protos[0] != "HTTP/1.1" || protos[1] != "HTTP/1.1" {
		t.Fatalf("protocols %v; want HTTP/1.1 twice", protos)
	}

	// The same server does speak HTTP/2 to a client that asks.
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the server answered %s to an HTTP/2 client: the test would prove nothing", resp.Proto)
	}
}
