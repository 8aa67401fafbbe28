package store_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

func at(d time.Duration) *time.Time {
	t := time.Now().Add(d)
	return &t
}

// insert stores n and fails the test unless the gate let it in.
func insert(t *testing.T, s *store.Store, n store.NewNotification) string {
	t.Helper()
	got, err := s.InsertTenantNotifications(context.Background(), []store.NewNotification{n})
	if _, ok := got[n.TrackingID]; err != nil || !ok {
		t.Fatalf("insert: %v %v", got, err)
	}
	return n.TrackingID
}

func statusOf(t *testing.T, s *store.Store, id string) notification.Status {
	t.Helper()
	var st notification.Status
	if err := s.Pool().QueryRow(context.Background(), `SELECT status FROM notifications WHERE tracking_id = $1`, id).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// The send options are stored as given and read back in the Notification view; a send without them reads
// as {} and nulls. A scheduled notification is not marked as being published.
func TestInsertStoresTheSendOptions(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	n := tenantNotification("ok")
	n.Status, n.Metadata, n.SendAt, n.ExpiresAt = notification.Scheduled, map[string]string{"order": "42", "a.b-c_d": "é"}, at(time.Hour), at(2*time.Hour)
	plain := tenantNotification("ok")
	insert(t, s, n)
	insert(t, s, plain)
	v, err := s.GetNotification(ctx, "acme", n.TrackingID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != notification.Scheduled || v.Metadata["order"] != "42" || v.Metadata["a.b-c_d"] != "é" || len(v.Metadata) != 2 ||
		v.SendAt == nil || !v.SendAt.Equal(n.SendAt.Truncate(time.Microsecond)) || v.ExpiresAt == nil {
		t.Errorf("scheduled view %+v, want the options as given", v)
	}
	if c := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND published_at IS NULL`, n.TrackingID); c != 1 {
		t.Error("a scheduled notification is marked as being published")
	}
	p, err := s.GetNotification(ctx, "acme", plain.TrackingID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != notification.Queued || p.Metadata == nil || len(p.Metadata) != 0 || p.SendAt != nil || p.ExpiresAt != nil || p.DeliveredAt != nil || p.NextAttemptAt != nil {
		t.Errorf("plain view %+v, want queued, {} and nulls", p)
	}
	if c := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND metadata IS NULL AND send_at IS NULL AND expires_at IS NULL`, plain.TrackingID); c != 1 {
		t.Error("a send without options stored something in the option columns")
	}
}

// scheduled: send_at reached → queued, by one scheduler at a time, never before send_at, never after
// expires_at (those are the sweep's).
func TestReleaseScheduledMovesOnlyDueRowsOneSchedulerAtATime(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	mk := func(sendIn, expiresIn time.Duration) string {
		n := tenantNotification("ok")
		n.Status, n.SendAt = notification.Scheduled, at(time.Hour)
		id := insert(t, s, n)
		exec(t, s, `UPDATE notifications SET send_at = now() + make_interval(secs => $2) WHERE tracking_id = $1`, id, sendIn.Seconds())
		if expiresIn != 0 {
			exec(t, s, `UPDATE notifications SET expires_at = now() + make_interval(secs => $2) WHERE tracking_id = $1`, id, expiresIn.Seconds())
		}
		return id
	}
	due, notDue, dueButExpired := mk(-time.Second, 0), mk(time.Hour, 0), mk(-2*time.Second, -time.Second)

	// Another scheduler holds the lock: this one does nothing.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, store.SchedulerLockForTest); err != nil {
		t.Fatal(err)
	}
	got, locked, err := s.ReleaseScheduled(ctx, 10)
	if err != nil || locked || len(got) != 0 {
		t.Fatalf("with the lock held elsewhere: released %v, locked %v, err %v; want nothing", got, locked, err)
	}
	_ = tx.Rollback(ctx)

	got, locked, err = s.ReleaseScheduled(ctx, 10)
	if err != nil || !locked {
		t.Fatalf("release: %v (locked %v)", err, locked)
	}
	if len(got) != 1 || got[0].TrackingID != due || got[0].TenantID != "acme" || got[0].UserID != "ok" || got[0].Priority != 5 {
		t.Fatalf("released %+v, want only the due one", got)
	}
	if c := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'queued' AND published_at IS NOT NULL`, due); c != 1 {
		t.Error("the released notification is not queued with a publish under way")
	}
	if st := statusOf(t, s, notDue); st != notification.Scheduled {
		t.Errorf("a notification not yet due is %s", st)
	}
	if st := statusOf(t, s, dueButExpired); st != notification.Scheduled {
		t.Errorf("a due notification past its expires_at was released (%s); the sweep expires it", st)
	}
	if got, _, _ := s.ReleaseScheduled(ctx, 10); len(got) != 0 {
		t.Errorf("released %v again", got)
	}
}

// A backlog is released in batches of the given size, in send_at order.
func TestReleaseScheduledInBatches(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	var ns []store.NewNotification
	for i := range 25 {
		n := tenantNotification("ok")
		n.Status, n.SendAt = notification.Scheduled, at(-time.Duration(25-i)*time.Second)
		ns = append(ns, n)
	}
	if _, err := s.InsertTenantNotifications(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var order []string
	for {
		got, _, err := s.ReleaseScheduled(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 10 {
			t.Fatalf("a batch of %d, want at most 10", len(got))
		}
		if len(got) == 0 {
			break
		}
		batch := make([]string, len(got))
		for i, p := range got {
			batch[i] = p.TrackingID
		}
		order = append(order, batch...)
	}
	if len(order) != 25 {
		t.Fatalf("released %d, want 25", len(order))
	}
	// Batches follow send_at: each batch holds the earliest due rows left.
	for i := 0; i < 25; i += 10 {
		end := min(i+10, 25)
		want := make([]string, 0, 10)
		for _, n := range ns[i:end] {
			want = append(want, n.TrackingID)
		}
		got := slices.Clone(order[i:end])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("batch at %d is not the earliest send_at rows", i)
		}
	}
}

// expires_at reached: scheduled, queued, retrying → expired (the sweep); a running attempt is left to its
// result; a dead worker's delivering row expires; terminal rows and rows without expires_at never change.
func TestExpireDueFromEachState(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	cases := []struct {
		name, set string
		want      notification.Status
	}{
		{"scheduled", "status = 'scheduled', published_at = NULL", notification.Expired},
		{"queued", "", notification.Expired},
		{"retrying", "status = 'retrying', attempts = 1, next_attempt_at = now() + interval '1 hour'", notification.Expired},
		{"delivering, live lease", "status = 'delivering', attempts = 1, lease_expires_at = now() + interval '1 hour'", notification.Delivering},
		{"delivering, worker dead", "status = 'delivering', attempts = 1, lease_expires_at = now() - interval '1 second'", notification.Expired},
		{"delivered", "status = 'delivered'", notification.Delivered},
		{"failed", "status = 'failed'", notification.Failed},
		{"cancelled", "status = 'cancelled'", notification.Cancelled},
	}
	ids := map[string]string{}
	for _, c := range cases {
		id := queued(t, s)
		exec(t, s, `UPDATE notifications SET expires_at = now() - interval '1 second' WHERE tracking_id = $1`, id)
		if c.set != "" {
			exec(t, s, `UPDATE notifications SET `+c.set+` WHERE tracking_id = $1`, id)
		}
		ids[c.name] = id
	}
	notYet := queued(t, s)
	exec(t, s, `UPDATE notifications SET expires_at = now() + interval '1 hour' WHERE tracking_id = $1`, notYet)
	never := queued(t, s)

	expired, err := s.ExpireDue(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if got := statusOf(t, s, ids[c.name]); got != c.want {
			t.Errorf("%s past expires_at: %s, want %s", c.name, got, c.want)
		}
	}
	if n := len(expired); n != 4 {
		t.Errorf("the sweep reports %d expired, want 4", n)
	}
	for _, id := range []string{notYet, never} {
		if got := statusOf(t, s, id); got != notification.Queued {
			t.Errorf("a notification not past its expires_at is %s", got)
		}
	}
	// In batches.
	for range 5 {
		id := queued(t, s)
		exec(t, s, `UPDATE notifications SET expires_at = now() - interval '1 second' WHERE tracking_id = $1`, id)
	}
	if got, err := s.ExpireDue(ctx, 3); err != nil || len(got) != 3 {
		t.Errorf("a sweep of 3: %v, %v", got, err)
	}
	if got, err := s.ExpireDue(ctx, 3); err != nil || len(got) != 2 {
		t.Errorf("the next sweep of 3: %v, %v; want the remaining 2", got, err)
	}
}

// No attempt starts after expires_at: the claim refuses the notification and moves it to expired at
// once, before any sweep.
func TestClaimRefusesAndExpiresAfterExpiresAt(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	for _, set := range []string{"", "status = 'retrying', attempts = 1, next_attempt_at = now() - interval '1 second'"} {
		id := queued(t, s)
		exec(t, s, `UPDATE notifications SET expires_at = now() - interval '1 millisecond' WHERE tracking_id = $1`, id)
		if set != "" {
			exec(t, s, `UPDATE notifications SET `+set+` WHERE tracking_id = $1`, id)
		}
		_, err := s.ClaimDelivery(ctx, id, time.Minute)
		var nc *store.NotClaimable
		if !errors.As(err, &nc) || nc.Status != notification.Expired {
			t.Fatalf("claim after expires_at (%q): %v, want not claimable: expired", set, err)
		}
		if got := statusOf(t, s, id); got != notification.Expired {
			t.Errorf("the refused notification is %s, want expired", got)
		}
	}
	// Before expires_at, the claim carries it for the state machine.
	id := queued(t, s)
	exec(t, s, `UPDATE notifications SET expires_at = now() + interval '1 hour' WHERE tracking_id = $1`, id)
	d, err := s.ClaimDelivery(ctx, id, time.Minute)
	if err != nil || d.ExpiresAt == nil {
		t.Fatalf("claim before expires_at: %+v, %v; want claimed with its expires_at", d, err)
	}
	// A scheduled notification is never claimable, even when its envelope arrives.
	n := tenantNotification("ok")
	n.Status, n.SendAt = notification.Scheduled, at(time.Hour)
	sid := insert(t, s, n)
	var nc *store.NotClaimable
	if _, err := s.ClaimDelivery(ctx, sid, time.Minute); !errors.As(err, &nc) || nc.Status != notification.Scheduled {
		t.Errorf("claim of a scheduled notification: %v, want not claimable", err)
	}
}

// cancel: scheduled, queued, retrying → cancelled; delivering and terminal states are refused with their
// state; another tenant's notification and a system message are not found.
func TestCancelFromEachState(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, set string
		cancelled bool
		status    notification.Status // the state named by the refusal
	}{
		{"scheduled", "status = 'scheduled', send_at = now() + interval '1 hour', published_at = NULL", true, ""},
		{"queued", "", true, ""},
		{"retrying", "status = 'retrying', attempts = 1, next_attempt_at = now() + interval '1 hour'", true, ""},
		{"delivering", "status = 'delivering', attempts = 1, lease_expires_at = now() + interval '1 hour'", false, notification.Delivering},
		{"delivered", "status = 'delivered'", false, notification.Delivered},
		{"blocked", "status = 'blocked'", false, notification.Blocked},
		{"failed", "status = 'failed'", false, notification.Failed},
		{"unlinked", "status = 'unlinked'", false, notification.Unlinked},
		{"cancelled", "status = 'cancelled'", false, notification.Cancelled},
		{"expired", "status = 'expired'", false, notification.Expired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := queued(t, s)
			if c.set != "" {
				exec(t, s, `UPDATE notifications SET `+c.set+` WHERE tracking_id = $1`, id)
			}
			if _, err := s.CancelNotification(ctx, "globex", id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("another tenant's cancel: %v, want ErrNotFound", err)
			}
			v, err := s.CancelNotification(ctx, "acme", id)
			if c.cancelled {
				if err != nil || v.Status != notification.Cancelled || v.TrackingID != id {
					t.Fatalf("cancel: %+v, %v; want the notification, cancelled", v, err)
				}
				return
			}
			var nc *store.NotCancellable
			if !errors.As(err, &nc) || nc.Status != c.status || !strings.Contains(nc.Error(), string(c.status)) {
				t.Fatalf("cancel: %v, want refused naming %s", err, c.status)
			}
			if got := statusOf(t, s, id); got != c.status {
				t.Errorf("a refused cancel changed the state to %s", got)
			}
		})
	}
	sys := store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, TenantID: "acme", ChatID: 1, Priority: 9, Body: "reply"}
	if err := s.InsertSystemMessage(ctx, sys); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelNotification(ctx, "acme", sys.TrackingID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel of a system message: %v, want ErrNotFound", err)
	}
	if _, err := s.CancelNotification(ctx, "acme", newID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel of an unknown id: %v, want ErrNotFound", err)
	}
}

// A cancel racing a worker's claim: exactly one of them wins each notification. Either the cancel answers
// the notification cancelled and the claim refuses it (it is never sent), or the claim takes it to
// delivering and the cancel is refused naming delivering.
func TestCancelRacesClaim(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	const n = 200
	ids := make([]string, n)
	for i := range ids {
		ids[i] = queued(t, s)
	}
	var cancelled, claimed int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		var claimErr, cancelErr error
		var inner sync.WaitGroup
		start := make(chan struct{})
		inner.Go(func() { <-start; _, claimErr = s.ClaimDelivery(ctx, id, time.Minute) })
		inner.Go(func() { <-start; _, cancelErr = s.CancelNotification(ctx, "acme", id) })
		wg.Go(func() {
			close(start)
			inner.Wait()
			var nc *store.NotClaimable
			var ncc *store.NotCancellable
			switch {
			case cancelErr == nil && errors.As(claimErr, &nc) && nc.Status == notification.Cancelled:
				mu.Lock()
				cancelled++
				mu.Unlock()
			case claimErr == nil && errors.As(cancelErr, &ncc) && ncc.Status == notification.Delivering:
				mu.Lock()
				claimed++
				mu.Unlock()
			default:
				t.Errorf("%s: claim %v, cancel %v: not exactly one winner", id, claimErr, cancelErr)
			}
		})
	}
	wg.Wait()
	if c := count(t, s, `SELECT count(*) FROM notifications WHERE status = 'cancelled'`); c != cancelled {
		t.Errorf("%d rows cancelled, %d cancels answered", c, cancelled)
	}
	if c := count(t, s, `SELECT count(*) FROM notifications WHERE status = 'delivering'`); c != claimed {
		t.Errorf("%d rows delivering, %d claims answered", c, claimed)
	}
	t.Logf("%d cancelled first, %d claimed first", cancelled, claimed)
}

// Walking the pages returns each notification once, newest first, only the tenant's, even while new ones
// are inserted between the pages (they sort before the first page); ties of created_at (one statement
// inserts many rows at the same now()) are broken by tracking_id.
func TestListPagesEachNotificationOnceWhileInserting(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	verifiedUser(t, s, "globex", "ok", 9)
	batch := func(tenant string, k int) {
		var ns []store.NewNotification
		for range k {
			n := tenantNotification("ok")
			n.TenantID = tenant
			ns = append(ns, n)
		}
		if _, err := s.InsertTenantNotifications(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		batch("acme", 25)
		batch("globex", 10)
	}
	initial := map[string]bool{}
	page, _, err := s.ListNotifications(ctx, "acme", store.ListFilter{}, store.MaxListLimit, nil)
	if err != nil {
		t.Fatal(err)
	}
	all, next, err := s.ListNotifications(ctx, "acme", store.ListFilter{}, store.MaxListLimit, &store.ListCursor{CreatedAt: page[len(page)-1].CreatedAt, TrackingID: page[len(page)-1].TrackingID})
	if err != nil || next != nil {
		t.Fatal(err, next)
	}
	for _, v := range append(page, all...) {
		initial[v.TrackingID] = true
	}
	if len(initial) != 250 {
		t.Fatalf("the two pages of 200 hold %d distinct notifications, want 250", len(initial))
	}

	seen := map[string]int{}
	var cursor *store.ListCursor
	var prev *notification.View
	pages := 0
	for {
		got, next, err := s.ListNotifications(ctx, "acme", store.ListFilter{}, 7, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			v := got[i]
			seen[v.TrackingID]++
			if prev != nil && (v.CreatedAt.After(prev.CreatedAt) || v.CreatedAt.Equal(prev.CreatedAt) && v.TrackingID >= prev.TrackingID) {
				t.Fatalf("not newest first: %s (%v) after %s (%v)", v.TrackingID, v.CreatedAt, prev.TrackingID, prev.CreatedAt)
			}
			prev = &v
		}
		pages++
		if pages%3 == 0 {
			batch("acme", 5) // new ones arrive while the walk goes on
		}
		if next == nil {
			break
		}
		if len(got) != 7 {
			t.Fatalf("a page of %d before the last, want 7", len(got))
		}
		cursor = next
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s listed %d times", id, k)
		}
		if !initial[id] {
			t.Errorf("%s was not there when the walk began (or is not acme's) yet was listed behind the cursor", id)
		}
	}
	for id := range initial {
		if seen[id] != 1 {
			t.Errorf("%s, there from the start, listed %d times", id, seen[id])
		}
	}
}

// The filters select by state, user and creation time; a cursor works only with the filters it was
// handed out with.
func TestListFiltersAndCursorBinding(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	verifiedUser(t, s, "acme", "ok2", 3)
	var ids []string
	for i := range 12 {
		n := tenantNotification([]string{"ok", "ok2"}[i%2])
		id := insert(t, s, n)
		exec(t, s, `UPDATE notifications SET created_at = now() - make_interval(secs => $2) WHERE tracking_id = $1`, id, float64(12-i))
		ids = append(ids, id)
	}
	exec(t, s, `UPDATE notifications SET status = 'failed' WHERE tracking_id = ANY($1::uuid[])`, ids[:3])
	exec(t, s, `UPDATE notifications SET status = 'cancelled' WHERE tracking_id = $1`, ids[3])
	list := func(f store.ListFilter) []string {
		t.Helper()
		got, _, err := s.ListNotifications(ctx, "acme", f, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(got))
		for i, v := range got {
			out[i] = v.TrackingID
		}
		return out
	}
	rev := func(ss []string) []string { c := slices.Clone(ss); slices.Reverse(c); return c }
	if got := list(store.ListFilter{Statuses: []notification.Status{notification.Failed, notification.Cancelled}}); !slices.Equal(got, rev(ids[:4])) {
		t.Errorf("status=failed,cancelled listed %v, want %v", got, rev(ids[:4]))
	}
	if got := list(store.ListFilter{UserID: "ok2"}); len(got) != 6 {
		t.Errorf("user_id=ok2 listed %d, want 6", len(got))
	}
	var createdOf = func(id string) time.Time {
		v, err := s.GetNotification(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		return v.CreatedAt
	}
	after, before := createdOf(ids[2]), createdOf(ids[8])
	if got := list(store.ListFilter{CreatedAfter: &after, CreatedBefore: &before}); !slices.Equal(got, rev(ids[3:8])) {
		t.Errorf("created between: %v, want %v (both bounds exclusive)", got, rev(ids[3:8]))
	}

	f := store.ListFilter{UserID: "ok"}
	_, next, err := s.ListNotifications(ctx, "acme", f, 2, nil)
	if err != nil || next == nil {
		t.Fatal(err)
	}
	enc := next.Encode(f)
	if c, err := store.DecodeListCursor(enc, f); err != nil || c.TrackingID != next.TrackingID || !c.CreatedAt.Equal(next.CreatedAt) {
		t.Errorf("round trip: %+v, %v; want %+v", c, err, next)
	}
	if _, err := store.DecodeListCursor(enc, store.ListFilter{UserID: "ok2"}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a cursor with other filters: %v, want ErrBadCursor", err)
	}
	forged := func(at time.Time) string {
		return store.ListCursor{CreatedAt: at, TrackingID: next.TrackingID}.Encode(f)
	}
	for _, bad := range []string{"", "garbage", enc[:len(enc)-2], forged(time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC)),
		forged(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), forged(time.Unix(-1, 0))} {
		if _, err := store.DecodeListCursor(bad, f); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: %v, want ErrBadCursor", bad, err)
		}
	}
}

// The list, the scheduler and the expiry sweep are served by their indexes: the list by the one that
// starts with the tenant (whatever the filters), the scheduler and the sweep by their partial indexes
// (which the hot path's rows never enter). The planner is told to avoid sequential scans, as it would on a
// table this small, so that the test shows which index can serve each query.
func TestQueriesUseTheirIndexes(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	plan := func(query string, args ...any) string {
		t.Helper()
		var out []string
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `EXPLAIN `+query, args...)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", query, err)
		}
		return strings.Join(out, "\n")
	}
	now := time.Now()
	filters := []store.ListFilter{
		{},
		{Statuses: []notification.Status{notification.Failed}},
		{UserID: "ok", CreatedAfter: &now, CreatedBefore: &now},
	}
	for i, f := range filters {
		for _, after := range []*store.ListCursor{nil, {CreatedAt: now, TrackingID: newID()}} {
			q, args := store.ListSQLForTest("acme", f, 51, after)
			p := plan(q, args...)
			// One user's list walks that user's rows only, not the tenant's until a page of the user's is found.
			index := "notifications_tenant_list_idx"
			if f.UserID != "" {
				index = "notifications_user_list_idx"
			}
			if !strings.Contains(p, index) || strings.Contains(p, "Sort") {
				t.Errorf("list %d (cursor %v) is not an ordered walk of %s:\n%s", i, after != nil, index, p)
			}
			if after != nil && !regexp.MustCompile(`Index Cond: \(\(tenant_id = .*ROW\(created_at, tracking_id\) <`).MatchString(p) {
				t.Errorf("list %d: the cursor is not a range condition of the index (a deep page would scan every newer row):\n%s", i, p)
			}
		}
	}
	if p := plan(strings.ReplaceAll(store.ReleaseSQLForTest, "$1", "500")); !strings.Contains(p, "notifications_scheduled_idx") {
		t.Errorf("the scheduler does not read notifications_scheduled_idx:\n%s", p)
	}
	if p := plan(strings.ReplaceAll(store.ExpireDueSQLForTest(), "$1", "500")); !strings.Contains(p, "notifications_expiry_idx") {
		t.Errorf("the expiry sweep does not read notifications_expiry_idx:\n%s", p)
	}
}

// A user as the tenant sees it: linked or not, the verification state, never the chat or the phone.
func TestGetUser(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO users (tenant_id, user_id) VALUES ('acme', 'fresh')`)
	exec(t, s, `UPDATE phone_verifications SET phone_last4 = '4567', verified_at = now() WHERE user_id = 'ok'`)
	ok, err := s.GetUser(ctx, "acme", "ok")
	if err != nil || ok.LinkedAt == nil || ok.PhoneVerification != "verified" || ok.PhoneLast4 == nil || *ok.PhoneLast4 != "4567" || ok.VerifiedAt == nil {
		t.Errorf("verified user: %+v, %v", ok, err)
	}
	fresh, err := s.GetUser(ctx, "acme", "fresh")
	if err != nil || fresh.LinkedAt != nil || fresh.PhoneVerification != "unverified" || fresh.PhoneLast4 != nil {
		t.Errorf("user never linked: %+v, %v", fresh, err)
	}
	if _, err := s.GetUser(ctx, "acme", "never-seen"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown user: %v, want ErrNotFound", err)
	}
}

// Erasure removes the link, the phone verification, the link tokens and the user record, empties every
// body of the user's notifications (and their messenger message ids: TestEraseUserLeavesNoMessengerIdentityNorUserEvents),
// cancels the waiting ones and keeps the delivery metadata; a second
// erasure finds nothing; the user can no longer be sent to.
func TestEraseUser(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO link_tokens (digest, tenant_id, user_id, label, expires_at) VALUES (sha256('t'), 'acme', 'ok', 'L', now() + interval '1 hour')`)
	sched := tenantNotification("ok")
	sched.Status, sched.SendAt = notification.Scheduled, at(time.Hour)
	states := map[string]notification.Status{
		insert(t, s, sched): notification.Cancelled,
		queued(t, s):        notification.Cancelled,
	}
	retrying, delivered := queued(t, s), queued(t, s)
	exec(t, s, `UPDATE notifications SET status = 'retrying', attempts = 1, next_attempt_at = now() + interval '1 hour' WHERE tracking_id = $1`, retrying)
	exec(t, s, `UPDATE notifications SET status = 'delivered', attempts = 1, messenger_message_id = '7' WHERE tracking_id = $1`, delivered)
	states[retrying], states[delivered] = notification.Cancelled, notification.Delivered
	other := tenantNotification("no") // another user of the tenant: untouched
	exec(t, s, `UPDATE phone_verifications SET status = 'verified' WHERE user_id = 'no'`)
	insert(t, s, other)

	e, err := s.EraseUser(ctx, "acme", "ok")
	if err != nil {
		t.Fatal(err)
	}
	if e.Cancelled != 3 || e.Erased != 4 {
		t.Errorf("erasure %+v, want 3 cancelled and 4 erased", e)
	}
	for id, want := range states {
		if got := statusOf(t, s, id); got != want {
			t.Errorf("notification %s: %s, want %s", id, got, want)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE user_id = 'ok' AND body <> ''`); n != 0 {
		t.Errorf("%d bodies left", n)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'delivered' AND attempts = 1 AND messenger_message_id IS NULL`, delivered); n != 1 {
		t.Error("the delivery metadata did not stay, or the messenger message id did")
	}
	for _, table := range []string{"users", "links", "link_tokens", "phone_verifications"} {
		if n := count(t, s, fmt.Sprintf(`SELECT count(*) FROM %s WHERE tenant_id = 'acme' AND user_id = 'ok'`, table)); n != 0 {
			t.Errorf("%d rows of %s left", n, table)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'queued' AND body = 'hello'`, other.TrackingID); n != 1 {
		t.Error("another user's notification was touched")
	}
	if _, err := s.EraseUser(ctx, "acme", "ok"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second erasure: %v, want ErrNotFound", err)
	}
	if _, err := s.GetUser(ctx, "acme", "ok"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("erased user read: %v, want ErrNotFound", err)
	}
	if got, err := s.InsertTenantNotifications(ctx, []store.NewNotification{tenantNotification("ok")}); err != nil || len(got) != 0 {
		t.Errorf("a send after the erasure: %v, %v; want refused by the gate", got, err)
	}
}

// A send racing the erasure of its user: both take the user's gate lock (shared for sends, exclusive for
// the erasure, which takes it first). Held open on either side, the other waits: a send that passed the
// gate commits, then the erasure cancels its notification; a send that comes after the erasure inserts
// nothing.
func TestEraseAndSendSerialiseOnTheGate(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()

	// The send first: its transaction passed the gate and stays open.
	n := tenantNotification("ok")
	sendHolds, release := make(chan struct{}), make(chan struct{})
	releaseSend := sync.OnceFunc(func() { close(release) })
	defer releaseSend() // also when the test fails, so that the store can close
	sendDone := make(chan error, 1)
	go func() {
		sendDone <- s.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			got, err := tx.InsertTenantNotifications(ctx, []store.NewNotification{n})
			if _, ok := got[n.TrackingID]; err == nil && !ok {
				err = errors.New("not accepted")
			}
			close(sendHolds)
			<-release
			return err
		})
	}()
	<-sendHolds
	eraseDone := make(chan error, 1)
	go func() { _, err := s.EraseUser(ctx, "acme", "ok"); eraseDone <- err }()
	select {
	case err := <-eraseDone:
		t.Fatalf("the erasure did not wait for the send that passed the gate (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	releaseSend()
	if err := <-sendDone; err != nil {
		t.Fatal(err)
	}
	if err := <-eraseDone; err != nil {
		t.Fatal(err)
	}
	if got := statusOf(t, s, n.TrackingID); got != notification.Cancelled {
		t.Errorf("the send that completed before the erasure is %s, want cancelled", got)
	}

	// The erasure first: it holds the user's gate lock and has deleted the verification, not committed yet.
	verifiedUser(t, s, "acme", "ok", 1)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after the commit below: a no-op
	if err := store.LockUserGateForTest(ctx, tx, "acme", "ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM phone_verifications WHERE tenant_id = 'acme' AND user_id = 'ok'`); err != nil {
		t.Fatal(err)
	}
	late := tenantNotification("ok")
	lateDone := make(chan map[string]store.Destination, 1)
	go func() {
		got, err := s.InsertTenantNotifications(ctx, []store.NewNotification{late})
		if err != nil {
			t.Error(err)
		}
		lateDone <- got
	}()
	select {
	case got := <-lateDone:
		t.Fatalf("the send did not wait for the erasure's delete (accepted %v)", got)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-lateDone; len(got) != 0 {
		t.Errorf("a send after the erasure was accepted: %v", got)
	}
}

// Many sends racing an erasure: every notification of the user that exists afterwards is cancelled with
// its body erased; none is left queued.
func TestEraseRacingSendsLeavesNothingQueued(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	for round := range 20 {
		if round > 0 {
			verifiedUser(t, s, "acme", "ok", 1)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if _, err := s.InsertTenantNotifications(ctx, []store.NewNotification{tenantNotification("ok")}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Go(func() {
			if _, err := s.EraseUser(ctx, "acme", "ok"); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		if n := count(t, s, `SELECT count(*) FROM notifications WHERE user_id = 'ok' AND (status <> 'cancelled' OR body <> '')`); n != 0 {
			t.Fatalf("round %d: %d notifications of the erased user not cancelled and emptied", round, n)
		}
	}
}
