package ingress

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/server"
)

var writeJSON = server.WriteJSON

// timestamp and optionalTimestamp render times as every answer does.
var (
	timestamp         = notification.Timestamp
	optionalTimestamp = notification.OptionalTimestamp
)

// status is GET /v1/status/{tracking_id}. A malformed id cannot name a notification, so it is not_found
// like an unknown one or another tenant's.
func (a *API) status(w http.ResponseWriter, r *http.Request) error {
	id, err := pathTrackingID(r)
	if err != nil {
		return err
	}
	v, err := a.store.GetNotification(r.Context(), principalOf(r.Context()).TenantID, id)
	if err != nil {
		return unknownAs(err, errUnknownTrackingID)
	}
	writeJSON(w, http.StatusOK, v.Resource())
	return nil
}

type linkTokenResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
	DeepLink  string `json:"deep_link"`
}

// linkToken is POST /v1/link-token: 32 random bytes, base64url (43 characters, within the platform's
// 64-character start parameter); only the digest is stored, with the label snapshot. The deep link names
// the bot the token links through: the tenant's own, or the shared one (Options.BotUsername).
func (a *API) linkToken(w http.ResponseWriter, r *http.Request) error {
	userID, err := decodeUser(w, r)
	if err != nil {
		return err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	p := principalOf(r.Context())
	issued, err := a.store.IssueLinkToken(r.Context(), p.TenantID, userID, sha256.Sum256([]byte(token)), p.Label)
	if err != nil {
		return err
	}
	// The deep link opens the tenant's own bot when it has one (spec §11): the token links only there.
	username := a.opts.BotUsername
	if issued.BotUsername != "" {
		username = issued.BotUsername
	}
	writeJSON(w, http.StatusCreated, linkTokenResponse{
		Token:     token,
		ExpiresAt: timestamp(issued.ExpiresAt),
		DeepLink:  a.opts.DeepLinkBase + "/" + username + "?start=" + token,
	})
	return nil
}

type verificationResponse struct {
	UserID     string          `json:"user_id"`
	Status     string          `json:"status"`
	VerifiedAt *string         `json:"verified_at"`
	PhoneLast4 *string         `json:"phone_last4"`
	UpdatedAt  string          `json:"updated_at"`
	Prompt     *promptResponse `json:"prompt"`
}

// promptResponse is the delivery of the latest session's prompt: a start answers 202 before the prompt is
// sent, so this is where a tenant reads that it never arrived (the user blocked the bot: blocked, 403).
type promptResponse struct {
	Status           string  `json:"status"`
	LastErrorCode    int     `json:"last_error_code"`
	LastErrorMessage *string `json:"last_error_message"`
	UpdatedAt        string  `json:"updated_at"`
}

// verificationStatus is GET /v1/phone-verification/status/{user_id}.
func (a *API) verificationStatus(w http.ResponseWriter, r *http.Request) error {
	userID, err := pathUserID(r)
	if err != nil {
		return err
	}
	v, err := a.store.GetVerification(r.Context(), principalOf(r.Context()).TenantID, userID)
	if err != nil {
		return unknownAs(err, errUnknownUserID)
	}
	res := verificationResponse{
		UserID: v.UserID, Status: string(v.Status), VerifiedAt: optionalTimestamp(v.VerifiedAt), PhoneLast4: v.PhoneLast4,
		UpdatedAt: timestamp(v.UpdatedAt),
	}
	if p := v.Prompt; p != nil {
		res.Prompt = &promptResponse{Status: string(p.Status), LastErrorCode: p.LastErrorCode, LastErrorMessage: p.LastErrorMessage,
			UpdatedAt: timestamp(p.UpdatedAt)}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
