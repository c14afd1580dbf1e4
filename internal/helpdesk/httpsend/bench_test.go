package httpsend_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/helpdesktest"
)

// BenchmarkDo measures a call on a fresh loopback connection (the client's
// way) against the same call on a kept-alive connection (net/http's
// default), to put a number on the price of never reusing a connection.
func BenchmarkDo(b *testing.B) {
	srv := helpdesktest.Answering(b, http.StatusCreated, "")
	body := bytes.Repeat([]byte("x"), 400)

	b.Run("fresh-connection", func(b *testing.B) {
		c := httpsend.New(httpsend.Options{})
		req := post(b, srv.URL)
		req.Body = body
		for b.Loop() {
			if _, err := c.Do(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("keep-alive", func(b *testing.B) {
		c := &http.Client{Transport: &http.Transport{}}
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
