package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
)

// SystemPriority is the priority of system messages (prompts, confirmations, replies): the high topic.
const SystemPriority = 9

// VerificationPromptText follows the branding line of the verification prompt.
const VerificationPromptText = "Please verify your phone number: tap \"Share my phone number\" below."

// ContactKeyboard is the reply keyboard with one request-contact button that the prompt carries.
var ContactKeyboard = json.RawMessage(`{"keyboard":[[{"text":"Share my phone number","request_contact":true}]],"one_time_keyboard":true,"resize_keyboard":true}`)

type startVerificationResponse struct {
	UserID    string `json:"user_id"`
	Status    string `json:"status"`
	ExpiresAt string `json:"expires_at"`
}

// startVerification is POST /v1/phone-verification/start: pending for 10 minutes, and the branded prompt
// queued on the high topic in the same transaction.
func (a *API) startVerification(w http.ResponseWriter, r *http.Request) error {
	var req userRequest
	if err := decodeObject(w, r, &req); err != nil {
		return err
	}
	userID, err := userIDField(req.UserID)
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	produceFailed := false
	prompt := func(chatID int64) store.NewNotification {
		return store.NewNotification{
			TrackingID: uuid.Must(uuid.NewV7()).String(), Kind: store.KindSystem, TenantID: p.TenantID, ChatID: chatID,
			Priority: SystemPriority, Body: brand.Render(p.Label, VerificationPromptText), ReplyMarkup: ContactKeyboard,
		}
	}
	expires, err := a.store.StartVerification(r.Context(), p.TenantID, userID, p.Label, prompt, func(ctx context.Context, n store.NewNotification) error {
		ctx, cancel := context.WithTimeout(ctx, a.opts.ProduceTimeout)
		defer cancel()
		err := a.producer.Publish(ctx, n.Priority, queue.ChatKey(n.ChatID), queue.Envelope{V: queue.EnvelopeVersion, TrackingID: n.TrackingID, TenantID: p.TenantID})
		produceFailed = err != nil
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierror.NotFound.With("user %q has no messenger link for this tenant", userID)
	case produceFailed:
		a.log.Warn("enqueue of verification prompt failed", "err", err, "tenant_id", p.TenantID)
		return apierror.QueueError
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusAccepted, startVerificationResponse{UserID: userID, Status: "pending", ExpiresAt: timestamp(expires)})
	return nil
}
