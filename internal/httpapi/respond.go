package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// response is Response under the name reply embeds it by (the table is
// Responses).
type response = Response

// reply is one request's answer and what its log line needs.
type reply struct {
	response
	body any
	out  core.Outcome // the service's outcome, when the service ran
	err  error        // why the request was refused or failed; logged, never sent
}

// The bodies, in the order their members are written.
type (
	errorBody struct {
		Error string `json:"error"`
	}
	retryableBody struct {
		Status    string `json:"status"`
		Retryable bool   `json:"retryable"`
		Message   string `json:"message"`
	}
	rejectionBody struct {
		Status string      `json:"status"`
		Error  codeMessage `json:"error"`
	}
	codeMessage struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
)

// refuse answers with a short error body, no detail.
func refuse(r response, err error) reply {
	return reply{response: r, body: errorBody{r.Name}, err: err}
}

// answer turns the service's outcome into its reply.
func answer(o core.Outcome) reply {
	r, ok := Responses[o.Kind]
	switch {
	case !ok:
		return reply{response: ResponseInternal, body: errorBody{ResponseInternal.Name}, out: o,
			err: fmt.Errorf("outcome %v has no response", o.Kind)}
	case o.Kind.ToolAnswer() && len(o.Body) == 0:
		return reply{response: ResponseInternal, body: errorBody{ResponseInternal.Name}, out: o,
			err: fmt.Errorf("outcome %v without its body", o.Kind)}
	}
	rep := reply{response: r, out: o, err: o.Err}
	switch k := o.Kind; {
	case k.ToolAnswer():
		// The tool's own answer, sent as the tool encoded it: the one
		// encoding of an answer and its replay. A body that is not JSON is
		// answered 500 by write.
		rep.body = o.Body
	case k == core.KindInProgress, k == core.KindBusy:
		rep.body = retryableBody{r.Name, true, o.Message}
	case k == core.KindRejected, k == core.KindConflict:
		rep.body = rejectionBody{r.Name, codeMessage{o.Code, o.Message}}
	default:
		rep.body = errorBody{r.Name}
	}
	return rep
}

// write sends rep as JSON and returns what was sent; a body that does not
// encode is answered 500.
func write(w http.ResponseWriter, rep reply) reply {
	b, err := json.Marshal(rep.body)
	if err != nil {
		rep = reply{response: ResponseInternal, out: rep.out, err: err}
		b, _ = json.Marshal(errorBody{ResponseInternal.Name})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(rep.Status)
	_, _ = w.Write(append(b, '\n'))
	return rep
}
