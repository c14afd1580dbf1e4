package fakehelpdesk_test

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// The first create under key "k" is stored and its connection dropped
// before any answer; the resend under the same key is answered with the
// ticket already held.
func Example() {
	s := fakehelpdesk.New(nil, fakehelpdesk.Config{})
	defer s.Close()
	s.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Key: "k", Fault: fakehelpdesk.CommitThenDrop()})

	body := `{"ticket_id":"k"}`
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, s.WebhookURL(), strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "k")
		// Each send is signed afresh: a resend a second later has its own
		// timestamp, so it is no replay of the first.
		at := s.Now().Add(time.Duration(i) * time.Second)
		fakehelpdesk.SignHeaders(req.Header, s.Config().Secret, "k", at, []byte(body))
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
