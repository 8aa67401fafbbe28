package ingress

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/consent"
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
	// v1 extensions §9: an opt-out of the whole tenant, those of single categories, and the bot blocked.
	OptedOut           bool     `json:"opted_out"`
	OptedOutCategories []string `json:"opted_out_categories"`
	Blocked            bool     `json:"blocked"`
	// v1 extensions §12: what the tenant set, and the language the messenger reported for the user's chat.
	Locale            *string `json:"locale"`
	MessengerLanguage *string `json:"messenger_language"`
	TimeZone          *string `json:"time_zone"`
}

func userResource(u store.User) userResponse {
	return userResponse{
		UserID: u.UserID, Linked: u.LinkedAt != nil, LinkedAt: optionalTimestamp(u.LinkedAt),
		PhoneVerification: u.PhoneVerification, VerifiedAt: optionalTimestamp(u.VerifiedAt), PhoneLast4: u.PhoneLast4,
		OptedOut: u.OptedOut, OptedOutCategories: u.OptedOutCategories, Blocked: u.Blocked,
		Locale: u.Locale, MessengerLanguage: u.MessengerLanguage, TimeZone: u.TimeZone,
	}
}

// patchUserRequest is PATCH /v1/users/{user_id}: each field optional, null clears it.
type patchUserRequest struct {
	Locale   json.RawMessage `json:"locale"`
	TimeZone json.RawMessage `json:"time_zone"`
}

// patchUser is PATCH /v1/users/{user_id} (§12): the user's locale (a language tag) and time zone (an IANA
// name the zone database knows), for a user linked or not yet.
func (a *API) patchUser(w http.ResponseWriter, r *http.Request) error {
	userID, ok := userIDParam(chi.URLParam(r, "user_id"))
	if !ok {
		return apierror.InvalidRequest.With("user_id must be 1-%d characters, without control characters", MaxUserIDLength)
	}
	var req patchUserRequest
	if err := decodeObject(w, r, &req); err != nil {
		return err
	}
	var set store.UserSettings
	var err error
	if set.SetLocale, set.Locale, err = optionalString(req.Locale, "locale", func(s string) bool { return localeTag.MatchString(s) },
		"a language tag, like en, pt-br or zh-Hant-TW"); err != nil {
		return err
	}
	if set.SetTimeZone, set.TimeZone, err = optionalString(req.TimeZone, "time_zone", validTimeZone,
		"an IANA time zone name, like Europe/Berlin"); err != nil {
		return err
	}
	tenant := principalOf(r.Context()).TenantID
	u, zonesVersion, err := a.store.SetUserSettings(r.Context(), tenant, userID, set)
	if err != nil {
		return err
	}
	if zonesVersion != 0 {
		// This replica's next send renders in the new zone at once (zonecache.go).
		a.zones.changed(tenant, userID, deref(set.TimeZone), zonesVersion)
	}
	writeJSON(w, http.StatusOK, userResource(u))
	return nil
}

// optionalString reads a PATCH field: absent (not set), null (set to nil) or a string that valid accepts.
func optionalString(raw json.RawMessage, field string, valid func(string) bool, what string) (bool, *string, error) {
	if len(raw) == 0 {
		return false, nil, nil
	}
	if string(raw) == "null" {
		return true, nil, nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil || !valid(s) {
		return false, nil, apierror.InvalidRequest.With("%s must be %s, or null", field, what)
	}
	return true, &s, nil
}

// validTimeZone: a name of the zone database (embedded in the binary: cmd/herald imports time/tzdata).
// "Local" and "" are names time.LoadLocation accepts that are not IANA zones.
func validTimeZone(s string) bool {
	if s == "" || s == "Local" || len(s) > 64 {
		return false
	}
	_, err := time.LoadLocation(s)
	return err == nil
}

// getUser is GET /v1/users/{user_id}: what Herald knows of the user for this tenant, never the chat id or
// the phone number.
func (a *API) getUser(w http.ResponseWriter, r *http.Request) error {
	userID, err := pathUserID(r)
	if err != nil {
		return err
	}
	u, err := a.store.GetUser(r.Context(), principalOf(r.Context()).TenantID, userID)
	if err != nil {
		return unknownAs(err, errUnknownUserID)
	}
	writeJSON(w, http.StatusOK, userResource(u))
	return nil
}

// eraseUser is DELETE /v1/users/{user_id}: the user's link, phone digest and last four digits, link tokens,
// verification sessions, opt-outs and callback events are erased in one short transaction; the user's
// notifications are cancelled (those still waiting) and emptied of their bodies and messenger identifiers
// after it, the newest 1,000 before the answer and the rest by the workers' sweep, none of them sent
// meanwhile (store.EraseUser; issue 35). 204, or 404 when there was nothing to erase.
//
// The log line names the tenant, the request and the counts, never the user: a tenant's user id may be
// personal data (an e-mail address, a phone number), and even a hash of it can be reversed by guessing.
// The tenant knows whom it erased; the request id ties the line to its call.
func (a *API) eraseUser(w http.ResponseWriter, r *http.Request) error {
	userID, err := pathUserID(r)
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	e, err := a.store.EraseUser(r.Context(), p.TenantID, userID)
	if errors.Is(err, store.ErrNotFound) {
		return apierror.NotFound.With("nothing to erase for this user_id")
	}
	if err != nil {
		return err
	}
	if e.ZonesVersion != 0 {
		a.zones.changed(p.TenantID, userID, "", e.ZonesVersion)
	}
	a.log.Info("user erased", "tenant_id", p.TenantID, "request_id", server.RequestID(r.Context()),
		"notifications_cancelled", e.Cancelled, "notifications_erased", e.Erased, "notifications_pending", e.Pending,
		"system_messages_deleted", e.SystemMessages, "callback_events_erased", e.Events)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// optOutRequest is the optional body of POST and DELETE /v1/users/{user_id}/opt-out: no body, or a null or
// absent category, means the whole tenant.
type optOutRequest struct {
	Category *string `json:"category"`
}

// optOutTarget reads the user and the category of an opt-out route ("" for the whole tenant).
func optOutTarget(w http.ResponseWriter, r *http.Request) (userID, category string, err error) {
	userID, err = pathUserID(r)
	if err != nil {
		return "", "", err
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return userID, "", nil
	}
	var req optOutRequest
	if err := decodeObject(w, r, &req); err != nil {
		return "", "", err
	}
	if req.Category != nil && !categoryName.MatchString(*req.Category) {
		return "", "", apierror.InvalidRequest.With("category must be 1-40 characters of a-z0-9_.-")
	}
	if req.Category != nil {
		category = *req.Category
	}
	return userID, category, nil
}

// optOut is POST /v1/users/{user_id}/opt-out: the tenant opts its user out of its notifications, or of one
// category (v1 extensions §9). The user's notifications still waiting that it covers end blocked ("opted
// out"): the first chunk before the 204, the rest after it (store.OptOut); none reaches the platform after
// the 204 (the claim reads the opt-out). 409 limit_reached for a new category opt-out past
// store.MaxCategoryOptOuts. An opt-out the
// user made in the chat stays the user's. 404 for a user the tenant has never seen.
func (a *API) optOut(w http.ResponseWriter, r *http.Request) error {
	userID, category, err := optOutTarget(w, r)
	if err != nil {
		return err
	}
	_, err = a.store.OptOut(r.Context(), principalOf(r.Context()).TenantID, userID, category, consent.ByTenant)
	if errors.Is(err, store.ErrNotFound) {
		return errUnknownUserID
	}
	if errors.Is(err, store.ErrTooManyOptOuts) {
		return apierror.LimitReached.With("a user may have at most %d category opt-outs; opt the user out of all notifications (no category) instead",
			store.MaxCategoryOptOuts)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// liftOptOut is DELETE /v1/users/{user_id}/opt-out: the tenant lifts an opt-out it made (204, also when
// there was none). One the user made in the chat only the user lifts, with /resume: 409 opted_out_by_user —
// a tenant cannot undo its user's own "stop".
func (a *API) liftOptOut(w http.ResponseWriter, r *http.Request) error {
	userID, category, err := optOutTarget(w, r)
	if err != nil {
		return err
	}
	_, err = a.store.LiftOptOut(r.Context(), principalOf(r.Context()).TenantID, userID, category, consent.ByTenant)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errUnknownUserID
	case errors.Is(err, store.ErrOptedOutByUser):
		return apierror.OptedOutByUser
	case err != nil:
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deref is *p, or "" when p is nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
