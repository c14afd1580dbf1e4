// Package httpapi is the callback's plain net/http handler: POST /callback
// runs SPEC section 3 in order, GET /functions serves the catalogue of SPEC
// section 10. respond.go holds the one table from outcome to HTTP status
// and body; the Lambda entry (internal/lambdaurl) and the local server both
// serve this handler unchanged.
package httpapi
