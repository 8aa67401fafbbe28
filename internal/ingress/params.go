package ingress

import (
	"net/url"

	"github.com/google/uuid"
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
