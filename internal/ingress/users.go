package ingress

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
)

type userResponse struct {
	UserID            string  `json:"user_id"`
	Linked            bool    `json:"linked"`
	LinkedAt          *string `json:"linked_at"`
	PhoneVerification string  `json:"phone_verification"`
	VerifiedAt        *string `json:"verified_at"`
	PhoneLast4        *string `json:"phone_last4"`
}

// getUser is GET /v1/users/{user_id}: what Herald knows of the user for this tenant, never the chat id or
// the phone number.
func (a *API) getUser(w http.ResponseWriter, r *http.Request) error {
	userID, ok := userIDParam(chi.URLParam(r, "user_id"))
	if !ok {
		return apierror.NotFound.With("unknown user_id")
	}
	u, err := a.store.GetUser(r.Context(), principalOf(r.Context()).TenantID, userID)
	if errors.Is(err, store.ErrNotFound) {
		return apierror.NotFound.With("unknown user_id")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userResponse{
		UserID: u.UserID, Linked: u.LinkedAt != nil, LinkedAt: optionalTimestamp(u.LinkedAt),
		PhoneVerification: u.PhoneVerification, VerifiedAt: optionalTimestamp(u.VerifiedAt), PhoneLast4: u.PhoneLast4,
	})
	return nil
}

// eraseUser is DELETE /v1/users/{user_id}: the user's link, phone digest and last four digits, link tokens,
// verification sessions, notification bodies and messenger identifiers, the tenant's system messages to the
// user's chat and the user's callback events are erased in one transaction, and the notifications still
// waiting are cancelled (store.EraseUser). 204, or 404 when there was nothing to erase.
//
// The log line names the tenant, the request and the counts, never the user: a tenant's user id may be
// personal data (an e-mail address, a phone number), and even a hash of it can be reversed by guessing.
// The tenant knows whom it erased; the request id ties the line to its call.
func (a *API) eraseUser(w http.ResponseWriter, r *http.Request) error {
	userID, ok := userIDParam(chi.URLParam(r, "user_id"))
	if !ok {
		return apierror.NotFound.With("unknown user_id")
	}
	p := principalOf(r.Context())
	e, err := a.store.EraseUser(r.Context(), p.TenantID, userID)
	if errors.Is(err, store.ErrNotFound) {
		return apierror.NotFound.With("nothing to erase for this user_id")
	}
	if err != nil {
		return err
	}
	a.log.Info("user erased", "tenant_id", p.TenantID, "request_id", server.RequestID(r.Context()),
		"notifications_cancelled", e.Cancelled, "notifications_erased", e.Erased, "system_messages_deleted", e.SystemMessages,
		"callback_events_erased", e.Events)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
