package callback_test

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/testing/openapitest"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// §13 through the real components: notification.delivered says how the message reached the chat
// (delivered_as sent, then edited for the key's next notification), and the deletion of a message on the
// tenant's request arrives as notification.message_deleted, signed like every event, its data the
// resource as GET /v1/status shows it (message_deleted_at set).
func TestReplaceAndDeleteAreToldInTheCallbacks(t *testing.T) {
	g := newGateway(t)
	var created struct {
		Secret string `json:"secret"`
	}
	g.call("acme", "POST", "/v1/callbacks", map[string]any{"url": g.simS.URL + "/sim/callbacks",
		"events": []string{"notification.delivered", "notification.message_deleted"}}, http.StatusCreated, &created)
	res, err := http.Post(g.simS.URL+"/sim/callbacks/secrets", "application/json", bytes.NewReader([]byte(`{"secret":"`+created.Secret+`"}`)))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("registering the secret: %v %v", res, err)
	}
	res.Body.Close()
	if _, err := g.sim.EnsureUser(sim.User{ID: 1001}); err != nil {
		t.Fatal(err)
	}
	g.fx.VerifiedUser(t, "acme", "carol", 1001)

	send := func(message string) string {
		t.Helper()
		var sent struct {
			TrackingID string `json:"tracking_id"`
		}
		g.call("acme", "POST", "/v1/send", map[string]any{"user_id": "carol", "message": message, "replace_key": "order-1"}, http.StatusAccepted, &sent)
		wait.Until(t, 20*time.Second, "delivered", func() bool {
			var st map[string]any
			g.call("acme", "GET", "/v1/status/"+sent.TrackingID, nil, http.StatusOK, &st)
			return st["status"] == "delivered"
		})
		return sent.TrackingID
	}
	first := send("Order 1: packed")
	second := send("Order 1: shipped")
	wait.Until(t, 20*time.Second, "two delivered events", func() bool { return len(g.sim.Callbacks()) >= 2 })
	g.call("acme", "DELETE", "/v1/notifications/"+second+"/message", nil, http.StatusAccepted, nil)
	wait.Until(t, 20*time.Second, "the deletion's event", func() bool { return len(g.sim.Callbacks()) >= 3 })
	time.Sleep(300 * time.Millisecond) // anything extra would have arrived by now

	got := g.sim.Callbacks()
	if len(got) != 3 {
		t.Fatalf("%d callbacks, want 3", len(got))
	}
	doc := openapitest.Load(t)
	deliveredAs := map[string]any{}
	for _, c := range got {
		if err := doc.ValidateWebhook("callback", c.Payload); err != nil {
			t.Error(err)
		}
		if c.Verified == nil || !*c.Verified {
			t.Errorf("%s did not verify: %s", c.Type, c.VerificationError)
		}
		typ, _, data := payloadOf(t, c.Payload)
		switch typ {
		case "notification.delivered":
			deliveredAs[data["tracking_id"].(string)] = data["delivered_as"]
			if data["replace_key"] != "order-1" {
				t.Errorf("delivered event's replace_key %v", data["replace_key"])
			}
		case "notification.message_deleted":
			var status map[string]any
			g.call("acme", "GET", "/v1/status/"+second, nil, http.StatusOK, &status)
			if data["tracking_id"] != second || data["message_deleted_at"] == nil || !reflect.DeepEqual(data, status) {
				t.Errorf("message_deleted data\n%v\nGET /v1/status shows\n%v", data, status)
			}
		default:
			t.Errorf("unexpected event %s", typ)
		}
	}
	if deliveredAs[first] != "sent" || deliveredAs[second] != "edited" {
		t.Errorf("delivered_as in the delivered events: %v, want sent then edited", deliveredAs)
	}
}
