package ingress

// LimitInFlightForTest exposes the load-shedding middleware to the external tests.
var LimitInFlightForTest = limitInFlight
