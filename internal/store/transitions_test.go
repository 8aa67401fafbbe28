package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// offsets are a row's send_at, expires_at, next_attempt_at and lease_expires_at relative to now; nil is
// NULL.
type offsets struct{ sendAt, expiresAt, nextAttemptAt, leaseExpiresAt *time.Duration }

func (o offsets) row(now time.Time) notification.Row {
	at := func(d *time.Duration) *time.Time {
		if d == nil {
			return nil
		}
		t := now.Add(*d)
		return &t
	}
	return notification.Row{SendAt: at(o.sendAt), ExpiresAt: at(o.expiresAt), NextAttemptAt: at(o.nextAttemptAt), LeaseExpiresAt: at(o.leaseExpiresAt)}
}

// stateRow is a notification put in a state with some offsets.
type stateRow struct {
	id      string
	from    notification.Status
	name    string
	offsets offsets
}

// stateRows inserts a notification of user "ok" (chat 1, attempt 1) in every state with each set of
// offsets: due or not (send_at, next_attempt_at, the lease), with or without an expires_at, passed or not.
func stateRows(t *testing.T, s *store.Store) []stateRow {
	t.Helper()
	ago, ahead := -time.Hour, time.Hour
	variants := []struct {
		name    string
		offsets offsets
	}{
		{"unset", offsets{}},
		{"due", offsets{sendAt: &ago, nextAttemptAt: &ago, leaseExpiresAt: &ago}},
		{"not due", offsets{sendAt: &ahead, nextAttemptAt: &ahead, leaseExpiresAt: &ahead}},
		{"due, expires later", offsets{sendAt: &ago, nextAttemptAt: &ago, leaseExpiresAt: &ago, expiresAt: &ahead}},
		{"due, past expires_at", offsets{sendAt: &ago, nextAttemptAt: &ago, leaseExpiresAt: &ago, expiresAt: &ago}},
		{"not due, past expires_at", offsets{sendAt: &ahead, nextAttemptAt: &ahead, leaseExpiresAt: &ahead, expiresAt: &ago}},
	}
	secs := func(d *time.Duration) *float64 {
		if d == nil {
			return nil
		}
		s := d.Seconds()
		return &s
	}
	var rows []stateRow
	for _, st := range notification.Statuses {
		for _, v := range variants {
			if st == notification.Delivering && v.offsets.leaseExpiresAt == nil {
				continue // no such row: every claim sets a lease
			}
			id := queued(t, s)
			exec(t, s, `UPDATE notifications SET status = $2, attempts = 1,
				send_at = now() + make_interval(secs => $3), expires_at = now() + make_interval(secs => $4),
				next_attempt_at = now() + make_interval(secs => $5), lease_expires_at = now() + make_interval(secs => $6)
				WHERE tracking_id = $1`, id, string(st), secs(v.offsets.sendAt), secs(v.offsets.expiresAt),
				secs(v.offsets.nextAttemptAt), secs(v.offsets.leaseExpiresAt))
			rows = append(rows, stateRow{id: id, from: st, name: v.name, offsets: v.offsets})
		}
	}
	return rows
}

// Every transition of internal/notification's table, driven through the store's own statement from every
// state, due or not, before or past expires_at: each statement moves exactly the rows the table allows,
// to the state it names, and leaves the others. The SQL the store renders and the Go rules cannot disagree.
func TestTheStoreMovesWhatTheStateMachineAllows(t *testing.T) {
	ctx := context.Background()
	// Each drive runs the event's statement on the rows and returns the ids the store reports it moved
	// (for the redrive: handed out to publish again).
	type drive func(t *testing.T, s *store.Store, rows []stateRow) map[string]bool
	perRow := func(one func(s *store.Store, r stateRow) (bool, error)) drive {
		return func(t *testing.T, s *store.Store, rows []stateRow) map[string]bool {
			moved := map[string]bool{}
			for _, r := range rows {
				ok, err := one(s, r)
				if err != nil {
					t.Fatalf("%s (%s): %v", r.from, r.name, err)
				}
				moved[r.id] = ok
			}
			return moved
		}
	}
	ids := func(list []string) map[string]bool {
		moved := map[string]bool{}
		for _, id := range list {
			moved[id] = true
		}
		return moved
	}
	finish := func(e notification.Event) drive {
		return perRow(func(s *store.Store, r stateRow) (bool, error) {
			res := notification.DeliveryResult{Status: e.To(), ErrorCode: 500, ErrorMessage: "x"}
			switch e {
			case notification.Deliver:
				res = notification.DeliveryResult{Status: e.To(), MessengerMessageID: "7"}
			case notification.Retry:
				res.RetryIn = time.Minute
			}
			d := notification.Delivery{TrackingID: r.id, Kind: notification.KindTenant, TenantID: "acme", UserID: "ok", ChatID: 1, Attempts: 1}
			return s.FinishDelivery(ctx, d, res)
		})
	}
	drives := map[notification.Event]drive{
		notification.Release: func(t *testing.T, s *store.Store, _ []stateRow) map[string]bool {
			released, locked, err := s.ReleaseScheduled(ctx, 1000)
			if err != nil || !locked {
				t.Fatalf("release: %v (locked %v)", err, locked)
			}
			var list []string
			for _, p := range released {
				list = append(list, p.TrackingID)
			}
			return ids(list)
		},
		notification.Claim: perRow(func(s *store.Store, r stateRow) (bool, error) {
			_, err := s.ClaimDelivery(ctx, r.id, time.Minute)
			if errors.Is(err, store.ErrNotClaimable) {
				return false, nil
			}
			return err == nil, err
		}),
		notification.Redrive: func(t *testing.T, s *store.Store, _ []stateRow) map[string]bool {
			var handed []string
			// Queued rows are handed out too once they have waited an hour (a lost envelope: the publish's
			// rule, not a transition); none of these has.
			_, err := s.RepublishStuck(ctx, 1000, time.Hour, 0, func(_ context.Context, batch []store.Pending) []string {
				for _, p := range batch {
					handed = append(handed, p.TrackingID)
				}
				return handed // this one batch: the limit holds every row
			})
			if err != nil {
				t.Fatal(err)
			}
			return ids(handed)
		},
		notification.Deliver: finish(notification.Deliver),
		notification.Retry:   finish(notification.Retry),
		notification.Block:   finish(notification.Block),
		notification.Unlink:  finish(notification.Unlink),
		notification.Fail:    finish(notification.Fail),
		notification.Lapse:   finish(notification.Lapse),
		notification.Erase:   finish(notification.Erase),
		notification.Cancel: perRow(func(s *store.Store, r stateRow) (bool, error) {
			_, err := s.CancelNotification(ctx, "acme", r.id)
			var nc *store.NotCancellable
			if errors.As(err, &nc) {
				return false, nil
			}
			return err == nil, err
		}),
		notification.Expire: func(t *testing.T, s *store.Store, _ []stateRow) map[string]bool {
			expired, err := s.ExpireDue(ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			return ids(expired)
		},
		// The user links another messenger account (chat 99): what waits for chat 1 ends.
		notification.Relink: func(t *testing.T, s *store.Store, rows []stateRow) map[string]bool {
			before := statuses(t, s)
			digest := sha256.Sum256([]byte("relink"))
			if _, err := s.CreateLinkToken(ctx, "acme", "ok", digest, "Acme"); err != nil {
				t.Fatal(err)
			}
			effect, res := store.RedeemLinkToken(1, store.Redemption{Digest: digest, MessengerUserID: 99, ChatID: 99},
				func(store.LinkResult) store.NewNotification {
					return store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 99, Priority: 9, Body: "linked"}
				})
			if err := s.ApplyUpdates(ctx, []*store.Effect{effect}); err != nil || res.Outcome != store.LinkLinked {
				t.Fatalf("relink: %v, %+v", err, res)
			}
			unlinked := finishEndings(t, s, effect)
			after, moved, n := statuses(t, s), map[string]bool{}, 0
			for _, r := range rows {
				if moved[r.id] = after[r.id] != before[r.id]; moved[r.id] {
					n++
				}
			}
			if n != unlinked {
				t.Errorf("the relink's pass reports %d unlinked, %d rows changed", unlinked, n)
			}
			return moved
		},
		// The tenant changes its bot: what waits to go through the old one's links ends.
		notification.ChangeBot: func(t *testing.T, s *store.Store, rows []stateRow) map[string]bool {
			before := statuses(t, s)
			bot := ownBot(t, s, 800)
			c, err := s.SetTenantBot(ctx, "acme", bot)
			if err != nil || !c.Changed {
				t.Fatalf("change of bot: %+v %v", c, err)
			}
			after, moved, n := statuses(t, s), map[string]bool{}, 0
			for _, r := range rows {
				if moved[r.id] = after[r.id] != before[r.id]; moved[r.id] {
					n++
				}
			}
			if n != c.Unlinked {
				t.Errorf("the change of bot reports %d unlinked, %d rows changed", c.Unlinked, n)
			}
			return moved
		},
		// A claimed notification is held for quiet hours (§14), under its attempt's number.
		notification.Hold: perRow(func(s *store.Store, r stateRow) (bool, error) {
			return s.HoldDelivery(ctx, notification.Delivery{TrackingID: r.id, Attempts: 1}, time.Now().Add(time.Hour))
		}),
		// A worker claims one item of a digest that holds every row: the others are gathered with it.
		notification.Gather: func(t *testing.T, s *store.Store, rows []stateRow) map[string]bool {
			lead := queued(t, s)
			d, err := s.ClaimDelivery(ctx, lead, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var id int64
			if err := s.Pool().QueryRow(ctx, `INSERT INTO digests (tenant_id, user_id, key, format, max_items, items, closes_at)
				VALUES ('acme', 'ok', 'k', '', 50, $1, now()) RETURNING id`, len(rows)+1).Scan(&id); err != nil {
				t.Fatal(err)
			}
			exec(t, s, `INSERT INTO digest_items (tracking_id, digest_id, position) VALUES ($1, $2, 1)`, lead, id)
			for i, r := range rows {
				exec(t, s, `INSERT INTO digest_items (tracking_id, digest_id, position) VALUES ($1, $2, $3)`, r.id, id, i+2)
			}
			items, err := s.GatherDigest(ctx, d, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var list []string
			for _, it := range items {
				if it.TrackingID != lead {
					list = append(list, it.TrackingID)
				}
			}
			return ids(list)
		},
		// The user opts out of the tenant: what waits ends.
		notification.OptOut: func(t *testing.T, s *store.Store, rows []stateRow) map[string]bool {
			before := statuses(t, s)
			res, err := s.OptOut(ctx, "acme", "ok", "", consent.ByUser)
			if err != nil || !res.Made {
				t.Fatalf("opt-out: %+v %v", res, err)
			}
			after, moved, n := statuses(t, s), map[string]bool{}, 0
			for _, r := range rows {
				if moved[r.id] = after[r.id] != before[r.id]; moved[r.id] {
					n++
				}
			}
			if n != res.Ended {
				t.Errorf("the opt-out reports %d ended, %d rows changed", res.Ended, n)
			}
			return moved
		},
	}

	for _, e := range notification.Events {
		if e == notification.Accept || e == notification.Schedule {
			continue // from no row: TestTheStoreAcceptsAsTheStateMachineSays
		}
		t.Run(string(e), func(t *testing.T) {
			d, ok := drives[e]
			if !ok {
				t.Fatalf("no statement drives %s", e)
			}
			s := fixture(t)
			rows := stateRows(t, s)
			now := time.Now()
			moved := d(t, s, rows)
			got := statuses(t, s)
			var movedFrom []notification.Status
			for _, r := range rows {
				row := r.offsets.row(now)
				allowed := e.Allows(r.from, row, now)
				want := r.from
				switch {
				case allowed:
					want = e.To()
				case e == notification.Claim && notification.Expire.Allows(r.from, row, now):
					want = notification.Expire.To() // the claim expires what it may not take past its expires_at
				}
				if got[r.id] != want {
					t.Errorf("%s from %s (%s): %s, want %s", e, r.from, r.name, got[r.id], want)
				}
				if moved[r.id] != allowed {
					t.Errorf("%s from %s (%s): the store reports moved %v, the table allows %v", e, r.from, r.name, moved[r.id], allowed)
				}
				if moved[r.id] && !slices.Contains(movedFrom, r.from) {
					movedFrom = append(movedFrom, r.from)
				}
			}
			slices.SortFunc(movedFrom, func(a, b notification.Status) int {
				return slices.Index(notification.Statuses, a) - slices.Index(notification.Statuses, b)
			})
			if !slices.Equal(movedFrom, e.From()) {
				t.Errorf("%s moved notifications from %v, the table from %v", e, movedFrom, e.From())
			}
		})
	}
}

// A send is stored in the state of accept (queued) or, when its send_at is ahead, of schedule; a system
// message in accept's.
func TestTheStoreAcceptsAsTheStateMachineSays(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	sendAt := time.Now().Add(time.Hour)
	queuedID := queued(t, s)
	scheduled := tenantNotification("ok")
	scheduled.Status, scheduled.SendAt = notification.Scheduled, &sendAt
	if got, err := s.InsertTenantNotifications(ctx, []store.NewNotification{scheduled}); err != nil || len(got) != 1 {
		t.Fatalf("insert scheduled: %v %v", got, err)
	}
	system := store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 1, Priority: 9, Body: "reply"}
	if err := s.InsertSystemMessage(ctx, system); err != nil {
		t.Fatal(err)
	}
	got := statuses(t, s)
	for id, want := range map[string]notification.Status{queuedID: notification.Accept.To(), scheduled.TrackingID: notification.Schedule.To(), system.TrackingID: notification.Accept.To()} {
		if got[id] != want {
			t.Errorf("stored %s, want %s", got[id], want)
		}
	}
}

// statuses reads the state of every notification.
func statuses(t *testing.T, s *store.Store) map[string]notification.Status {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT tracking_id::text, status FROM notifications`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]notification.Status{}
	for rows.Next() {
		var id string
		var st notification.Status
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
