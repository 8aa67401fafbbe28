package ingress

import (
	"net/http"

	"github.com/heraldhq/herald/internal/apierror"
)

// DefaultMaxInFlight caps concurrent /v1 requests per replica. Past it, requests are shed at once with
// 503 and Retry-After rather than queued: queuing would only grow memory and latency for everyone, while
// a fast 503 lets clients back off and the autoscaler add replicas.
const DefaultMaxInFlight = 1024

func limitInFlight(max int) func(http.Handler) http.Handler {
	slots := make(chan struct{}, max)
	overloaded := apierror.Overloaded
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				next.ServeHTTP(w, r)
			default:
				apierror.Write(w, overloaded)
			}
		})
	}
}
