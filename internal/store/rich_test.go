package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// richQueued inserts a queued notification of user ok with every rich option (§10), as the door stores it.
func richQueued(t *testing.T, s *store.Store) string {
	t.Helper()
	n := tenantNotification("ok")
	n.Rich = notification.Rich{Format: notification.FormatHTML, Entities: "a25,4,17:https://a.example",
		Silent: true, ProtectContent: true, NoLinkPreview: true}
	n.ReplyMarkup = json.RawMessage(`{"inline_keyboard":[[{"text":"Go","url":"https://b.example"}]]}`)
	got, err := s.InsertTenantNotifications(context.Background(), []store.NewNotification{n})
	if _, ok := got[n.TrackingID]; err != nil || !ok {
		t.Fatalf("insert: %v %v", got, err)
	}
	return n.TrackingID
}

// The claim gives the worker what the door stored — entities, keyboard, flags — and a plain notification
// none of them; the resource shows the format only.
func TestTheClaimCarriesTheRichOptionsAsStored(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	rich, plain := richQueued(t, s), queued(t, s)
	d, err := s.ClaimDelivery(ctx, rich, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d.Format != notification.FormatHTML || d.Entities != "a25,4,17:https://a.example" ||
		!jsonSame(d.ReplyMarkup, `{"inline_keyboard":[[{"text":"Go","url":"https://b.example"}]]}`) || !d.Silent || !d.ProtectContent || !d.NoLinkPreview {
		t.Errorf("claimed %+v, want every rich option as stored", d.Rich)
	}
	p, err := s.ClaimDelivery(ctx, plain, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rich.Format != "" || p.Entities != "" || p.ReplyMarkup != nil || p.Silent || p.ProtectContent || p.NoLinkPreview {
		t.Errorf("a plain notification claimed with %+v and markup %s, want none", p.Rich, p.ReplyMarkup)
	}
	for id, format := range map[string]string{rich: "html", plain: "text"} {
		if v, err := s.GetNotification(ctx, "acme", id); err != nil || v.Resource().Format != format {
			t.Errorf("resource of %s: format %q (%v), want %q", id, v.Format, err, format)
		}
	}
}

// A text link's URL and a button's text and URL are the tenant's content, like the body: the body's
// retention and a user's erasure clear them with it.
func TestRetentionAndErasureClearEntitiesAndButtonsWithTheBody(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	old, erased := richQueued(t, s), richQueued(t, s)
	exec(t, s, `UPDATE notifications SET status = 'delivered', updated_at = now() - interval '8 days' WHERE tracking_id = $1`, old)
	purgeAll(t, s, 10)
	if _, err := s.EraseUser(ctx, "acme", "ok"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{old, erased} {
		if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND (body <> '' OR entities IS NOT NULL OR reply_markup IS NOT NULL)`, id); n != 0 {
			t.Errorf("notification %s keeps its body, entities or buttons", id)
		}
	}
}

func jsonSame(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
