package server

import (
	"net/http"
	"strconv"

	"github.com/heraldhq/herald/internal/apierror"
)

// WriteJSONBytes writes b, a JSON document encoded by its caller, as the response body with status.
func WriteJSONBytes(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// WriteJSON writes v as the JSON response body with status. The body is encoded first, so that it goes
// out with a Content-Length whatever its size (a batch's or a list's answer is larger than the server's
// buffer, and would otherwise be chunked).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := apierror.EncodeJSON(v)
	if err != nil {
		// Herald's responses are plain structs of strings, numbers and maps of strings: this is a bug.
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal_error","message":"internal error"}`+"\n")
	}
	WriteJSONBytes(w, status, b)
}
