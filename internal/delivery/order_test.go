package delivery_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/store"
)

// A tenant that sends on user.verified must never see its message land before Herald's confirmation
// (issue 42): the system message and the tenant's notification go through different topics, and here the
// system message's envelope comes late — the tenant's notification is fetched, claimed in order, and
// waits in its lane until the system message ahead of it in the chat is delivered.
func TestATenantNotificationWaitsForTheSystemMessageAheadInItsChat(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user("u", 4201, true)
	thanks := outbox.System(outbox.SystemMessage{TenantID: "acme", ChatID: 4201, Body: "Thank you, your phone number is verified."})
	if err := e.st.InsertSystemMessage(context.Background(), thanks); err != nil {
		t.Fatal(err)
	}
	shipped, _ := e.send("u", "Your order has shipped", 5)
	e.start(e.fastOptions())

	// Without the order the notification goes out at once; with it, it waits for the message ahead.
	time.Sleep(1500 * time.Millisecond)
	if r := e.row(shipped); r.Status != string(notification.Queued) {
		t.Fatalf("the tenant's notification is %s while the system message accepted before it has not been sent; want it queued", r.Status)
	}
	if !e.outbox.Publish(context.Background(), []store.NewNotification{thanks}) {
		t.Fatal("system message not published")
	}
	e.waitStatus(shipped, "delivered", 15*time.Second)
	want := []string{"Thank you, your phone number is verified.", brand("Your order has shipped")}
	if got := e.texts(4201); !slices.Equal(got, want) {
		t.Errorf("chat 4201 received %q, want %q", got, want)
	}
	e.assertNoViolations()
}
