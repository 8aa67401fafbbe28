package ingress

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/store"
)

// auditParams are the query parameters of GET /v1/audit-events; any other is refused.
var auditParams = []string{"type", "limit", "cursor"}

// auditEvent is one event of GET /v1/audit-events: without the tenant (the caller's).
type auditEvent struct {
	ID      int64          `json:"id"`
	Type    audit.Type     `json:"type"`
	Actor   string         `json:"actor"`
	Target  string         `json:"target"`
	At      string         `json:"at"`
	Details map[string]any `json:"details"`
}

type auditList struct {
	Data       []auditEvent `json:"data"`
	NextCursor *string      `json:"next_cursor"`
}

// listAuditEvents is GET /v1/audit-events (v1 extensions §15): the caller's tenant's audit trail, newest
// first, filtered by type (comma-separated, as §4's status), paged by limit and an opaque cursor bound to
// the filter.
func (a *API) listAuditEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := strictQuery(r.URL.RawQuery, auditParams)
	if err != nil {
		return err
	}
	var types []audit.Type
	if q.Has("type") {
		for _, name := range strings.Split(q.Get("type"), ",") {
			t, ok := audit.ParseType(strings.TrimSpace(name))
			if !ok {
				return apierror.InvalidRequest.With("type %q is not an audit event type (%s)", truncate(name, 64), audit.TypeNames())
			}
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
		// One filter, one cursor: the order the types were named in does not matter.
		slices.Sort(types)
	}
	limit := store.DefaultListLimit
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || !integerLiteral.MatchString(q.Get("limit")) || n < 1 || n > store.MaxListLimit {
			return apierror.InvalidRequest.With("limit must be an integer 1-%d", store.MaxListLimit)
		}
		limit = n
	}
	var cursor *store.AuditCursor
	if q.Has("cursor") {
		c, err := store.DecodeAuditCursor(q.Get("cursor"), types)
		if err != nil {
			return apierror.InvalidRequest.With("cursor is not one this listing handed out (with the same filters): %v", err)
		}
		cursor = &c
	}
	events, next, err := a.store.AuditEvents(r.Context(), principalOf(r.Context()).TenantID, types, limit, cursor)
	if err != nil {
		return err
	}
	out := auditList{Data: make([]auditEvent, len(events))}
	for i, e := range events {
		out.Data[i] = auditEvent{ID: e.ID, Type: e.Type, Actor: e.Actor, Target: e.Target, At: timestamp(e.At), Details: e.Details}
	}
	if next != nil {
		c := next.Encode(types)
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
