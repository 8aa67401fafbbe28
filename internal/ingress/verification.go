package ingress

import (
	"context"
	"errors"
	"net/http"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/dispatch"
	"github.com/heraldhq/herald/internal/messenger"
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
// queued as a system message (high topic) in the same transaction.
func (a *API) startVerification(w http.ResponseWriter, r *http.Request) error {
	userID, err := decodeUser(w, r)
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	d := dispatch.Dispatcher{Store: a.store, Producer: a.producer, Timeout: a.opts.ProduceTimeout}
	prompt := func(chatID int64) store.NewNotification {
		return d.Notification(dispatch.Message{TenantID: p.TenantID, ChatID: chatID,
			Body: brand.Render(p.Label, VerificationPromptText), ReplyMarkup: contactKeyboard})
	}
	expires, publishErr, err := a.store.StartVerification(r.Context(), p.TenantID, userID, p.Label, prompt, func(ctx context.Context, n store.NewNotification) error {
		return d.Publisher(n)(ctx)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierror.NotFound.With("user %q has no messenger link for this tenant", userID)
	case err != nil:
		return err
	}
	if publishErr != nil {
		// The session is pending and the prompt stored: the relay sends it once the broker is back.
		a.log.Warn("verification prompt not published yet; the relay will publish it", "err", publishErr, "tenant_id", p.TenantID)
	}
	writeJSON(w, http.StatusAccepted, startVerificationResponse{UserID: userID, Status: "pending", ExpiresAt: timestamp(expires)})
	return nil
}
