package ingress_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// The tenant side of v1 extensions §1-§6, over HTTP against a real PostgreSQL and broker.

func ts(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339Nano) }

// metadataOf builds n keys with values of the given length in code points.
func metadataOf(n, valueLen int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = strings.Repeat("é", valueLen)
	}
	return m
}

// §1: each option is validated as the contract says; each limit is accepted exactly and refused one past.
func TestSendOptionsAreValidated(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	cases := []struct {
		name   string
		extra  map[string]any
		status int
		want   string // the answered status for a 202
	}{
		{"no options: queued, as before", map[string]any{}, 202, "queued"},
		{"null options mean absent", map[string]any{"metadata": nil, "send_at": nil, "expires_at": nil}, 202, "queued"},
		{"16 keys of 500 code points", map[string]any{"metadata": metadataOf(16, 500)}, 202, "queued"},
		{"a 40-character key of every allowed character", map[string]any{"metadata": map[string]string{"Az09_.-" + strings.Repeat("x", 33): "v"}}, 202, "queued"},
		{"empty metadata", map[string]any{"metadata": map[string]string{}}, 202, "queued"},
		{"send_at in the past: at once", map[string]any{"send_at": ts(-time.Hour)}, 202, "queued"},
		{"send_at ahead: scheduled", map[string]any{"send_at": ts(time.Minute)}, 202, "scheduled"},
		{"send_at just under 30 days", map[string]any{"send_at": ts(30*24*time.Hour - time.Minute)}, 202, "scheduled"},
		{"send_at with an offset", map[string]any{"send_at": time.Now().Add(time.Hour).In(time.FixedZone("", 5*3600)).Format(time.RFC3339)}, 202, "scheduled"},
		{"expires_at ahead", map[string]any{"expires_at": ts(time.Minute)}, 202, "queued"},
		{"expires_at after send_at", map[string]any{"send_at": ts(time.Minute), "expires_at": ts(2 * time.Minute)}, 202, "scheduled"},
		{"17 keys", map[string]any{"metadata": metadataOf(17, 1)}, 400, ""},
		{"a value of 501 code points", map[string]any{"metadata": metadataOf(1, 501)}, 400, ""},
		{"a 41-character key", map[string]any{"metadata": map[string]string{strings.Repeat("k", 41): "v"}}, 400, ""},
		{"an empty key", map[string]any{"metadata": map[string]string{"": "v"}}, 400, ""},
		{"a key with a space", map[string]any{"metadata": map[string]string{"order id": "v"}}, 400, ""},
		{"a number value", map[string]any{"metadata": map[string]any{"n": 1}}, 400, ""},
		{"a null value", map[string]any{"metadata": map[string]any{"n": nil}}, 400, ""},
		{"metadata an array", map[string]any{"metadata": []string{"a"}}, 400, ""},
		{"metadata a string", map[string]any{"metadata": "a=b"}, 400, ""},
		{"send_at not a timestamp", map[string]any{"send_at": "tomorrow"}, 400, ""},
		{"send_at without a zone", map[string]any{"send_at": time.Now().Add(time.Hour).Format("2006-01-02T15:04:05")}, 400, ""},
		{"send_at a number", map[string]any{"send_at": time.Now().Unix()}, 400, ""},
		{"send_at over 30 days ahead", map[string]any{"send_at": ts(30*24*time.Hour + time.Minute)}, 400, ""},
		{"expires_at in the past", map[string]any{"expires_at": ts(-time.Second)}, 400, ""},
		{"expires_at before send_at", map[string]any{"send_at": ts(2 * time.Minute), "expires_at": ts(time.Minute)}, 400, ""},
		{"expires_at equal to send_at", map[string]any{"send_at": "2099-01-01T00:00:00Z", "expires_at": "2099-01-01T00:00:00Z"}, 400, ""},
		{"expires_at over 30 days ahead", map[string]any{"expires_at": ts(30*24*time.Hour + time.Minute)}, 400, ""},
		{"an unknown option", map[string]any{"send_after": ts(time.Minute)}, 400, ""},
	}
	for _, c := range cases {
		body := map[string]any{"user_id": "u1", "message": "hi"}
		for k, v := range c.extra {
			body[k] = v
		}
		r := e.do("POST", "/v1/send", key, body)
		if c.status == 400 {
			if r.status != 400 {
				t.Errorf("%s: %d %s, want 400", c.name, r.status, r.body)
				continue
			}
			expectError(t, r, 400, "invalid_request")
			continue
		}
		if r.status != 202 || r.json(t)["status"] != c.want || len(r.json(t)) != 2 {
			t.Errorf("%s: %d %s, want 202 %s", c.name, r.status, r.body, c.want)
		}
	}
}

// §1, §2: a scheduled send waits in PostgreSQL, not on Kafka; the resource shows every option, with {}
// and nulls for a send without them.
func TestScheduledSendIsStoredAndNotPublished(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	sendAt, expiresAt := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond), time.Now().Add(2*time.Hour).UTC().Truncate(time.Millisecond)
	r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "later", "priority": 8,
		"send_at": sendAt.Format(time.RFC3339Nano), "expires_at": expiresAt.Format(time.RFC3339Nano),
		"metadata": map[string]string{"order": "42", "campaign": "spring"}})
	if r.status != 202 || r.json(t)["status"] != "scheduled" {
		t.Fatalf("%d %s, want 202 scheduled", r.status, r.body)
	}
	id := r.json(t)["tracking_id"].(string)
	if n := len(e.envelopes("it.notifications.high")) + len(e.envelopes("it.notifications.normal")); n != 0 {
		t.Errorf("%d envelopes on Kafka for a scheduled send", n)
	}
	m := e.do("GET", "/v1/status/"+id, key, nil).json(t)
	md, _ := m["metadata"].(map[string]any)
	if m["status"] != "scheduled" || md["order"] != "42" || md["campaign"] != "spring" || len(md) != 2 ||
		m["send_at"] != sendAt.Format("2006-01-02T15:04:05.000Z") || m["expires_at"] != expiresAt.Format("2006-01-02T15:04:05.000Z") ||
		m["delivered_at"] != nil || m["next_attempt_at"] != nil {
		t.Errorf("status of the scheduled send: %v", m)
	}
	// The worker's states as the resource shows them: next_attempt_at only while retrying, delivered_at
	// once delivered.
	e.fx.SetNotification(t, id, fixture.InState(notification.Retrying), fixture.NextAttemptAt(time.Now().Add(time.Minute)))
	if m := e.do("GET", "/v1/status/"+id, key, nil).json(t); m["next_attempt_at"] == nil {
		t.Errorf("a retrying notification shows no next_attempt_at: %v", m)
	}
	e.fx.SetNotification(t, id, fixture.InState(notification.Delivered), fixture.DeliveredAt(time.Now()))
	if m := e.do("GET", "/v1/status/"+id, key, nil).json(t); m["delivered_at"] == nil || m["next_attempt_at"] != nil {
		t.Errorf("a delivered notification: %v, want delivered_at and no next_attempt_at", m)
	}
}

// §3: 200 with the resource in cancelled for scheduled, queued and retrying; 409 not_cancellable naming
// the state for delivering and every terminal state; 404 for another tenant's, an unknown or a malformed
// id.
func TestCancelAnswersByState(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	other := e.tenant("globex", "Globex", nil)
	for _, state := range []string{"scheduled", "queued", "retrying", "delivering", "delivered", "blocked", "failed", "unlinked", "cancelled", "expired"} {
		id := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}).json(t)["tracking_id"].(string)
		e.fx.SetNotification(t, id, fixture.InState(notification.Status(state)), fixture.Lease(time.Now().Add(time.Minute)))
		expectError(t, e.do("POST", "/v1/notifications/"+id+"/cancel", other, nil), 404, "not_found")
		r := e.do("POST", "/v1/notifications/"+id+"/cancel", key, nil)
		switch state {
		case "scheduled", "queued", "retrying":
			if r.status != 200 || r.json(t)["status"] != "cancelled" || r.json(t)["tracking_id"] != id {
				t.Errorf("cancel of %s: %d %s, want 200 cancelled", state, r.status, r.body)
			}
		default:
			expectError(t, r, 409, "not_cancellable")
			if msg := r.json(t)["message"].(string); !strings.Contains(msg, state) {
				t.Errorf("cancel of %s: message %q does not name the state", state, msg)
			}
		}
	}
	for _, id := range []string{"0190a1b2-0000-7000-8000-000000000000", "not-a-uuid"} {
		expectError(t, e.do("POST", "/v1/notifications/"+id+"/cancel", key, nil), 404, "not_found")
	}
}

// listPage is one GET /v1/notifications.
type listPage struct {
	Data []struct {
		TrackingID string `json:"tracking_id"`
		UserID     string `json:"user_id"`
		Status     string `json:"status"`
		CreatedAt  string `json:"created_at"`
	} `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

func (e *env) list(key, query string) (listPage, response) {
	e.t.Helper()
	r := e.do("GET", "/v1/notifications?"+query, key, nil)
	var p listPage
	if r.status == 200 {
		if err := json.Unmarshal(r.body, &p); err != nil {
			e.t.Fatal(err)
		}
	}
	return p, r
}

// §4: pages of the caller's notifications only, newest first, each exactly once while new ones arrive;
// the default page is 50; filters; validation of every parameter.
func TestListPages(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	other := e.tenant("globex", "Globex", nil)
	e.fx.VerifiedUser(e.t, "acme", "u2", 1002)
	e.fx.VerifiedUser(e.t, "globex", "u1", 2001)
	var mine []string
	for i := range 60 {
		user := []string{"u1", "u2"}[i%2]
		mine = append(mine, e.do("POST", "/v1/send", key, map[string]any{"user_id": user, "message": "hi"}).json(t)["tracking_id"].(string))
		e.do("POST", "/v1/send", other, map[string]any{"user_id": "u1", "message": "theirs"})
	}
	first, r := e.list(key, "")
	if r.status != 200 || len(first.Data) != 50 || first.NextCursor == nil {
		t.Fatalf("default page: %d, %d items, cursor %v; want 50 and a cursor", r.status, len(first.Data), first.NextCursor)
	}
	if first.Data[0].TrackingID != mine[59] {
		t.Errorf("the first item is %s, want the newest %s", first.Data[0].TrackingID, mine[59])
	}

	// Walk in pages of 7 while new notifications arrive (from the first page on): the ones there at the
	// start, exactly once; the new ones sort before the first page.
	seen := map[string]int{}
	var stop sync.WaitGroup
	done := make(chan struct{})
	cursor := ""
	for {
		q := "limit=7"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		p, r := e.list(key, q)
		if r.status != 200 {
			t.Fatalf("page: %d %s", r.status, r.body)
		}
		for _, n := range p.Data {
			seen[n.TrackingID]++
		}
		if cursor == "" {
			stop.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
						e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "new"})
					}
				}
			})
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	close(done)
	stop.Wait()
	for _, id := range mine {
		if seen[id] != 1 {
			t.Errorf("%s listed %d times, want once", id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s listed %d times", id, n)
		}
	}
	if len(seen) != len(mine) {
		t.Errorf("the walk listed %d notifications, want the %d there when it began (newer ones come before its first page)", len(seen), len(mine))
	}

	// Filters.
	if p, _ := e.list(key, "user_id=u2&limit=200"); len(p.Data) != 30 {
		t.Errorf("user_id=u2: %d, want 30", len(p.Data))
	}
	for _, id := range mine[:5] {
		e.fx.SetNotification(t, id, fixture.InState(notification.Failed))
	}
	if p, _ := e.list(key, "status=failed,expired"); len(p.Data) != 5 {
		t.Errorf("status=failed,expired: %d, want 5", len(p.Data))
	}
	mid := first.Data[25].CreatedAt
	if p, _ := e.list(key, "limit=200&created_before="+url.QueryEscape(mid)); len(p.Data) == 0 || len(p.Data) >= 60 {
		t.Errorf("created_before: %d items", len(p.Data))
	}
	if p, _ := e.list(key, "created_after="+url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))); len(p.Data) != 0 || p.NextCursor != nil {
		t.Errorf("created_after the future: %+v, want an empty last page", p)
	}
	// Another tenant sees only its own.
	if p, _ := e.list(other, "limit=200"); len(p.Data) != 60 {
		t.Errorf("globex lists %d, want its 60", len(p.Data))
	}

	// Validation.
	for _, q := range []string{"limit=0", "limit=201", "limit=abc", "limit=05", "limit=-1", "status=", "status=queued,sent",
		"created_after=yesterday", "created_before=2026-01-01", "user_id=" + strings.Repeat("u", 129), "cursor=garbage",
		"cursor=" + url.QueryEscape(*first.NextCursor) + "&user_id=u1", "statuses=queued", "limit=5&limit=6", "a;b"} {
		_, r := e.list(key, q)
		expectError(t, r, 400, "invalid_request")
	}
}

// batchItems builds a batch body.
func batchOf(items ...any) map[string]any { return map[string]any{"notifications": items} }

// §5: each item is validated, gated and queued as a send would be, answered in its place; an invalid item
// keeps its place; an Idempotency-Key replays the whole answer; a malformed envelope queues nothing.
func TestBatchAnswersEachItemInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", ptr("Acme Shop"))
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	e.fx.User(e.t, "acme", "u2", fixture.LinkedTo(1002))
	items := []any{
		map[string]any{"user_id": "u1", "message": "one", "priority": 9},
		map[string]any{"user_id": "u1", "message": "later", "send_at": ts(time.Hour), "metadata": map[string]string{"k": "v"}},
		map[string]any{"user_id": "u2", "message": "ungated"},
		map[string]any{"user_id": "u1", "message": strings.Repeat("x", 4096)},
		map[string]any{"user_id": "u1", "message": "bad option", "expires_at": ts(-time.Minute)},
		map[string]any{"user_id": "u1"},
		"not an object",
		map[string]any{"user_id": "u1", "message": "typo", "priorty": 3},
		map[string]any{"user_id": "u1", "message": "two"},
	}
	want := []string{"queued", "scheduled", "phone_unverified", "message_too_long_after_branding", "invalid_request",
		"invalid_request", "invalid_request", "invalid_request", "queued"}
	r := e.do("POST", "/v1/send/batch", key, batchOf(items...), "Idempotency-Key", "batch-1")
	if r.status != 200 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	var out struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Results) != len(items) {
		t.Fatalf("results %s", r.body)
	}
	for i, res := range out.Results {
		got, _ := res["status"].(string)
		if got == "" {
			got, _ = res["error"].(string)
			if msg, _ := res["message"].(string); msg == "" || len(res) != 2 {
				t.Errorf("item %d: an error result %v without exactly error and message", i, res)
			}
		} else if _, ok := res["tracking_id"].(string); !ok || len(res) != 2 {
			t.Errorf("item %d: an accepted result %v without exactly tracking_id and status", i, res)
		}
		if got != want[i] {
			t.Errorf("item %d answered %v, want %s", i, res, want[i])
		}
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 3 {
		t.Errorf("%d notifications stored, want 3", n)
	}
	high, normal := e.envelopes("it.notifications.high"), e.envelopes("it.notifications.normal")
	if len(high) != 1 || len(normal) != 1 || high[0].TrackingID != out.Results[0]["tracking_id"] {
		t.Errorf("envelopes high %v normal %v, want the two queued items on their topics", high, normal)
	}
	if body := e.fx.NotificationRow(t, out.Results[8]["tracking_id"].(string)).Body; body != "A message from Acme Shop\ntwo" {
		t.Errorf("branded body %q", body)
	}

	// The same batch under the same key: the same answer, item by item, nothing new stored.
	again := e.do("POST", "/v1/send/batch", key, batchOf(items...), "Idempotency-Key", "batch-1")
	if again.status != 200 || !jsonEqual(again.body, r.body) {
		t.Errorf("replay answered %d %s, want %s", again.status, again.body, r.body)
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 3 {
		t.Errorf("%d notifications after the replay, want 3", n)
	}
	expectError(t, e.do("POST", "/v1/send/batch", key, batchOf(items[:2]...), "Idempotency-Key", "batch-1"), 409, "idempotency_conflict")
}

// §5: an envelope that is not an object, has no array, or holds 0 or more than 100 items is 400 and
// queues nothing; 100 items are accepted.
func TestBatchEnvelopeIsValidated(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	item := map[string]any{"user_id": "u1", "message": "hi"}
	many := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = item
		}
		return out
	}
	for name, body := range map[string]any{
		"not an object":       `[{"user_id":"u1","message":"hi"}]`,
		"no array":            `{}`,
		"null array":          `{"notifications": null}`,
		"an object for array": `{"notifications": {"user_id":"u1","message":"hi"}}`,
		"no items":            batchOf(),
		"101 items":           batchOf(many(101)...),
		"an unknown field":    `{"notifications": [{"user_id":"u1","message":"hi"}], "extra": 1}`,
		"malformed JSON":      `{"notifications": [`,
		"trailing data":       `{"notifications": [{"user_id":"u1","message":"hi"}]} {}`,
	} {
		r := e.do("POST", "/v1/send/batch", key, body)
		if r.status != 400 {
			t.Errorf("%s: %d %s, want 400", name, r.status, r.body)
			continue
		}
		expectError(t, r, 400, "invalid_request")
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d notifications stored by malformed batches", n)
	}
	r := e.do("POST", "/v1/send/batch", key, batchOf(many(100)...))
	if r.status != 200 || e.countRows(`SELECT count(*) FROM notifications`) != 100 {
		t.Errorf("100 items: %d, %d stored", r.status, e.countRows(`SELECT count(*) FROM notifications`))
	}
}

// §5: when the broker does not acknowledge the batch's produce, every accepted item answers queue_error
// and none is left stored — its scheduled items neither —, the invalid and ungated items keep their own
// answers, and a retry under the same key starts afresh.
func TestBatchBrokerFailureStoresNothing(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.fx.User(e.t, "acme", "u2", fixture.LinkedTo(1002))
	var failing = true
	var mu sync.Mutex
	// The broker holds the batch's produce past the 2 s budget: the rows are stored, then the publish fails.
	e.broker.Cluster().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.broker.Cluster().KeepControl()
		mu.Lock()
		f := failing
		mu.Unlock()
		if f {
			time.Sleep(3 * time.Second)
		}
		return nil, nil, false
	})
	items := batchOf(
		map[string]any{"user_id": "u1", "message": "one"},
		map[string]any{"user_id": "u1", "message": "later", "send_at": ts(time.Hour)},
		map[string]any{"user_id": "u2", "message": "ungated"},
		map[string]any{"user_id": "u1"},
		map[string]any{"user_id": "u1", "message": "two"},
	)
	r := e.do("POST", "/v1/send/batch", key, items, "Idempotency-Key", "k")
	var out struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(r.body, &out); r.status != 200 || err != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for i, want := range []string{"queue_error", "queue_error", "phone_unverified", "invalid_request", "queue_error"} {
		if out.Results[i]["error"] != want {
			t.Errorf("item %d: %v, want %s", i, out.Results[i], want)
		}
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d notifications left after the failed publish", n)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	retry := e.do("POST", "/v1/send/batch", key, items, "Idempotency-Key", "k")
	if err := json.Unmarshal(retry.body, &out); err != nil || out.Results[0]["status"] != "queued" || out.Results[1]["status"] != "scheduled" {
		t.Errorf("the retry under the same key: %s, want it done afresh", retry.body)
	}
}

// §6: GET shows the link and the verification, never the chat or the phone; DELETE erases, cancels what
// waits, keeps the metadata, logs no user id; afterwards the user is unknown and cannot be sent to.
func TestUsersGetAndErase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	other := e.tenant("globex", "Globex", nil)
	const user = "alice@example.com"
	e.fx.VerifiedUser(e.t, "acme", user, 777001)
	e.fx.User(e.t, "acme", "pending-user", fixture.LinkedTo(1002), fixture.Pending())
	e.do("POST", "/v1/link-token", key, map[string]any{"user_id": "new-user"})
	path := "/v1/users/" + url.PathEscape(user)

	r := e.do("GET", path, key, nil)
	m := r.json(t)
	if r.status != 200 || m["user_id"] != user || m["linked"] != true || m["linked_at"] == nil || m["phone_verification"] != "verified" ||
		m["phone_last4"] != "4567" || m["verified_at"] == nil || len(m) != 12 { // §6's six, §9's opted_out, opted_out_categories, blocked, §12's locale, messenger_language, time_zone
		t.Errorf("GET verified user: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "777001") {
		t.Error("the user resource shows the chat id")
	}
	if m := e.do("GET", "/v1/users/pending-user", key, nil).json(t); m["phone_verification"] != "pending" || m["verified_at"] != nil || m["phone_last4"] != nil {
		t.Errorf("pending user: %v", m)
	}
	if m := e.do("GET", "/v1/users/new-user", key, nil).json(t); m["linked"] != false || m["linked_at"] != nil || m["phone_verification"] != "unverified" {
		t.Errorf("user with only a link token: %v", m)
	}
	for _, k := range []string{other} {
		expectError(t, e.do("GET", path, k, nil), 404, "not_found")
		expectError(t, e.do("DELETE", path, k, nil), 404, "not_found")
	}
	expectError(t, e.do("GET", "/v1/users/never-seen", key, nil), 404, "not_found")

	queued := e.do("POST", "/v1/send", key, map[string]any{"user_id": user, "message": "secret text"}).json(t)["tracking_id"].(string)
	scheduled := e.do("POST", "/v1/send", key, map[string]any{"user_id": user, "message": "secret later", "send_at": ts(time.Hour)}).json(t)["tracking_id"].(string)
	if r := e.do("DELETE", path, key, nil); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("DELETE: %d %s, want 204 without a body", r.status, r.body)
	}
	for _, id := range []string{queued, scheduled} {
		m := e.do("GET", "/v1/status/"+id, key, nil).json(t)
		if m["status"] != "cancelled" || m["user_id"] != user {
			t.Errorf("after the erasure %s: %v, want cancelled with its metadata", id, m)
		}
	}
	if n := e.countRows(`SELECT count(*) FROM notifications WHERE body LIKE '%secret%'`); n != 0 {
		t.Errorf("%d bodies left", n)
	}
	expectError(t, e.do("GET", path, key, nil), 404, "not_found")
	expectError(t, e.do("DELETE", path, key, nil), 404, "not_found")
	expectError(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": user, "message": "hi"}), 409, "phone_unverified")
	expectError(t, e.do("GET", "/v1/phone-verification/status/"+url.PathEscape(user), key, nil), 404, "not_found")
	logs := e.logs.String()
	if !strings.Contains(logs, "user erased") || !strings.Contains(logs, "tenant_id=acme") {
		t.Errorf("the erasure was not logged: %s", logs)
	}
	if strings.Contains(logs, "alice") {
		t.Errorf("the log names the erased user: %s", logs)
	}
	// A user the tenant only asked a link token for is erased too (the token), then unknown.
	if r := e.do("DELETE", "/v1/users/new-user", key, nil); r.status != 204 {
		t.Errorf("DELETE of a user with only a link token: %d %s", r.status, r.body)
	}
}

// §6: sends racing the erasure of their user either complete before it (202, then cancelled) or fail
// after it (409 phone_unverified); none stays queued.
func TestEraseRacingSends(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := map[string]bool{}
	refused := 0
	for i := range 40 {
		if i == 20 {
			wg.Go(func() {
				if r := e.do("DELETE", "/v1/users/u1", key, nil); r.status != 204 {
					t.Errorf("DELETE: %d %s", r.status, r.body)
				}
			})
		}
		wg.Go(func() {
			r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "race"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.status == 202:
				accepted[r.json(t)["tracking_id"].(string)] = true
			case r.status == 409 && r.json(t)["error"] == "phone_unverified":
				refused++
			default:
				t.Errorf("send: %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	for id := range accepted {
		if m := e.do("GET", "/v1/status/"+id, key, nil).json(t); m["status"] != "cancelled" {
			t.Errorf("%s answered 202 before the erasure but is %v, want cancelled", id, m["status"])
		}
	}
	if n := e.countRows(`SELECT count(*) FROM notifications WHERE status <> 'cancelled' OR body <> ''`); n != 0 {
		t.Errorf("%d notifications of the erased user not cancelled and emptied", n)
	}
	t.Logf("%d sends before the erasure, %d refused after", len(accepted), refused)
}

// Tenant isolation on every new route: another tenant's ids are unknown (404), its notifications are not
// listed, its users cannot be sent to in a batch.
func TestNewRoutesAreTenantScoped(t *testing.T) {
	t.Parallel()
	e, acme := newEnvWithUser(t)
	globex := e.tenant("globex", "Globex", nil)
	id := e.do("POST", "/v1/send", acme, map[string]any{"user_id": "u1", "message": "hi", "send_at": ts(time.Hour)}).json(t)["tracking_id"].(string)
	expectError(t, e.do("POST", "/v1/notifications/"+id+"/cancel", globex, nil), 404, "not_found")
	expectError(t, e.do("GET", "/v1/users/u1", globex, nil), 404, "not_found")
	expectError(t, e.do("DELETE", "/v1/users/u1", globex, nil), 404, "not_found")
	if p, r := e.list(globex, ""); r.status != 200 || len(p.Data) != 0 {
		t.Errorf("globex lists %d of acme's notifications", len(p.Data))
	}
	if p, _ := e.list(globex, "user_id=u1"); len(p.Data) != 0 {
		t.Errorf("globex lists acme's user's notifications")
	}
	r := e.do("POST", "/v1/send/batch", globex, batchOf(map[string]any{"user_id": "u1", "message": "hi"}))
	if !strings.Contains(string(r.body), "phone_unverified") {
		t.Errorf("globex batch to acme's user: %s, want phone_unverified", r.body)
	}
	// Acme's notification and user are untouched.
	if m := e.do("GET", "/v1/status/"+id, acme, nil).json(t); m["status"] != "scheduled" {
		t.Errorf("acme's notification is %v", m["status"])
	}
	if r := e.do("GET", "/v1/users/u1", acme, nil); r.status != 200 {
		t.Errorf("acme's user: %d", r.status)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
