package server

import "net/http"

// Metric label values come from closed sets only: a label copied from a request (its method, its path)
// lets any client create series without bound, and /metrics grows until the scraper or the process gives
// up. Routes are chi's patterns ("unmatched" when none), never paths.

// MethodLabel is the metric label of an HTTP method: one of the methods of RFC 9110 and PATCH, else
// "other".
func MethodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}
