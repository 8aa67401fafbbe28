package ingress

// Quiet hours at the door (spec v1-extensions §14): the send option quiet_hours, and the hold decided at
// acceptance — a send that would be delivered inside its tenant's window (mode hold) is stored scheduled
// with send_at at the window's end, so that its 202 and its resource say so at once. The worker decides
// again when the notification's turn comes (internal/delivery/send: a retry, a backlog, a user whose zone
// changed, hours set later), so this is the early answer, not the only guard.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/quiet"
	"github.com/heraldhq/herald/internal/store"
)

// QuietIgnoreFromPriority is the priority from which a send ignores quiet hours unless it says "respect".
const QuietIgnoreFromPriority = 7

// The values of the send option quiet_hours.
const (
	quietRespect = "respect"
	quietIgnore  = "ignore"
)

// parseQuietHours reads the option: absent or null takes the priority's default. It returns whether the
// send ignores quiet hours, and the value as given ("" when absent) for the request's meaning.
func parseQuietHours(raw json.RawMessage, priority int) (ignore bool, given string, err error) {
	if absent(raw) {
		return priority >= QuietIgnoreFromPriority, "", nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil || (s != quietRespect && s != quietIgnore) {
		return false, "", apierror.InvalidRequest.With(`quiet_hours must be "respect" or "ignore"`)
	}
	return s == quietIgnore, s, nil
}

// holdForQuietHours moves the send_at of the items that would be delivered inside the tenant's quiet
// hours (mode hold) to the window's end, read in each user's time_zone or else the tenant's zone: at
// their send_at when it is ahead, else now. The users' zones, only when the tenant holds, come from the zone
// cache.
func (a *API) holdForQuietHours(ctx context.Context, p store.Principal, items []outbox.Item, now time.Time) error {
	h := p.Quiet
	if h == nil || h.Mode != quiet.Hold {
		return nil
	}
	var users []string
	for _, it := range items {
		if holdable(it) {
			users = append(users, it.UserID)
		}
	}
	if len(users) == 0 {
		return nil
	}
	// The users' zones from the zone cache (zonecache.go: within UserZonesTTL of a change elsewhere; the
	// worker decides again at the claim with the zone it reads then); per request for a tenant past its cap.
	zones, cached, err := a.zones.zonesOf(ctx, p.TenantID, users)
	if err == nil && !cached {
		zones, err = a.store.UserTimeZones(ctx, p.TenantID, users)
	}
	if err != nil {
		return err
	}
	for i := range items {
		it := &items[i]
		if !holdable(*it) {
			continue
		}
		at := now
		if it.SendAt != nil && it.SendAt.After(now) {
			at = *it.SendAt
		}
		if until, inside := h.Until(at, h.Location(zones[it.UserID])); inside {
			until = until.UTC()
			it.SendAt = &until
		}
	}
	return nil
}

// holdable: an item the door may hold for quiet hours. A digest's item is not: the worker holds the whole
// digest when it gathers it inside the window.
func holdable(it outbox.Item) bool { return it.Refused == nil && !it.QuietIgnore && it.Digest == nil }
