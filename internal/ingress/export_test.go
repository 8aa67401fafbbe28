package ingress

// LimitInFlightForTest exposes the load-shedding middleware to the external tests.
var LimitInFlightForTest = limitInFlight

// AuthQueries is how many key lookups a has made in PostgreSQL.
func AuthQueries(a *API) int64 { return a.authQueries.Load() }
