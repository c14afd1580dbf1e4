// Package outcome is the callback's one table from outcome to HTTP
// answer: each answer's status and the name its body ("status" or
// "error") and its log line's outcome carry. internal/httpapi answers
// with it; internal/metrics takes the values of its outcome label from it
// (Names), so each name is written once.
package outcome

import (
	"maps"
	"net/http"
	"slices"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// Response is how one outcome is answered: the HTTP status, and the name
// that the body's "status" (or "error") and the log's outcome carry.
type Response struct {
	Status int
	Name   string
}

// ByKind is the table from the service's outcome to its response. Bodies
// of 4xx and 5xx carry no detail: AIVAX shows the model only 2xx bodies.
var ByKind = map[core.Kind]Response{
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
	BadRequest       = Response{http.StatusBadRequest, "bad_request"}
	TooLarge         = Response{http.StatusRequestEntityTooLarge, "too_large"}
	Unauthenticated  = Response{http.StatusUnauthorized, "unauthenticated"}
	NotFound         = Response{http.StatusNotFound, "not_found"}
	MethodNotAllowed = Response{http.StatusMethodNotAllowed, "method_not_allowed"}
	Catalogue        = Response{http.StatusOK, "catalogue"}
	Internal         = ByKind[core.KindInternal]
)

// Names returns every name a response carries, each once: the service's
// outcomes in the order of core's kinds, then the HTTP layer's refusals
// and the catalogue.
func Names() []string {
	var names []string
	add := func(r Response) {
		if !slices.Contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ByKind)) {
		add(ByKind[k])
	}
	for _, r := range []Response{BadRequest, TooLarge, Unauthenticated, NotFound, MethodNotAllowed, Catalogue} {
		add(r)
	}
	return names
}
