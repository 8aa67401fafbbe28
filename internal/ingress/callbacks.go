package ingress

// Status callback endpoints (spec v1-extensions §7): POST/GET /v1/callbacks, DELETE /v1/callbacks/{id},
// POST /v1/callbacks/{id}/rotate-secret and /test. The secret is generated here, shown once (on creation
// and rotation) and stored sealed under HERALD_CALLBACK_SECRET_KEY. Sending is internal/callback's.

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
)

type callbackRequest struct {
	URL    *string  `json:"url"`
	Events []string `json:"events"`
}

// callbackEndpoint is an endpoint in GET /v1/callbacks: the contract's fields, and when its last attempt
// succeeded and failed.
type callbackEndpoint struct {
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	Events        []string `json:"events"`
	CreatedAt     string   `json:"created_at"`
	LastSuccessAt *string  `json:"last_success_at"`
	LastFailureAt *string  `json:"last_failure_at"`
}

type createdCallback struct {
	ID        string   `json:"id"`
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	CreatedAt string   `json:"created_at"`
	Secret    string   `json:"secret"`
}

type rotatedSecret struct {
	Secret string `json:"secret"`
}

var errCallbacksOff = apierror.Unavailable.With("status callbacks are not configured on this server")

// createCallback is POST /v1/callbacks.
func (a *API) createCallback(w http.ResponseWriter, r *http.Request) error {
	if a.opts.CallbackKey == nil {
		return errCallbacksOff
	}
	var req callbackRequest
	if err := decodeObject(w, r, &req); err != nil {
		return err
	}
	if req.URL == nil {
		return apierror.InvalidRequest.With("url is required")
	}
	u, err := a.opts.CallbackPolicy.CheckURL(*req.URL)
	if err != nil {
		return apierror.InvalidRequest.With("%v", err)
	}
	events, err := eventList(req.Events)
	if err != nil {
		return err
	}
	// One URL is one endpoint: registering it again (a script run twice) answers the endpoint there is, 200
	// without its secret (shown only at creation; rotate for a new one), instead of a second endpoint that
	// would get every event twice; with other events it is 409 naming the endpoint, to change deliberately.
	tenant := principalOf(r.Context()).TenantID
	existing, err := a.store.ListCallbackEndpoints(r.Context(), tenant)
	if err != nil {
		return err
	}
	for _, e := range existing {
		if e.URL != u.String() {
			continue
		}
		if !slices.Equal(e.Events, events) {
			return apierror.EndpointExists.With("%s is registered already, as endpoint %s with other events (%s): delete it first to register it with these", e.URL, e.ID, strings.Join(e.Events, ", "))
		}
		writeJSON(w, http.StatusOK, callbackEndpoint{
			ID: e.ID, URL: e.URL, Events: e.Events, CreatedAt: timestamp(e.CreatedAt),
			LastSuccessAt: optionalTimestamp(e.LastSuccessAt), LastFailureAt: optionalTimestamp(e.LastFailureAt),
		})
		return nil
	}
	id := uuid.NewString()
	secret := signing.NewSecret()
	e, err := a.store.CreateCallbackEndpoint(r.Context(), store.CallbackEndpoint{
		ID: id, TenantID: tenant, URL: u.String(), Events: events,
	}, a.opts.CallbackKey.Seal(secret, id))
	if errors.Is(err, store.ErrLimitReached) {
		return apierror.LimitReached.With("a tenant may have at most %d callback endpoints; delete one first", store.MaxCallbackEndpoints)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, createdCallback{
		ID: e.ID, URL: e.URL, Events: e.Events, CreatedAt: timestamp(e.CreatedAt), Secret: secret.Reveal(),
	})
	return nil
}

// eventList validates the events of a request: absent or null means every event; otherwise a non-empty
// list of the contract's event types, kept in the contract's order without repeats.
func eventList(given []string) ([]string, error) {
	if given == nil {
		return store.EventTypes, nil
	}
	if len(given) == 0 {
		return nil, apierror.InvalidRequest.With("events must name at least one event; leave it out for every event")
	}
	for _, e := range given {
		if !slices.Contains(store.EventTypes, e) {
			return nil, apierror.InvalidRequest.With("events: unknown event %q; the events are %s", e, strings.Join(store.EventTypes, ", "))
		}
	}
	var out []string
	for _, e := range store.EventTypes {
		if slices.Contains(given, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// listCallbacks is GET /v1/callbacks.
func (a *API) listCallbacks(w http.ResponseWriter, r *http.Request) error {
	es, err := a.store.ListCallbackEndpoints(r.Context(), principalOf(r.Context()).TenantID)
	if err != nil {
		return err
	}
	out := struct {
		Data []callbackEndpoint `json:"data"`
	}{Data: []callbackEndpoint{}}
	for _, e := range es {
		out.Data = append(out.Data, callbackEndpoint{
			ID: e.ID, URL: e.URL, Events: e.Events, CreatedAt: timestamp(e.CreatedAt),
			LastSuccessAt: optionalTimestamp(e.LastSuccessAt), LastFailureAt: optionalTimestamp(e.LastFailureAt),
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// endpointID reads {id}: a malformed id cannot name an endpoint, so it is not_found like an unknown one
// or another tenant's.
func endpointID(r *http.Request) (string, error) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		return "", errUnknownEndpoint
	}
	return id.String(), nil
}

var errUnknownEndpoint = apierror.NotFound.With("unknown callback endpoint")

// notFound maps the store's ErrNotFound to the endpoint's 404.
func notFound(err error) error { return unknownAs(err, errUnknownEndpoint) }

// deleteCallback is DELETE /v1/callbacks/{id}: the endpoint goes with its events, sent or not.
func (a *API) deleteCallback(w http.ResponseWriter, r *http.Request) error {
	id, err := endpointID(r)
	if err != nil {
		return err
	}
	if err := a.store.DeleteCallbackEndpoint(r.Context(), principalOf(r.Context()).TenantID, id); err != nil {
		return notFound(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rotateCallbackSecret is POST /v1/callbacks/{id}/rotate-secret: a new secret, shown once; the old one
// signs beside it for store.SecretOverlap (24 hours).
func (a *API) rotateCallbackSecret(w http.ResponseWriter, r *http.Request) error {
	if a.opts.CallbackKey == nil {
		return errCallbacksOff
	}
	id, err := endpointID(r)
	if err != nil {
		return err
	}
	secret := signing.NewSecret()
	if err := a.store.RotateCallbackSecret(r.Context(), principalOf(r.Context()).TenantID, id,
		a.opts.CallbackKey.Seal(secret, id), store.SecretOverlap); err != nil {
		return notFound(err)
	}
	writeJSON(w, http.StatusOK, rotatedSecret{Secret: secret.Reveal()})
	return nil
}

// testCallback is POST /v1/callbacks/{id}/test: a ping event for the endpoint, sent like any other.
func (a *API) testCallback(w http.ResponseWriter, r *http.Request) error {
	id, err := endpointID(r)
	if err != nil {
		return err
	}
	if err := a.store.EnqueuePing(r.Context(), principalOf(r.Context()).TenantID, id); err != nil {
		return notFound(err)
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}
