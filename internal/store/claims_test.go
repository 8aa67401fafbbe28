package store_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// A claim takes exactly the states notification.Status.Claimable allows, and tells the others apart.
func TestClaimFromEachState(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	cases := []struct {
		name, set   string // an UPDATE … SET clause putting the row in the state
		status      notification.Status
		next, lease string // next_attempt_at and lease_expires_at relative to now, as SQL
		claimable   bool
		leased      bool
	}{
		{"queued", "", notification.Queued, "", "", true, false},
		{"retrying, due", "status = 'retrying', next_attempt_at = now() - interval '1 second'", notification.Retrying, "-1 second", "", true, false},
		{"retrying, not due", "status = 'retrying', next_attempt_at = now() + interval '1 hour'", notification.Retrying, "1 hour", "", false, false},
		{"delivering, live lease", "status = 'delivering', attempts = 1, lease_expires_at = now() + interval '1 hour'", notification.Delivering, "", "1 hour", false, true},
		{"delivering, lease run out", "status = 'delivering', attempts = 1, lease_expires_at = now() - interval '1 second'", notification.Delivering, "", "-1 second", true, false},
		{"delivered", "status = 'delivered'", notification.Delivered, "", "", false, false},
		{"blocked", "status = 'blocked'", notification.Blocked, "", "", false, false},
		{"failed", "status = 'failed'", notification.Failed, "", "", false, false},
		{"unlinked", "status = 'unlinked'", notification.Unlinked, "", "", false, false},
	}
	at := func(rel string) *time.Time {
		if rel == "" {
			return nil
		}
		d, _ := time.ParseDuration(map[string]string{"-1 second": "-1s", "1 hour": "1h"}[rel])
		t := time.Now().Add(d)
		return &t
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := queued(t, s)
			if c.set != "" {
				exec(t, s, `UPDATE notifications SET `+c.set+` WHERE tracking_id = $1`, id)
			}
			if got := c.status.Claimable(at(c.next), at(c.lease), nil, time.Now()); got != c.claimable {
				t.Errorf("Status.Claimable = %v, want %v (Go and SQL must agree)", got, c.claimable)
			}
			d, err := s.ClaimDelivery(ctx, id, time.Minute)
			if c.claimable {
				if err != nil {
					t.Fatalf("claim: %v, want claimed", err)
				}
				if d.ChatID != 1 || d.Body != "hello" {
					t.Errorf("claimed %+v, want chat 1 and the body", d)
				}
				if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'delivering' AND lease_expires_at > now()`, id); n != 1 {
					t.Error("the claimed row is not delivering under a lease")
				}
				return
			}
			var nc *store.NotClaimable
			if !errors.As(err, &nc) || nc.Status != c.status || nc.Leased != c.leased {
				t.Fatalf("claim: %v, want not claimable in %s (leased %v)", err, c.status, c.leased)
			}
		})
	}
	if _, err := s.ClaimDelivery(ctx, newID(), time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("claim of a row that does not exist: %v, want ErrNotFound", err)
	}
}

// A tenant notification goes to the chat recorded when it was accepted, and only while the user's link
// leads there: after a relink to another account (an attempt was running then: its retry is claimed now)
// the claim sends nowhere and says why; with no link left, nowhere either; a relink of the same account
// changes nothing.
func TestClaimSendsOnlyToTheChatOfAcceptance(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	claim := func(id string) notification.Delivery {
		t.Helper()
		d, err := s.ClaimDelivery(ctx, id, time.Minute)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		return d
	}
	sameAccount := queued(t, s)
	exec(t, s, `UPDATE links SET linked_at = now() WHERE user_id = 'ok'`)
	if d := claim(sameAccount); d.ChatID != 1 || d.Relinked {
		t.Errorf("after a relink of the same account: chat %d, relinked %v; want chat 1", d.ChatID, d.Relinked)
	}
	relinked := queued(t, s)
	exec(t, s, `UPDATE links SET messenger_user_id = 9, chat_id = 9 WHERE user_id = 'ok'`)
	if d := claim(relinked); d.ChatID != 0 || !d.Relinked {
		t.Errorf("after a relink to another account: chat %d, relinked %v; want chat 0, relinked", d.ChatID, d.Relinked)
	}
	exec(t, s, `UPDATE links SET messenger_user_id = 1, chat_id = 1 WHERE user_id = 'ok'`)
	gone := queued(t, s)
	exec(t, s, `DELETE FROM links WHERE user_id = 'ok'`)
	if d := claim(gone); d.ChatID != 0 || d.Relinked {
		t.Errorf("without a link: chat %d, relinked %v; want chat 0, not relinked", d.ChatID, d.Relinked)
	}
}

// A worker whose lease ran out and whose notification another worker claimed cannot overwrite the newer
// attempt's result.
func TestStaleFinishAfterTheLeaseRanOut(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	id := queued(t, s)
	first, err := s.ClaimDelivery(ctx, id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, s, `UPDATE notifications SET lease_expires_at = now() - interval '1 second' WHERE tracking_id = $1`, id)
	second, err := s.ClaimDelivery(ctx, id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if second.Attempts != first.Attempts+1 {
		t.Fatalf("attempts %d then %d, want one more", first.Attempts, second.Attempts)
	}
	ok, err := s.FinishDelivery(ctx, first, notification.DeliveryResult{Status: notification.Failed, ErrorCode: 400, ErrorMessage: "late"})
	if err != nil || ok {
		t.Fatalf("the stale finish matched (%v, %v); it must not", ok, err)
	}
	ok, err = s.FinishDelivery(ctx, second, notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "9"})
	if err != nil || !ok {
		t.Fatalf("the current finish: %v %v", ok, err)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'delivered' AND attempts = 2 AND last_error_code = 0`, id); n != 1 {
		t.Error("the row does not show the newer attempt's result")
	}
	if rec, err := s.DeliveryRecorded(ctx, second, notification.DeliveryResult{Status: notification.Delivered}); err != nil || !rec {
		t.Errorf("DeliveryRecorded(current) = %v, %v; want true (a retried write whose answer was lost)", rec, err)
	}
	if rec, _ := s.DeliveryRecorded(ctx, first, notification.DeliveryResult{Status: notification.Failed}); rec {
		t.Error("DeliveryRecorded matched the stale attempt")
	}
}

// Two workers running the retry scheduler at once hand each due row to exactly one of them (SKIP LOCKED).
func TestRepublishersShareRowsWithSkipLocked(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	var ids []string
	for range 20 {
		id := queued(t, s)
		exec(t, s, `UPDATE notifications SET status = 'retrying', attempts = 1, next_attempt_at = now() - interval '1 second', published_at = NULL WHERE tracking_id = $1`, id)
		ids = append(ids, id)
	}
	var mu sync.Mutex
	var got [2][]string
	inside := make(chan struct{}, 2)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			_, err := s.RepublishDueRetries(ctx, 10, time.Minute, func(_ context.Context, batch []store.Pending) []string {
				inside <- struct{}{}
				<-release // both hold their rows at once
				var done []string
				for _, p := range batch {
					done = append(done, p.TrackingID)
				}
				mu.Lock()
				got[w] = done
				mu.Unlock()
				return done
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	<-inside
	<-inside
	close(release)
	wg.Wait()
	if len(got[0]) != 10 || len(got[1]) != 10 {
		t.Fatalf("workers got %d and %d rows, want 10 each", len(got[0]), len(got[1]))
	}
	all := append(slices.Clone(got[0]), got[1]...)
	slices.Sort(all)
	slices.Sort(ids)
	if !slices.Equal(slices.Compact(all), ids) {
		t.Fatalf("the workers got %d distinct rows of the %d due, want each once (a row handed to both, or another row)", len(slices.Compact(all)), len(ids))
	}
	// Published rows are not handed out again before their quiet period.
	n, err := s.RepublishDueRetries(ctx, 10, time.Minute, func(_ context.Context, batch []store.Pending) []string {
		t.Errorf("republished %d rows again at once", len(batch))
		return nil
	})
	if err != nil || n != 0 {
		t.Errorf("second round: %d, %v", n, err)
	}
}

// A PostgreSQL restart ends every session with 57P01 (admin shutdown): that is "unavailable, retry", not
// an internal error.
func TestTerminatedSessionIsUnavailable(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	exec(t, s, `SELECT pg_terminate_backend($1)`, pid)
	_, err = conn.Exec(ctx, `SELECT 1`)
	if err == nil {
		t.Fatal("a query on a terminated session succeeded")
	}
	if !store.IsUnavailable(err) {
		t.Fatalf("IsUnavailable(%v) = false, want true", err)
	}
}

// Many outcomes in one statement are each written as one would be alone: each guarded by its attempt (a
// stale one is refused, the others stand), each with its own status, message and error, and the usage
// counts exact — one per terminal outcome, a paid delivery in paid_broadcast too, a retry nothing.
func TestFinishDeliveriesWritesEachOutcomeAsAloneAndCountsUsageExactly(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	claim := func() notification.Delivery {
		t.Helper()
		d, err := s.ClaimDelivery(ctx, queued(t, s), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := usageOf(t, s, "acme")
	var fs []store.Finish
	for i := range 5 {
		fs = append(fs, store.Finish{D: claim(), R: notification.DeliveryResult{Status: notification.Delivered,
			MessengerMessageID: strconv.Itoa(100 + i), PaidBroadcast: i < 2}})
	}
	failed := store.Finish{D: claim(), R: notification.DeliveryResult{Status: notification.Failed, ErrorCode: 400, ErrorMessage: "bad"}}
	retry := store.Finish{D: claim(), R: notification.DeliveryResult{Status: notification.Retrying, ErrorCode: 500, ErrorMessage: "later", RetryIn: time.Hour}}
	released := store.Finish{D: claim(), R: notification.DeliveryResult{Status: notification.Retrying, Release: true}}
	stale := claim()
	exec(t, s, `UPDATE notifications SET lease_expires_at = now() - interval '1 second' WHERE tracking_id = $1`, stale.TrackingID)
	current, err := s.ClaimDelivery(ctx, stale.TrackingID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The attempt that outlived its lease and the one that took it over finish in the same statement.
	fs = append(fs, failed, retry, released, store.Finish{D: stale, R: notification.DeliveryResult{Status: notification.Failed, ErrorCode: 400, ErrorMessage: "late"}},
		store.Finish{D: current, R: notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "2"}})

	ok, err := s.FinishDeliveries(ctx, fs)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		if want := f.D.TrackingID != stale.TrackingID || f.D.Attempts == current.Attempts; ok[i] != want {
			t.Errorf("outcome %d (%s): written %v, want %v", i, f.R.Status, ok[i], want)
		}
	}
	for i, f := range fs[:5] {
		if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'delivered' AND messenger_message_id = $2
			AND lease_expires_at IS NULL AND delivered_as = 'sent' AND message_sent_at IS NOT NULL`, f.D.TrackingID, strconv.Itoa(100+i)); n != 1 {
			t.Errorf("delivery %d is not recorded with its own message id", i)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'failed' AND last_error_code = 400 AND last_error_message = 'bad'`, failed.D.TrackingID); n != 1 {
		t.Error("the failure is not recorded with its error")
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'retrying' AND attempts = 1 AND last_error_code = 500
		AND next_attempt_at > now() + interval '59 minutes'`, retry.D.TrackingID); n != 1 {
		t.Error("the retry is not recorded with its error and its next attempt")
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'retrying' AND attempts = 0 AND last_error_code = 0`, released.D.TrackingID); n != 1 {
		t.Error("the released attempt is counted or records an error")
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'delivered' AND attempts = 2
		AND messenger_message_id = '2' AND last_error_code = 0`, stale.TrackingID); n != 1 {
		t.Error("the row does not show the newer attempt's outcome alone")
	}
	after := usageOf(t, s, "acme")
	if after.Delivered-before.Delivered != 6 || after.PaidBroadcast-before.PaidBroadcast != 2 || after.Failed-before.Failed != 1 {
		t.Errorf("usage counted delivered %d, paid %d, failed %d; want 6, 2, 1", after.Delivered-before.Delivered,
			after.PaidBroadcast-before.PaidBroadcast, after.Failed-before.Failed)
	}
}
