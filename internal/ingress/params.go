package ingress

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/store"
)

// Path parameters come from the client: a value that cannot name anything is not_found, like an unknown
// one (docs/architecture.md).

// trackingIDParam reads a {tracking_id}: a UUID in any form uuid.Parse takes, returned in canonical form.
func trackingIDParam(raw string) (string, bool) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return "", false
	}
	return id.String(), true
}

// userIDParam reads a {user_id}: percent-decoded, then a valid user_id.
func userIDParam(raw string) (string, bool) {
	userID, err := url.PathUnescape(raw)
	if err != nil || validUserID(userID) != nil {
		return "", false
	}
	return userID, true
}

// strictQuery parses a query string whose parameters must each be one of known, given at most once: a
// misspelt filter must not silently list everything. Every refusal is invalid_request.
func strictQuery(raw string, known []string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, apierror.InvalidRequest.With("malformed query string")
	}
	for name, values := range q {
		if !slices.Contains(known, name) {
			return nil, apierror.InvalidRequest.With("unknown query parameter %q (known: %s)", truncate(name, 64), strings.Join(known, ", "))
		}
		if len(values) > 1 {
			return nil, apierror.InvalidRequest.With("query parameter %q given more than once", name)
		}
	}
	return q, nil
}

// The 404s of an unknown (or unreadable) {tracking_id} and {user_id}.
var (
	errUnknownTrackingID = apierror.NotFound.With("unknown tracking_id")
	errUnknownUserID     = apierror.NotFound.With("unknown user_id")
)

// pathTrackingID reads the request's {tracking_id}: errUnknownTrackingID when it cannot name one.
func pathTrackingID(r *http.Request) (string, error) {
	id, ok := trackingIDParam(chi.URLParam(r, "tracking_id"))
	if !ok {
		return "", errUnknownTrackingID
	}
	return id, nil
}

// pathUserID reads the request's {user_id}: errUnknownUserID when it cannot name one.
func pathUserID(r *http.Request) (string, error) {
	userID, ok := userIDParam(chi.URLParam(r, "user_id"))
	if !ok {
		return "", errUnknownUserID
	}
	return userID, nil
}

// unknownAs maps the store's ErrNotFound to notFound, the path's 404; other errors (nil included) stay.
func unknownAs(err, notFound error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound
	}
	return err
}
