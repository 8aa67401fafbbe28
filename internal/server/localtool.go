package server

import (
	"mime"
	"net"
	"net/http"
	"strings"
)

// What guards the unauthenticated routes of the tools that run on a developer's machine (herald dev's
// console, the messenger simulator) against the web pages that developer's browser opens: a page can make
// the browser send a request to 127.0.0.1, and by DNS rebinding even as the page's own origin.

// LocalOnly refuses (403) a Host that is neither an IP address nor localhost: a name of the attacker's that
// resolves to 127.0.0.1 (DNS rebinding) would make the routes same-origin to the attacker's page, which
// could then read the answers (the console's hands out the demo key) and send what it likes.
func LocalOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		if net.ParseIP(host) == nil && !strings.EqualFold(host, "localhost") {
			WriteJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden",
				"message": "a local tool answers on an IP address or localhost only"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses a state-changing request that the browser says comes from another origin
// (Sec-Fetch-Site, else Origin against Host); a request that names none (curl, Go) passes.
var crossOrigin = func() *http.CrossOriginProtection {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden",
			"message": "a request from another origin's page may not change this tool's state"})
	}))
	return p
}()

// SameOriginJSON serves a request that changes state (any method but GET, HEAD and OPTIONS) only when it
// is JSON (415 otherwise) and, when the browser names its origin, from the same origin (403 otherwise).
// A page of another origin can send a text/plain or form POST without asking, but application/json only
// after a CORS preflight, which these routes never grant; each check holds without the other.
func SameOriginJSON(next http.Handler) http.Handler {
	return crossOrigin.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				WriteJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "unsupported_media_type",
					"message": "a request that changes state must be Content-Type: application/json (curl: -H 'Content-Type: application/json')"})
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
}
