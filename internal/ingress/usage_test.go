package ingress_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"
)

type usageRow struct {
	PeriodStart   time.Time `json:"period_start"`
	Accepted      int64     `json:"accepted"`
	Delivered     int64     `json:"delivered"`
	Cancelled     int64     `json:"cancelled"`
	Edited        int64     `json:"edited"`
	PaidBroadcast int64     `json:"paid_broadcast"`
}

func (e *env) usage(key, query string) []usageRow {
	e.t.Helper()
	r := e.do("GET", "/v1/usage"+query, key, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /v1/usage%s: %d %s", query, r.status, r.body)
	}
	var page struct {
		Data []usageRow `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		e.t.Fatal(err)
	}
	return page.Data
}

// GET /v1/usage answers the caller's tenant's counts, kept as its sends (single, idempotent, batched) were
// accepted and cancelled: one period of today by default, the current hour by hour, nothing outside the
// window and nothing of another tenant's.
func TestUsageCountsWhatTheTenantSent(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	other := e.tenant("globex", "Globex", nil)
	var ids []string
	for range 3 {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"})
		if r.status != http.StatusAccepted {
			t.Fatalf("send: %d %s", r.status, r.body)
		}
		ids = append(ids, r.json(t)["tracking_id"].(string))
	}
	// A replay of an idempotent send stores nothing more; a batch counts each item it stored, not the one
	// it refused (a user without a verified phone).
	for range 2 {
		if r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "once"}, "Idempotency-Key", "k1"); r.status != http.StatusAccepted {
			t.Fatalf("idempotent send: %d %s", r.status, r.body)
		}
	}
	batch := map[string]any{"notifications": []any{map[string]any{"user_id": "u1", "message": "a"},
		map[string]any{"user_id": "u1", "message": "b"}, map[string]any{"user_id": "nobody", "message": "c"}}}
	if r := e.do("POST", "/v1/send/batch", key, batch); r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/notifications/"+ids[0]+"/cancel", key, nil); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	now := time.Now().UTC()
	days := e.usage(key, "")
	if len(days) != 1 || !days[0].PeriodStart.Equal(now.Truncate(24*time.Hour)) || days[0].Accepted != 6 || days[0].Cancelled != 1 ||
		days[0].Delivered != 0 || days[0].Edited != 0 {
		t.Errorf("by day: %+v, want today with 6 accepted (3 sends, 1 idempotent twice, 2 of a batch) and 1 cancelled", days)
	}
	hours := e.usage(key, "?granularity=hour")
	if len(hours) != 1 || !hours[0].PeriodStart.Equal(now.Truncate(time.Hour)) || hours[0].Accepted != 6 {
		t.Errorf("by hour: %+v, want this hour with 6 accepted", hours)
	}
	before := url.Values{"from": {now.Add(-72 * time.Hour).Format(time.RFC3339)}, "to": {now.Add(-48 * time.Hour).Format(time.RFC3339)}}
	if got := e.usage(key, "?"+before.Encode()); len(got) != 0 {
		t.Errorf("a window two days ago: %+v, want no period", got)
	}
	if got := e.usage(other, ""); len(got) != 0 {
		t.Errorf("another tenant's usage: %+v, want nothing", got)
	}
}

// Bad input is invalid_request, with a message.
func TestUsageRefusesABadWindow(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	for _, q := range []string{
		"?from=yesterday",
		"?to=2026-01-01",
		"?granularity=week",
		"?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z",
		"?from=2025-01-01T00:00:00Z&to=2026-02-06T00:00:00Z",
		"?tenant=other",
		"?granularity=day&granularity=hour",
	} {
		t.Run(q, func(t *testing.T) {
			expectError(t, e.do("GET", "/v1/usage"+q, key, nil), http.StatusBadRequest, "invalid_request")
		})
	}
}
