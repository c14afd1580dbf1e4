package httpapi

import (
	"encoding/json"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// CatalogueFunction is one entry of GET /functions, in the shape AIVAX's
// protocolFunctionSources reads.
type CatalogueFunction struct {
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	CallbackURL   string          `json:"callbackUrl"`
	ContentFormat json.RawMessage `json:"contentFormat"`
}

// Catalogue lists every function of fns with its schema.
func Catalogue(fns []core.Function, callbackURL string) []CatalogueFunction {
	out := make([]CatalogueFunction, len(fns))
	for i := range fns {
		f := &fns[i]
		out[i] = CatalogueFunction{Name: f.Name, Description: f.Description,
			CallbackURL: callbackURL, ContentFormat: f.Schema()}
	}
	return out
}

// catalogue is the reply of GET /functions: the service's tools.
func catalogue(svc *core.Service, callbackURL string) reply {
	return reply{response: ResponseCatalogue, body: struct {
		Functions []CatalogueFunction `json:"functions"`
	}{Catalogue(svc.Functions(), callbackURL)}}
}
