// Package httpapi is the callback's plain net/http handler: POST /callback
// runs the checks of docs/contract.md, Order of checks, in order; GET
// /functions serves the catalogue (docs/contract.md, Catalogue). outcome.go
// holds the one table from outcome to HTTP status and body; the Lambda
// entry (internal/lambdaurl) and the local server both serve this handler
// unchanged.
package httpapi
