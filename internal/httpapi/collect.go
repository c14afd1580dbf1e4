package httpapi

import (
	"net/http"

	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// Collect wraps next so that each request's context collects the store
// calls made for it (metrics.WithRequest), for the line that reports the
// request.
func Collect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, _ := metrics.WithRequest(r.Context())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
