package linear_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/linear"
)

// TestIssueUnderAnotherID: exactly once rests on the issue carrying the
// ticket's id. An issueCreate that answers success with another id ends
// the ticket refused, naming the issue, rather than delivered (a later
// lookup of the ticket's id would not find it); a lookup answered with
// an issue of another id (issue(id:) also resolves identifiers) is an
// unknown answer, neither found nor proof of absence.
func TestIssueUnderAnotherID(t *testing.T) {
	const other = `{"id":"9b2d0c4e-0000-4000-8000-000000000000","identifier":"ENG-9","url":"https://linear.app/acme/issue/ENG-9"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), "issueCreate") {
			_, _ = w.Write([]byte(`{"data":{"issueCreate":{"success":true,"issue":` + other + `}}}`))
			return
		}
		_, _ = w.Write([]byte(`{"data":{"issue":` + other + `}}`))
	}))
	t.Cleanup(srv.Close)
	c, err := linear.New(linear.Config{URL: srv.URL, TeamID: "team-1", APIKey: "lin_api_test", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var se *delivery.SendError
	r, err := c.Send(context.Background(), ticket())
	if !errors.As(err, &se) || se.Failure != delivery.Refused || !strings.Contains(err.Error(), "ENG-9") {
		t.Errorf("create under another id: receipt %+v, error %v; want refused, naming ENG-9", r, err)
	}
	r, found, err := c.Lookup(context.Background(), ticketID)
	if found || !errors.As(err, &se) || se.Failure != delivery.Unknown {
		t.Errorf("lookup answered another id: %+v found=%t error %v; want an unknown answer", r, found, err)
	}
}
