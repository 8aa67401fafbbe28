package delivery_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// Issue 35: an erasure commits before its user's notifications end (in chunks, after it). One whose
// envelope a worker takes before the pass reaches it ends cancelled at the claim, without a call — even
// when the user has linked the same chat again and been verified since, and a send made after that is
// delivered there.
func TestANotificationOfAnErasureNotYetEndedIsNeverSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, simOptions(nil))
	e.user("eve", 801, true)
	// Three sends whose envelopes wait in Kafka (no worker yet), older than a chunk of the pass: the
	// erasure's own chunk does not reach them.
	var old []string
	for _, m := range []string{"one", "two", "three"} {
		id, _ := e.send("eve", m, 5)
		old = append(old, id)
	}
	if _, err := e.st.Pool().Exec(context.Background(),
		`UPDATE notifications SET created_at = created_at - interval '1 hour' WHERE tracking_id = ANY ($1::uuid[])`, old); err != nil {
		t.Fatal(err)
	}
	fixture.New(e.st).Backlog(t, "acme", "eve", "", store.EndingChunk*store.EraseInlineChunks)

	if status, _ := e.call(http.MethodDelete, "/v1/users/eve", nil); status != http.StatusNoContent {
		t.Fatalf("DELETE /v1/users/eve: %d, want 204", status)
	}
	for _, id := range old {
		if r := e.row(id); r.Status != "queued" {
			t.Fatalf("notification %s is %s after the erasure, want still queued (the pass has not reached it)", id, r.Status)
		}
	}
	// Linked to the same chat again and verified: the chat leads to the user once more.
	e.user("eve", 801, true)
	fresh, _ := e.send("eve", "after", 5)

	e.start(e.fastOptions())
	e.waitStatus(fresh, "delivered", 15*time.Second)
	for _, id := range old {
		r := e.waitTerminal(id, 15*time.Second)
		if r.Status != "cancelled" || r.Attempts != 1 || r.MsgID != nil {
			t.Errorf("notification %s of the erasure: %s after %d attempts (message %v), want cancelled by its claim", id, r.Status, r.Attempts, r.MsgID)
		}
	}
	if got := e.texts(801); len(got) != 1 || got[0] != brand("after") {
		t.Errorf("chat 801 received %q, want only the send made after the user linked again", got)
	}
}
