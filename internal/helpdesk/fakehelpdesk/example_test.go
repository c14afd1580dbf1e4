package fakehelpdesk_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/fakehelpdesk"
)

// The first create under key "k" is stored and its connection dropped
// before any answer; the resend under the same key is answered with the
// ticket already held.
func Example() {
	s := fakehelpdesk.New(nil, fakehelpdesk.Config{})
	defer s.Close()
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Key: "k", Fault: fakehelpdesk.CommitThenDrop()})

	body := `{"ticket_id":"k"}`
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, s.WebhookURL(), strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "k")
		req.Header.Set("X-Signature-256", fakehelpdesk.Sign(s.Config().Secret, []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println("no answer")
			continue
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	fmt.Println("held:", s.Held("k"), "requests:", s.Requests(fakehelpdesk.WebhookCreate))
	// Output:
	// no answer
	// 201 Created
	// held: 1 requests: 2
}
