package callback_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/testing/openapitest"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// §9's user events: user.opted_out and user.opted_in carry the category (null for the whole tenant) and who
// made the change, user.blocked and user.unblocked the user id only; each payload matches the document.
func TestTheOptOutAndBlockEventsCarryTheirData(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rc := newReceiver(t, nil)
	e.endpoint("acme", rc.srv.URL+"/hooks")
	e.fx.VerifiedUser(t, "acme", "alice", 1001)
	if _, err := e.st.OptOut(ctx, "acme", "alice", "promo", consent.ByTenant); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.OptOut(ctx, "acme", "alice", "", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.LiftOptOut(ctx, "acme", "alice", "promo", consent.ByTenant); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetChatBlocked(ctx, notification.SharedBot, 1001, true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetChatBlocked(ctx, notification.SharedBot, 1001, false); err != nil {
		t.Fatal(err)
	}
	e.start(e.options())
	wait.Until(t, 10*time.Second, "the five events", func() bool { return len(rc.requests()) >= 5 })

	want := map[string]map[string]any{
		"user.opted_out promo": {"user_id": "alice", "category": "promo", "by": "tenant"},
		"user.opted_out ":      {"user_id": "alice", "category": nil, "by": "user"},
		"user.opted_in promo":  {"user_id": "alice", "category": "promo", "by": "tenant"},
		"user.blocked ":        {"user_id": "alice"},
		"user.unblocked ":      {"user_id": "alice"},
	}
	doc := openapitest.Load(t)
	for _, r := range rc.requests() {
		if err := doc.ValidateWebhook("callback", r.Body); err != nil {
			t.Error(err)
		}
		var p struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
		category, _ := p.Data["category"].(string)
		key := p.Type + " " + category
		if w, ok := want[key]; !ok || !reflect.DeepEqual(p.Data, w) {
			t.Errorf("%s: data %v, want %v", p.Type, p.Data, w)
		}
		delete(want, key)
	}
	if len(want) != 0 {
		t.Errorf("events not received: %v", want)
	}
}
