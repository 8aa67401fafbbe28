package ingress

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// cancelNotification is POST /v1/notifications/{tracking_id}/cancel: 200 with the notification, now
// cancelled, or 409 not_cancellable naming the state it is in (delivering, or terminal).
func (a *API) cancelNotification(w http.ResponseWriter, r *http.Request) error {
	id, err := pathTrackingID(r)
	if err != nil {
		return err
	}
	v, err := a.store.CancelNotification(r.Context(), principalOf(r.Context()).TenantID, id)
	var nc *store.NotCancellable
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errUnknownTrackingID
	case errors.As(err, &nc):
		return apierror.NotCancellable.With("%s", nc.Error())
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, v.Resource())
	return nil
}

// deleteMessage is DELETE /v1/notifications/{tracking_id}/message (spec v1-extensions §13): 202 with the
// notification once its deletion is recorded (the workers delete the message within seconds, then set
// message_deleted_at and emit notification.message_deleted); 409 not_deletable with the reason otherwise.
func (a *API) deleteMessage(w http.ResponseWriter, r *http.Request) error {
	id, err := pathTrackingID(r)
	if err != nil {
		return err
	}
	v, err := a.store.RequestMessageDelete(r.Context(), principalOf(r.Context()).TenantID, id)
	var nd *store.NotDeletable
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errUnknownTrackingID
	case errors.As(err, &nd):
		return apierror.NotDeletable.With("%s", nd.Reason)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusAccepted, v.Resource())
	return nil
}

type listResponse struct {
	Data       []notification.Resource `json:"data"`
	NextCursor *string                 `json:"next_cursor"`
}

// listParams are the query parameters of GET /v1/notifications; any other is refused, as unknown body
// fields are: a misspelt filter must not silently list everything.
var listParams = []string{"status", "user_id", "created_after", "created_before", "limit", "cursor"}

// listNotifications is GET /v1/notifications: the tenant's notifications, newest first, a page at a time
// (store.ListNotifications: keyset pagination on an index that starts with the tenant).
func (a *API) listNotifications(w http.ResponseWriter, r *http.Request) error {
	f, limit, cursor, err := listQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	page, next, err := a.store.ListNotifications(r.Context(), principalOf(r.Context()).TenantID, f, limit, cursor)
	if err != nil {
		return err
	}
	out := listResponse{Data: make([]notification.Resource, len(page))}
	for i, v := range page {
		out.Data[i] = v.Resource()
	}
	if next != nil {
		c := next.Encode(f)
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listQuery reads GET /v1/notifications' query string: only the known parameters, each at most once.
// Every refusal is invalid_request (FuzzListQuery).
func listQuery(raw string) (store.ListFilter, int, *store.ListCursor, error) {
	q, err := strictQuery(raw, listParams)
	if err != nil {
		return store.ListFilter{}, 0, nil, err
	}
	return parseListQuery(q)
}

// truncate shortens what a message quotes of the caller's input.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// parseListQuery validates the filters, the page size and the cursor of a listing.
func parseListQuery(q url.Values) (store.ListFilter, int, *store.ListCursor, error) {
	var f store.ListFilter
	if s := q.Get("status"); q.Has("status") {
		for _, name := range strings.Split(s, ",") {
			st, ok := notification.ParseStatus(strings.TrimSpace(name))
			if !ok {
				return f, 0, nil, apierror.InvalidRequest.With("status %q is not a notification state (%s)", truncate(name, 64), statesList())
			}
			f.Statuses = append(f.Statuses, st)
		}
	}
	if q.Has("user_id") {
		f.UserID = q.Get("user_id")
		if err := validUserID(f.UserID); err != nil {
			return f, 0, nil, err
		}
	}
	var err error
	if f.CreatedAfter, err = queryTimestamp(q, "created_after"); err != nil {
		return f, 0, nil, err
	}
	if f.CreatedBefore, err = queryTimestamp(q, "created_before"); err != nil {
		return f, 0, nil, err
	}
	limit := store.DefaultListLimit
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || !integerLiteral.MatchString(q.Get("limit")) || n < 1 || n > store.MaxListLimit {
			return f, 0, nil, apierror.InvalidRequest.With("limit must be an integer 1-%d", store.MaxListLimit)
		}
		limit = n
	}
	var cursor *store.ListCursor
	if q.Has("cursor") {
		c, err := store.DecodeListCursor(q.Get("cursor"), f)
		if err != nil {
			return f, 0, nil, apierror.InvalidRequest.With("cursor is not one this listing handed out (with the same filters): %v", err)
		}
		cursor = &c
	}
	return f, limit, cursor, nil
}

// queryTimestamp reads an optional RFC 3339 query parameter.
func queryTimestamp(q url.Values, name string) (*time.Time, error) {
	if !q.Has(name) {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, q.Get(name))
	if err != nil {
		return nil, apierror.InvalidRequest.With("%s must be an RFC 3339 timestamp, like 2026-01-02T15:04:05Z", name)
	}
	return &t, nil
}

// statesList names every notification state, for messages.
func statesList() string {
	names := make([]string, len(notification.Statuses))
	for i, st := range notification.Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
