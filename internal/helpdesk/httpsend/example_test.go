package httpsend_test

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
)

func ExampleClassify() {
	u, _ := url.Parse("https://acme.zendesk.com/api/v2/tickets")
	req := httpsend.Request{Method: http.MethodPost, URL: u}
	for _, status := range []int{201, 408, 409, 422, 429, 503} {
		se := httpsend.Classify(req, &httpsend.Response{Status: status})
		if se == nil {
			fmt.Println(status, "delivered")
			continue
		}
		fmt.Println(status, se.Failure)
	}
	// Output:
	// 201 delivered
	// 408 not_created
	// 409 unknown
	// 422 refused
	// 429 not_created
	// 503 unknown
}

func ExampleRetryAfter() {
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Retry-After", "120")
	fmt.Println(httpsend.RetryAfter(h, now))
	h.Set("Retry-After", "Tue, 01 Dec 2026 03:00:45 GMT")
	fmt.Println(httpsend.RetryAfter(h, now))
	// Output:
	// 2m0s
	// 45s
}

func ExampleCheckURL() {
	for _, raw := range []string{"https://acme.zendesk.com", "http://127.0.0.1:8080/hook", "http://acme.zendesk.com"} {
		_, err := httpsend.CheckURL(raw)
		fmt.Println(raw, err)
	}
	// Output:
	// https://acme.zendesk.com <nil>
	// http://127.0.0.1:8080/hook <nil>
	// http://acme.zendesk.com url: "http://acme.zendesk.com" must be https (http is allowed only for loopback hosts)
}
