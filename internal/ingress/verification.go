package ingress

import (
	"errors"
	"net/http"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/phone"
	"github.com/heraldhq/herald/internal/store"
)

// VerificationPromptText follows the branding line of the verification prompt.
const VerificationPromptText = "Please verify your phone number: tap \"Share my phone number\" below."

// contactKeyboard is the reply keyboard with one request-contact button that the prompt carries.
var contactKeyboard = messenger.ContactRequestKeyboard("Share my phone number")

type startVerificationResponse struct {
	UserID    string `json:"user_id"`
	Status    string `json:"status"`
	ExpiresAt string `json:"expires_at"`
}

// startVerification is POST /v1/phone-verification/start: pending for 10 minutes, and the branded prompt
// stored as a system message (high topic) in the same transaction, then published.
func (a *API) startVerification(w http.ResponseWriter, r *http.Request) error {
	userID, err := decodeUser(w, r)
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	prompt := func(chatID int64) store.NewNotification {
		return outbox.System(outbox.SystemMessage{TenantID: p.TenantID, ChatID: chatID,
			Body: brand.Render(p.Label, VerificationPromptText), ReplyMarkup: contactKeyboard})
	}
	expires, n, err := a.store.StartVerification(r.Context(), p.TenantID, userID, p.Label, prompt)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierror.NotFound.With("user %q has no messenger link for this tenant", userID)
	case err != nil:
		return err
	}
	// The session is pending and the prompt stored; a prompt the broker does not take now is published by
	// the relay once it can.
	a.outbox.Publish(r.Context(), []store.NewNotification{n})
	writeJSON(w, http.StatusAccepted, startVerificationResponse{UserID: userID, Status: string(phone.Pending), ExpiresAt: timestamp(expires)})
	return nil
}
