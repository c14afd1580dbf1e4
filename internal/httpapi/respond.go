package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// response is how one outcome is answered: the HTTP status, and the name
// that the body's "status" (or "error") and the log's outcome carry.
type response struct {
	status int
	name   string
}

// answers is the one table from domain outcome to HTTP response. Bodies
// of 4xx and 5xx carry no detail: AIVAX shows the model only 2xx bodies.
var answers = map[core.Kind]response{
	core.KindCreated:    {http.StatusOK, core.KindCreated.String()},
	core.KindDuplicate:  {http.StatusOK, core.KindDuplicate.String()},
	core.KindFound:      {http.StatusOK, core.KindFound.String()},
	core.KindInProgress: {http.StatusOK, core.KindInProgress.String()},
	core.KindBusy:       {http.StatusOK, core.KindBusy.String()},
	core.KindRejected:   {http.StatusOK, core.KindRejected.String()},
	// A conflict is a rejection the model never sees: 403, but the body
	// and the log name it as every other rejection, with its code.
	core.KindConflict:  {http.StatusForbidden, core.KindRejected.String()},
	core.KindForbidden: {http.StatusForbidden, core.KindForbidden.String()},
	core.KindInternal:  {http.StatusInternalServerError, core.KindInternal.String()},
}

// The refusals only the HTTP layer produces, before the service runs.
var (
	badRequest       = response{http.StatusBadRequest, "bad_request"}
	tooLarge         = response{http.StatusRequestEntityTooLarge, "too_large"}
	unauthenticated  = response{http.StatusUnauthorized, "unauthenticated"}
	notFound         = response{http.StatusNotFound, "not_found"}
	methodNotAllowed = response{http.StatusMethodNotAllowed, "method_not_allowed"}
	internalError    = answers[core.KindInternal]
)

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
	foundBody struct {
		Status string           `json:"status"`
		Ticket *core.TicketView `json:"ticket"`
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
	return reply{response: r, body: errorBody{r.name}, err: err}
}

// answer turns the service's outcome into its reply.
func answer(o core.Outcome) reply {
	r, ok := answers[o.Kind]
	switch {
	case !ok:
		return reply{response: internalError, body: errorBody{internalError.name}, out: o,
			err: fmt.Errorf("outcome %v has no response", o.Kind)}
	case (o.Kind == core.KindCreated || o.Kind == core.KindDuplicate) && o.Result == nil,
		o.Kind == core.KindFound && o.Ticket == nil:
		return reply{response: internalError, body: errorBody{internalError.name}, out: o,
			err: fmt.Errorf("outcome %v without its body", o.Kind)}
	}
	rep := reply{response: r, out: o, err: o.Err}
	switch o.Kind {
	case core.KindCreated, core.KindDuplicate:
		rep.body = o.Result // core.Result: the one encoding of the answer and its replay
	case core.KindFound:
		rep.body = foundBody{r.name, o.Ticket}
	case core.KindInProgress, core.KindBusy:
		rep.body = retryableBody{r.name, true, o.Message}
	case core.KindRejected, core.KindConflict:
		rep.body = rejectionBody{r.name, codeMessage{o.Code, o.Message}}
	default:
		rep.body = errorBody{r.name}
	}
	return rep
}

// write sends rep as JSON and returns what was sent; a body that does not
// encode is answered 500.
func write(w http.ResponseWriter, rep reply) reply {
	b, err := json.Marshal(rep.body)
	if err != nil {
		rep = reply{response: internalError, out: rep.out, err: err}
		b, _ = json.Marshal(errorBody{internalError.name})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(rep.status)
	_, _ = w.Write(append(b, '\n'))
	return rep
}
