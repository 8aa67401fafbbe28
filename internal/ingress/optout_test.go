package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// The tenant side of v1 extensions §9: opt-outs, the category send option, the user's new fields.

// batchResults posts a batch and returns its results.
func (e *env) batchResults(key string, items ...map[string]any) []map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": items})
	if r.status != http.StatusOK {
		e.t.Fatalf("batch: %d %s", r.status, r.body)
	}
	var out struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		e.t.Fatal(err)
	}
	return out.Results
}

// POST and DELETE /v1/users/{user_id}/opt-out: the whole tenant, or one category; 204 each way; the send
// at the door is 409 user_opted_out for what an opt-out covers and stores nothing; GET shows it.
func TestATenantOptsItsUserOutAndBackIn(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	send := func(category string) response {
		body := map[string]any{"user_id": "u1", "message": "hi"}
		if category != "" {
			body["category"] = category
		}
		return e.do("POST", "/v1/send", key, body)
	}
	user := func() map[string]any { return e.do("GET", "/v1/users/u1", key, nil).json(t) }
	if m := user(); m["opted_out"] != false || !reflect.DeepEqual(m["opted_out_categories"], []any{}) || m["blocked"] != false {
		t.Errorf("a user without opt-outs: %v", m)
	}

	if r := e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": "promo"}); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("opt out of promo: %d %s", r.status, r.body)
	}
	stored := e.countRows(`SELECT count(*) FROM notifications`)
	expectError(t, send("promo"), http.StatusConflict, "user_opted_out")
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != stored {
		t.Error("a refused send was stored")
	}
	for _, c := range []string{"news", ""} {
		if r := send(c); r.status != http.StatusAccepted {
			t.Errorf("a send in category %q after the opt-out of promo: %d %s", c, r.status, r.body)
		}
	}
	if m := user(); m["opted_out"] != false || !reflect.DeepEqual(m["opted_out_categories"], []any{"promo"}) {
		t.Errorf("after the opt-out of promo: %v", m)
	}

	// The whole tenant: no body at all.
	if r := e.do("POST", "/v1/users/u1/opt-out", key, nil); r.status != http.StatusNoContent {
		t.Fatalf("opt out of the tenant: %d %s", r.status, r.body)
	}
	for _, c := range []string{"news", ""} {
		r := send(c)
		expectError(t, r, http.StatusConflict, "user_opted_out")
		if strings.Contains(string(r.body), "phone") {
			t.Errorf("the refusal speaks of the phone: %s", r.body)
		}
	}
	if m := user(); m["opted_out"] != true {
		t.Errorf("after the opt-out of the tenant: %v", m)
	}
	if r := e.do("DELETE", "/v1/users/u1/opt-out", key, `{}`); r.status != http.StatusNoContent {
		t.Fatalf("lift the tenant's opt-out: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/users/u1/opt-out", key, map[string]any{"category": "promo"}); r.status != http.StatusNoContent {
		t.Fatalf("lift promo: %d %s", r.status, r.body)
	}
	// Lifting what is not stopped is fine too.
	if r := e.do("DELETE", "/v1/users/u1/opt-out", key, map[string]any{"category": "news"}); r.status != http.StatusNoContent {
		t.Errorf("lift what was never stopped: %d %s", r.status, r.body)
	}
	if r := send("promo"); r.status != http.StatusAccepted {
		t.Errorf("a send after both were lifted: %d %s", r.status, r.body)
	}
	if m := user(); m["opted_out"] != false || len(m["opted_out_categories"].([]any)) != 0 {
		t.Errorf("after the lifts: %v", m)
	}
}

// The routes' input: a user the tenant never had (or another tenant's) is 404; a category outside
// ^[a-z0-9_.-]{1,40}$, another type, an unknown field, a body that is not JSON or not an object is 400 and
// changes nothing.
func TestTheOptOutRoutesValidateTheirInput(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	other := e.tenant("globex", "Globex", nil)
	for _, method := range []string{"POST", "DELETE"} {
		expectError(t, e.do(method, "/v1/users/nobody/opt-out", key, nil), http.StatusNotFound, "not_found")
		expectError(t, e.do(method, "/v1/users/u1/opt-out", other, nil), http.StatusNotFound, "not_found")
		expectError(t, e.do(method, "/v1/users/u1/opt-out", "", nil), http.StatusUnauthorized, "unauthorized")
		for name, body := range map[string]any{
			"upper case":          map[string]any{"category": "Promo"},
			"empty":               map[string]any{"category": ""},
			"41 characters":       map[string]any{"category": strings.Repeat("a", 41)},
			"a space":             map[string]any{"category": "big sale"},
			"a number":            map[string]any{"category": 7},
			"an unknown field":    map[string]any{"categories": []string{"promo"}},
			"not an object":       `["promo"]`,
			"malformed":           `{"category":`,
			"a NUL":               map[string]any{"category": "pro\x00mo"},
			"a non-ASCII letter":  map[string]any{"category": "promó"},
			"trailing data":       `{"category":"promo"} {}`,
			"a category and more": map[string]any{"category": "promo", "user_id": "u1"},
		} {
			r := e.do(method, "/v1/users/u1/opt-out", key, body)
			if r.status != http.StatusBadRequest {
				t.Errorf("%s with %s: %d %s, want 400", method, name, r.status, r.body)
				continue
			}
			expectError(t, r, http.StatusBadRequest, "invalid_request")
		}
		r := e.do(method, "/v1/users/u1/opt-out", key, `{"category":"promo"}`, "Content-Type", "text/plain")
		expectError(t, r, http.StatusUnsupportedMediaType, "invalid_request")
	}
	if n := e.countRows(`SELECT count(*) FROM opt_outs`); n != 0 {
		t.Errorf("%d opt-outs made by refused requests", n)
	}
	ok := e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": "a-z_0.9" + strings.Repeat("x", 33)})
	if ok.status != http.StatusNoContent {
		t.Errorf("a 40-character category of every allowed character: %d %s", ok.status, ok.body)
	}
	if r := e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": nil}); r.status != http.StatusNoContent {
		t.Errorf("a null category (the whole tenant): %d %s", r.status, r.body)
	}
}

// The by-user rule: an opt-out the user made in the chat cannot be lifted by the tenant (409
// opted_out_by_user) nor taken over by making it again; one the tenant made, the tenant lifts.
func TestATenantCannotLiftItsUsersOwnOptOut(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	if _, err := e.st.OptOut(context.Background(), "acme", "u1", "", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	expectError(t, e.do("DELETE", "/v1/users/u1/opt-out", key, nil), http.StatusConflict, "opted_out_by_user")
	if r := e.do("POST", "/v1/users/u1/opt-out", key, nil); r.status != http.StatusNoContent {
		t.Errorf("the tenant makes the user's opt-out again: %d %s", r.status, r.body)
	}
	expectError(t, e.do("DELETE", "/v1/users/u1/opt-out", key, nil), http.StatusConflict, "opted_out_by_user")
	expectError(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}), http.StatusConflict, "user_opted_out")
	if m := e.do("GET", "/v1/users/u1", key, nil).json(t); m["opted_out"] != true {
		t.Errorf("the user's opt-out after the tenant's attempts: %v", m)
	}
}

// A batch item an opt-out covers gets 409 user_opted_out in its place; the others are answered as before
// (a user without a verified phone: phone_unverified).
func TestABatchItemOfAnOptedOutUserIsRefusedInItsPlace(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.fx.User(t, "acme", "u2", fixture.LinkedTo(1002))
	if r := e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": "promo"}); r.status != http.StatusNoContent {
		t.Fatal(r.status)
	}
	items := []map[string]any{
		{"user_id": "u1", "message": "sale", "category": "promo"},
		{"user_id": "u1", "message": "news", "category": "news"},
		{"user_id": "u2", "message": "sale", "category": "promo"},
		{"user_id": "u1", "message": "bad", "category": "PROMO"},
	}
	res := e.batchResults(key, items...)
	if res[0]["error"] != "user_opted_out" || res[1]["status"] != "queued" || res[2]["error"] != "phone_unverified" || res[3]["error"] != "invalid_request" {
		t.Errorf("results %v", res)
	}
	// Under an Idempotency-Key, the replay answers the same.
	first := e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": items}, "Idempotency-Key", "b1")
	again := e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": items}, "Idempotency-Key", "b1")
	if first.status != 200 || string(first.body) != string(again.body) || !strings.Contains(string(again.body), "user_opted_out") {
		t.Errorf("the replay: %s\nthe first: %s", again.body, first.body)
	}
}

// The notifications still waiting when an opt-out covering them is made end blocked, "opted out", with
// their notification.blocked events; the others stay. The category is in the resource of status, list and
// the callbacks.
func TestAnOptOutEndsTheWaitingNotificationsItCovers(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.fx.CallbackEndpoint(t, e.key, "acme", "https://hooks.example.com/h")
	sendAt := ts(time.Hour)
	promo := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "later", "send_at": sendAt, "category": "promo"}).json(t)["tracking_id"].(string)
	queuedPromo := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "now", "category": "promo"}).json(t)["tracking_id"].(string)
	news := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "later", "send_at": sendAt, "category": "news"}).json(t)["tracking_id"].(string)

	if r := e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": "promo"}); r.status != http.StatusNoContent {
		t.Fatal(r.status)
	}
	for _, id := range []string{promo, queuedPromo} {
		m := e.do("GET", "/v1/status/"+id, key, nil).json(t)
		if m["status"] != "blocked" || m["last_error_message"] != "opted out" || m["last_error_code"] != float64(notification.CodeOptedOut) ||
			m["category"] != "promo" {
			t.Errorf("a waiting promo notification after the opt-out: %v", m)
		}
	}
	if m := e.do("GET", "/v1/status/"+news, key, nil).json(t); m["status"] != "scheduled" || m["category"] != "news" {
		t.Errorf("the news one: %v", m)
	}
	if n := e.countRows(`SELECT count(*) FROM callback_inbox WHERE type = 'notification.blocked'`); n != 2 {
		t.Errorf("%d notification.blocked events, want 2", n)
	}
	if n := e.countRows(`SELECT count(*) FROM callback_inbox WHERE type = 'user.opted_out' AND user_id = 'u1' AND data = '{"by": "tenant", "category": "promo"}'`); n != 1 {
		t.Errorf("%d user.opted_out events for u1 by the tenant, of promo; want 1", n)
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(e.do("GET", "/v1/notifications?status=blocked", key, nil).body, &list); err != nil || len(list.Data) != 2 || list.Data[0]["category"] != "promo" {
		t.Errorf("the list of blocked ones: %+v %v", list, err)
	}
}

// The category send option: ^[a-z0-9_.-]{1,40}$, null or absent for none (null in the resource); it is part
// of an Idempotency-Key's meaning only when given, so a repeat with another category is a conflict and a
// send without one means what it meant before.
func TestTheCategoryOption(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	for name, c := range map[string]any{"upper case": "Promo", "empty": "", "41 characters": strings.Repeat("a", 41), "a number": 1,
		"a slash": "a/b", "an object": map[string]any{}} {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "category": c})
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "category") {
			t.Errorf("category %s: %d %s, want 400 naming the field", name, r.status, r.body)
		}
	}
	plain := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "category": nil}).json(t)["tracking_id"].(string)
	if m := e.do("GET", "/v1/status/"+plain, key, nil).json(t); m["category"] != nil {
		t.Errorf("a send without a category: %v", m["category"])
	}
	first := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "category": "promo"}, "Idempotency-Key", "c1")
	again := e.do("POST", "/v1/send", key, map[string]any{"category": "promo", "message": "hi", "user_id": "u1"}, "Idempotency-Key", "c1")
	if first.status != 202 || string(first.body) != string(again.body) {
		t.Errorf("the same send in another order: %s, want the first answer %s", again.body, first.body)
	}
	expectError(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "category": "news"}, "Idempotency-Key", "c1"),
		http.StatusConflict, "idempotency_conflict")
	expectError(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}, "Idempotency-Key", "c1"),
		http.StatusConflict, "idempotency_conflict")
	e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}, "Idempotency-Key", "c2")
	if r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "category": nil}, "Idempotency-Key", "c2"); r.status != 202 {
		t.Errorf("a null category is no category: %d %s", r.status, r.body)
	}
}

// A user linked to three tenants (the same messenger account): the opt-out one tenant makes leaves the
// other two sending; GET shows it to that tenant only.
func TestAnOptOutIsOneTenants(t *testing.T) {
	t.Parallel()
	e, acme := newEnvWithUser(t)
	globex, initech := e.tenant("globex", "Globex", nil), e.tenant("initech", "Initech", nil)
	e.fx.VerifiedUser(t, "globex", "u1", 1001)
	e.fx.VerifiedUser(t, "initech", "alice", 1001)
	if r := e.do("POST", "/v1/users/u1/opt-out", globex, nil); r.status != http.StatusNoContent {
		t.Fatal(r.status)
	}
	for k, want := range map[string]int{acme: 202, globex: 409, initech: 202} {
		user := map[string]string{acme: "u1", globex: "u1", initech: "alice"}[k]
		if r := e.do("POST", "/v1/send", k, map[string]any{"user_id": user, "message": "hi"}); r.status != want {
			t.Errorf("a send after globex's opt-out: %d %s, want %d", r.status, r.body, want)
		}
		if m := e.do("GET", "/v1/users/"+user, k, nil).json(t); m["opted_out"] != (want == 409) {
			t.Errorf("GET: %v", m)
		}
	}
}

// DELETE /v1/users erases the opt-outs with the rest: the user, linked and verified again, is sent to.
func TestErasureTakesTheOptOutsAlong(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	if r := e.do("POST", "/v1/users/u1/opt-out", key, nil); r.status != http.StatusNoContent {
		t.Fatal(r.status)
	}
	if r := e.do("DELETE", "/v1/users/u1", key, nil); r.status != http.StatusNoContent {
		t.Fatal(r.status)
	}
	if n := e.countRows(`SELECT count(*) FROM opt_outs`); n != 0 {
		t.Errorf("%d opt-outs left after the erasure", n)
	}
	e.fx.VerifiedUser(t, "acme", "u1", 1001)
	if r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}); r.status != http.StatusAccepted {
		t.Errorf("a send after the erasure and a new link: %d %s", r.status, r.body)
	}
}

// A blocked user is still accepted (the claim ends the notification without a call), and GET says blocked.
func TestABlockedUserIsAcceptedAndShownBlocked(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	if _, err := e.st.SetChatBlocked(context.Background(), notification.SharedBot, 1001, true); err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}); r.status != http.StatusAccepted {
		t.Errorf("a send for a blocked user: %d %s, want 202", r.status, r.body)
	}
	if m := e.do("GET", "/v1/users/u1", key, nil).json(t); m["blocked"] != true {
		t.Errorf("GET a blocked user: %v", m)
	}
}

// Issue 35: a tenant's category opt-outs of one user are capped (store.MaxCategoryOptOuts): past the cap the
// API answers 409 limit_reached, saying so; the whole tenant's opt-out is always taken.
func TestCategoryOptOutsAreCappedPerUser(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	for i := range store.MaxCategoryOptOuts {
		if r := e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": fmt.Sprintf("c%d", i)}); r.status != http.StatusNoContent {
			t.Fatalf("category opt-out %d: %d %s", i, r.status, r.body)
		}
	}
	r := e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": "one-more"})
	expectError(t, r, http.StatusConflict, "limit_reached")
	if !strings.Contains(string(r.body), fmt.Sprint(store.MaxCategoryOptOuts)) {
		t.Errorf("the refusal does not name the cap: %s", r.body)
	}
	if r := e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": "c0"}); r.status != http.StatusNoContent {
		t.Errorf("an opt-out the user has already, at the cap: %d %s, want 204", r.status, r.body)
	}
	if r := e.do("POST", "/v1/users/u1/opt-out", key, nil); r.status != http.StatusNoContent {
		t.Errorf("the whole tenant's opt-out at the cap: %d %s, want 204", r.status, r.body)
	}
}
