package ingress

import "net/http"

// LimitInFlightForTest exposes the load-shedding middleware to the external tests.
func LimitInFlightForTest(most int) func(http.Handler) http.Handler {
	return limitSlots(make(chan struct{}, most))
}

// AuthQueries is how many key lookups a has made in PostgreSQL.
func AuthQueries(a *API) int64 { return a.authQueries.Load() }

// BodyBytesInFlight is what the requests in flight hold of a's in-flight bytes.
func BodyBytesInFlight(a *API) (used, most int64) { return a.admission.used(), a.admission.maxBytes }

// RequestsInFlight is how many /v1 requests of a hold a place among those in flight.
func RequestsInFlight(a *API) int { return len(a.inFlight) }

// SetThrottledLookups replaces a's budget of lookups for throttled addresses.
func SetThrottledLookups(a *API, perSecond float64, burst int) {
	a.throttledLookups = newLookupBudget(perSecond, burst)
}

// TemplateLookups is how many times a's template cache read PostgreSQL.
func TemplateLookups(a *API) int { return a.templates.lookups() }

// ZoneReads is how many times a's zone cache read a tenant's version and reloaded its zoned users, and
// how many statements read users' locales (and zones) per request.
func ZoneReads(a *API) (versionReads, reloads int, localeStatements int64) {
	v, r := a.zones.counts()
	return v, r, a.localeQueries.Load()
}
