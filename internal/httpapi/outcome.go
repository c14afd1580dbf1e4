package httpapi

import (
	"maps"
	"net/http"
	"slices"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// Response is how one outcome is answered: the HTTP status, and the name
// that the body's "status" (or "error") and the log's outcome carry.
// Responses and the Response* values below are the callback's one table
// from outcome to HTTP answer; the outcome label's values come from it
// (OutcomeNames, MetricLabels), so each name is written once.
type Response struct {
	Status int
	Name   string
}

// Responses is the table from the service's outcome to its response.
// Bodies of 4xx and 5xx carry no detail: AIVAX shows the model only 2xx
// bodies.
var Responses = map[core.Kind]Response{
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

// The refusals only the HTTP layer produces, before the service runs, and
// the answer to GET /functions.
var (
	ResponseBadRequest       = Response{http.StatusBadRequest, "bad_request"}
	ResponseTooLarge         = Response{http.StatusRequestEntityTooLarge, "too_large"}
	ResponseUnauthenticated  = Response{http.StatusUnauthorized, "unauthenticated"}
	ResponseNotFound         = Response{http.StatusNotFound, "not_found"}
	ResponseMethodNotAllowed = Response{http.StatusMethodNotAllowed, "method_not_allowed"}
	ResponseCatalogue        = Response{http.StatusOK, "catalogue"}
	ResponseInternal         = Responses[core.KindInternal]
)

// OutcomeNames returns every name a response carries, each once: the
// service's outcomes in the order of core's kinds, then the HTTP layer's
// refusals and the catalogue.
func OutcomeNames() []string {
	var names []string
	add := func(r Response) {
		if !slices.Contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(Responses)) {
		add(Responses[k])
	}
	for _, r := range []Response{ResponseBadRequest, ResponseTooLarge, ResponseUnauthenticated, ResponseNotFound, ResponseMethodNotAllowed, ResponseCatalogue} {
		add(r)
	}
	return names
}

// MetricLabels are the closed sets of a callback's labels: the tools'
// names and rejection codes (core.Tools.Codes), and OutcomeNames (an
// unknown outcome counts as internal). Nil tools are the product's.
func MetricLabels(tools *core.Tools) metrics.CallbackLabels {
	if tools == nil {
		tools = core.ProductTools()
	}
	return metrics.CallbackLabels{
		Functions:    tools.Names(),
		Outcomes:     OutcomeNames(),
		OtherOutcome: ResponseInternal.Name,
		Codes:        tools.Codes(),
	}
}
