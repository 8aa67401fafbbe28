package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/usage"
)

// usageOf is tenant's counts summed over the last two days (one period of a day or two), read as a tenant
// reads them.
func usageOf(t *testing.T, s *store.Store, tenant string) usage.Counts {
	t.Helper()
	now := time.Now().UTC()
	ps, err := s.Usage(context.Background(), tenant, usage.Window{From: now.Add(-48 * time.Hour), To: now.Add(time.Hour), Granularity: usage.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var sum usage.Counts
	for _, p := range ps {
		if p.TenantID != tenant {
			t.Fatalf("usage of %s returned a period of %s", tenant, p.TenantID)
		}
		got, into := p.Fields(), sum.Fields()
		for i := range got {
			*into[i] += *got[i]
		}
	}
	return sum
}

// finishAs claims id and writes result as its attempt's outcome.
func finishAs(t *testing.T, s *store.Store, id string, r notification.DeliveryResult) {
	t.Helper()
	d, err := s.ClaimDelivery(context.Background(), id, time.Minute)
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	if ok, err := s.FinishDelivery(context.Background(), d, r); err != nil || !ok {
		t.Fatalf("finish %s as %s: %v %v", id, r.Status, ok, err)
	}
}

// Every path that ends a notification counts it once, in the column internal/usage maps its state to: the
// attempt's outcomes (a paid delivery in paid_broadcast too), the tenant's cancel, the expiry, the endings
// after an opt-out, the erasure; a send whose publish failed is taken back from accepted; a retry and a
// system message count nothing.
func TestUsageCountsEveryEndingOnceInItsColumn(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	verifiedUser(t, s, "acme", "optout", 3)
	verifiedUser(t, s, "acme", "erased", 4)
	ids := make([]string, 9)
	for i := range ids {
		ids[i] = queued(t, s)
	}
	finishAs(t, s, ids[0], notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "1"})
	finishAs(t, s, ids[1], notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "2", PaidBroadcast: true})
	finishAs(t, s, ids[2], notification.DeliveryResult{Status: notification.Failed, ErrorCode: 400})
	finishAs(t, s, ids[3], notification.DeliveryResult{Status: notification.Blocked, ErrorCode: 403})
	finishAs(t, s, ids[4], notification.DeliveryResult{Status: notification.Unlinked, ErrorCode: 400})
	finishAs(t, s, ids[5], notification.DeliveryResult{Status: notification.Retrying, ErrorCode: 500, RetryIn: time.Hour})
	if _, err := s.CancelNotification(ctx, "acme", ids[6]); err != nil {
		t.Fatal(err)
	}
	exec(t, s, `UPDATE notifications SET expires_at = now() - interval '1 second' WHERE tracking_id = $1`, ids[7])
	if got, err := s.ExpireDue(ctx, 10); err != nil || len(got) != 1 {
		t.Fatalf("expire: %v %v", got, err)
	}
	if taken, err := s.DiscardNotifications(ctx, []string{ids[8]}); err != nil || !taken[ids[8]] {
		t.Fatalf("discard: %v %v", taken, err)
	}
	// Two for the user who opts out (ended blocked by the pass after it), one for the user who is erased.
	for _, u := range []string{"optout", "optout", "erased"} {
		n := tenantNotification(u)
		if _, err := s.InsertTenantNotifications(ctx, []store.NewNotification{n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.OptOut(ctx, "acme", "optout", "", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.FinishEndings(ctx, store.UserRef{TenantID: "acme", UserID: "optout"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EraseUser(ctx, "acme", "erased"); err != nil {
		t.Fatal(err)
	}
	exec(t, s, `INSERT INTO notifications (tracking_id, kind, tenant_id, chat_id, priority, body, status)
		VALUES (gen_random_uuid(), 'system', 'acme', 1, 9, 'a prompt', 'delivered')`)

	want := usage.Counts{Accepted: 11, Delivered: 2, PaidBroadcast: 1, Failed: 1, Blocked: 3, Unlinked: 1, Cancelled: 2, Expired: 1}
	if got := usageOf(t, s, "acme"); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
	// Ending twice is not possible: a second cancel, expiry or finish changes nothing and counts nothing.
	if _, err := s.CancelNotification(ctx, "acme", ids[6]); err == nil {
		t.Error("a second cancel succeeded")
	}
	if got := usageOf(t, s, "acme"); got != want {
		t.Errorf("after a second cancel: usage %+v, want %+v", got, want)
	}
}

// A worker that dies after the platform's answer leaves its claim to run out; another worker claims the
// notification again and delivers it. The dead attempt's late write and a retried write of the second's
// (its answer lost) are refused: the delivery is counted once.
func TestUsageCountsADeliveryOnceWhenItsWorkerDied(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	id := queued(t, s)
	first, err := s.ClaimDelivery(ctx, id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, s, `UPDATE notifications SET lease_expires_at = now() - interval '1 second' WHERE tracking_id = $1`, id)
	second, err := s.ClaimDelivery(ctx, id, time.Minute)
	if err != nil || second.Attempts != first.Attempts+1 {
		t.Fatalf("second claim: %+v %v", second, err)
	}
	delivered := notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "7"}
	if ok, err := s.FinishDelivery(ctx, second, delivered); err != nil || !ok {
		t.Fatalf("second worker's finish: %v %v", ok, err)
	}
	if ok, err := s.FinishDelivery(ctx, first, delivered); err != nil || ok {
		t.Fatalf("the dead worker's late finish: %v %v, want refused", ok, err)
	}
	if ok, err := s.FinishDelivery(ctx, second, delivered); err != nil || ok {
		t.Fatalf("a retried finish: %v %v, want refused", ok, err)
	}
	if got := usageOf(t, s, "acme"); got != (usage.Counts{Accepted: 1, Delivered: 1}) {
		t.Errorf("usage %+v, want 1 accepted and 1 delivered", got)
	}
}

// Many sends and deliveries of two tenants at once, each notification finished by two racing workers:
// the counts equal what the notifications table holds, exactly, and one tenant's hour is spread over a few
// rows, not one per statement.
func TestUsageIsExactUnderConcurrency(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	verifiedUser(t, s, "globex", "ok", 9)
	const goroutines, batches, per = 6, 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*batches*per*2)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := []string{"acme", "globex"}[g%2]
			for range batches {
				ns := make([]store.NewNotification, per)
				for i := range ns {
					ns[i] = tenantNotification("ok")
					ns[i].TenantID = tenant
				}
				got, err := s.InsertTenantNotifications(ctx, ns)
				if err != nil || len(got) != per {
					errs <- err
					continue
				}
				for _, n := range ns {
					d, err := s.ClaimDelivery(ctx, n.TrackingID, time.Minute)
					if err != nil {
						errs <- err
						continue
					}
					// Two writers race for the one outcome: only one may win, and count.
					var race sync.WaitGroup
					for range 2 {
						race.Add(1)
						go func() {
							defer race.Done()
							if _, err := s.FinishDelivery(ctx, d, notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "1"}); err != nil {
								errs <- err
							}
						}()
					}
					race.Wait()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		want := int64(goroutines / 2 * batches * per)
		if n := count(t, s, `SELECT count(*) FROM notifications WHERE tenant_id = $1 AND status = 'delivered'`, tenant); int64(n) != want {
			t.Fatalf("%s: %d delivered notifications, want %d", tenant, n, want)
		}
		if got := usageOf(t, s, tenant); got != (usage.Counts{Accepted: want, Delivered: want}) {
			t.Errorf("%s: usage %+v, want %d accepted and delivered", tenant, got, want)
		}
		if rows := count(t, s, `SELECT count(*) FROM usage_counts WHERE tenant_id = $1`, tenant); rows > 2*8 {
			t.Errorf("%s: %d rows of counts, want at most the shards of an hour or two", tenant, rows)
		}
	}
}

// The counts outlive the notifications: the retention purge of every notification leaves them, and the
// purge of usage removes only the hours older than 400 days, of both tables: a settled hour's row in
// usage_hours, and a shard the fold had not moved yet (the pass moves it, then purges it).
func TestUsageSurvivesTheNotificationsPurgeAndIsKept400Days(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	id := queued(t, s)
	finishAs(t, s, id, notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "1"})
	exec(t, s, `INSERT INTO usage_counts (tenant_id, hour, shard, accepted) VALUES
		('acme', date_trunc('hour', now()) - interval '401 days', 3, 5),
		('acme', date_trunc('hour', now()) - interval '399 days', 0, 7)`)
	exec(t, s, `INSERT INTO usage_hours (tenant_id, hour, accepted) VALUES
		('acme', date_trunc('hour', now()) - interval '402 days', 11),
		('acme', date_trunc('hour', now()) - interval '398 days', 13)`)
	p := store.RetentionPolicy{Bodies: 0, Notifications: 0, Expired: time.Hour, CallbackEvents: time.Hour}
	for _, kind := range store.PurgeKinds {
		if _, err := s.Purge(ctx, kind, p, 100); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM notifications`); n != 0 {
		t.Fatalf("%d notifications left after the purge, want none", n)
	}
	if got := usageOf(t, s, "acme"); got != (usage.Counts{Accepted: 1, Delivered: 1}) {
		t.Errorf("usage after the purge %+v, want 1 accepted and 1 delivered", got)
	}
	if n := count(t, s, `SELECT sum(accepted) FROM usage_hours`); n != 20 {
		t.Errorf("%d accepted kept in usage_hours, want 20: the 399- and 398-day-old hours, not the 401- and 402-day-old ones", n)
	}
	if n := count(t, s, `SELECT sum(accepted) FROM usage_counts`); n != 1 {
		t.Errorf("%d accepted kept in usage_counts, want today's 1", n)
	}
	for _, kind := range []store.PurgeKind{store.PurgeUsage, store.PurgeUsageShards} {
		if d, err := s.Overdue(ctx, kind, p); err != nil || d != 0 {
			t.Errorf("%s overdue %v %v after its purge, want 0", kind, d, err)
		}
	}
}

// A reader gets the periods of its window with anything in them, of its tenant only, summed over the
// shards, by hour or by UTC day; a period is in the window when it overlaps it.
func TestUsagePeriodsOfAWindow(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO usage_counts (tenant_id, hour, shard, accepted, delivered) VALUES
		('acme', '2026-03-01T10:00:00Z', 0, 2, 1), ('acme', '2026-03-01T10:00:00Z', 3, 1, 1),
		('acme', '2026-03-01T23:00:00Z', 1, 4, 0), ('acme', '2026-03-02T00:00:00Z', 0, 8, 8),
		('acme', '2026-03-03T05:00:00Z', 0, 0, 0), ('other', '2026-03-01T10:00:00Z', 0, 100, 0)`)
	// Settled hours in usage_hours; 10:00 of acme in both tables (a late count, not yet folded).
	exec(t, s, `INSERT INTO usage_hours (tenant_id, hour, accepted, delivered) VALUES
		('acme', '2026-03-01T10:00:00Z', 10, 10), ('acme', '2026-03-01T11:00:00Z', 1, 0),
		('acme', '2026-03-03T06:00:00Z', 0, 0), ('other', '2026-03-01T11:00:00Z', 1000, 0)`)
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	hours, err := s.Usage(ctx, "acme", usage.Window{From: at("2026-03-01T10:30:00Z"), To: at("2026-03-04T00:00:00Z"), Granularity: usage.Hour})
	if err != nil {
		t.Fatal(err)
	}
	wantHours := []usage.Period{
		{TenantID: "acme", Start: at("2026-03-01T10:00:00Z"), Counts: usage.Counts{Accepted: 13, Delivered: 12}},
		{TenantID: "acme", Start: at("2026-03-01T11:00:00Z"), Counts: usage.Counts{Accepted: 1}},
		{TenantID: "acme", Start: at("2026-03-01T23:00:00Z"), Counts: usage.Counts{Accepted: 4}},
		{TenantID: "acme", Start: at("2026-03-02T00:00:00Z"), Counts: usage.Counts{Accepted: 8, Delivered: 8}},
	}
	if !equalPeriods(hours, wantHours) {
		t.Errorf("hours %+v, want %+v", hours, wantHours)
	}
	days, err := s.Usage(ctx, "", usage.Window{From: at("2026-03-01T12:00:00Z"), To: at("2026-03-02T00:00:00Z"), Granularity: usage.Day})
	if err != nil {
		t.Fatal(err)
	}
	wantDays := []usage.Period{
		{TenantID: "acme", Start: at("2026-03-01T00:00:00Z"), Counts: usage.Counts{Accepted: 18, Delivered: 12}},
		{TenantID: "other", Start: at("2026-03-01T00:00:00Z"), Counts: usage.Counts{Accepted: 1100}},
	}
	if !equalPeriods(days, wantDays) {
		t.Errorf("days of every tenant %+v, want %+v", days, wantDays)
	}
	all, err := s.Usage(ctx, "", usage.Window{From: at("2026-03-01T10:00:00Z"), To: at("2026-03-01T12:00:00Z"), Granularity: usage.Hour})
	if err != nil {
		t.Fatal(err)
	}
	wantAll := []usage.Period{
		{TenantID: "acme", Start: at("2026-03-01T10:00:00Z"), Counts: usage.Counts{Accepted: 13, Delivered: 12}},
		{TenantID: "other", Start: at("2026-03-01T10:00:00Z"), Counts: usage.Counts{Accepted: 100}},
		{TenantID: "acme", Start: at("2026-03-01T11:00:00Z"), Counts: usage.Counts{Accepted: 1}},
		{TenantID: "other", Start: at("2026-03-01T11:00:00Z"), Counts: usage.Counts{Accepted: 1000}},
	}
	if !equalPeriods(all, wantAll) {
		t.Errorf("hours of every tenant %+v, want %+v", all, wantAll)
	}
}

func equalPeriods(a, b []usage.Period) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].TenantID != b[i].TenantID || !a[i].Start.Equal(b[i].Start) || a[i].Counts != b[i].Counts {
			return false
		}
	}
	return true
}

// The retention pass moves the shards of a settled hour into the hour's one row of usage_hours and leaves
// the counts exact; the current hour and the last, still written, keep their shards in usage_counts.
func TestSettledHoursAreMovedIntoOneRowWithTheirCounts(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO usage_counts (tenant_id, hour, shard, accepted, delivered, paid_broadcast)
		SELECT t, date_trunc('hour', now()) - h * interval '1 hour', sh, 10 * h + sh, h, 1
		FROM unnest(ARRAY['acme', 'globex']) t, generate_series(0, 30) h, generate_series(0, 7) sh
		WHERE NOT (h = 5 AND sh = 0)`) // an hour without shard 0: any shard moves
	before := func() map[string]usage.Counts {
		out := map[string]usage.Counts{}
		for _, tenant := range []string{"acme", "globex"} {
			out[tenant] = usageOf(t, s, tenant)
		}
		return out
	}()
	if d, err := s.Overdue(ctx, store.PurgeUsageShards, store.RetentionPolicy{}); err != nil || d <= 0 {
		t.Fatalf("before the fold: overdue %v %v, want > 0", d, err)
	}
	folded := int64(0)
	for {
		n, err := s.Purge(ctx, store.PurgeUsageShards, store.RetentionPolicy{}, 50) // several statements, hours split between them
		if err != nil {
			t.Fatal(err)
		}
		if folded += n; n < 50 {
			break
		}
	}
	// Hours 2..30 are settled (their end is over an hour ago): 29 hours × 2 tenants × 8 shards, less hour 5's
	// missing shard 0 of each, go.
	if want := int64(29*2*8 - 2); folded != want {
		t.Errorf("moved %d shard rows, want %d", folded, want)
	}
	if n := count(t, s, `SELECT count(*) FROM usage_counts`); n != 2*2*8 {
		t.Errorf("%d rows left in usage_counts, want the %d shards of the current and the last hour", n, 2*2*8)
	}
	if n := count(t, s, `SELECT count(*) FROM usage_counts WHERE hour >= date_trunc('hour', now()) - interval '1 hour'`); n != 2*2*8 {
		t.Errorf("%d shard rows of the current and the last hour, want all %d kept", n, 2*2*8)
	}
	if n := count(t, s, `SELECT count(*) FROM usage_hours`); n != 29*2 {
		t.Errorf("%d rows in usage_hours, want one per tenant and settled hour, %d", n, 29*2)
	}
	// Hour 7 of acme: shards 70..77 accepted, 7 delivered and 1 paid broadcast each.
	if n := count(t, s, `SELECT accepted FROM usage_hours WHERE tenant_id = 'acme' AND hour = date_trunc('hour', now()) - interval '7 hours'`); n != 8*70+28 {
		t.Errorf("hour 7 of acme: %d accepted in its row, want %d", n, 8*70+28)
	}
	for tenant, want := range before {
		if got := usageOf(t, s, tenant); got != want {
			t.Errorf("%s after the fold: %+v, want %+v", tenant, got, want)
		}
	}
	if d, err := s.Overdue(ctx, store.PurgeUsageShards, store.RetentionPolicy{}); err != nil || d != 0 {
		t.Errorf("after the fold: overdue %v %v, want 0", d, err)
	}
}

// A late count of a settled hour the fold has already moved (a statement that began before the hour
// ended) re-creates a shard in usage_counts: a reader counts it at once, beside the hour's row, and the
// next fold adds it to that row — counted once, not lost, not twice.
func TestALateCountOfAMovedHourIsCountedOnce(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	hour := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	for range 3 {
		if err := store.CountUsageForTest(ctx, s, "acme", hour, 10); err != nil {
			t.Fatal(err)
		}
	}
	fold := func() {
		t.Helper()
		if _, err := s.Purge(ctx, store.PurgeUsageShards, store.RetentionPolicy{}, 1000); err != nil {
			t.Fatal(err)
		}
	}
	fold()
	if n := count(t, s, `SELECT count(*) FROM usage_counts`); n != 0 {
		t.Fatalf("%d shard rows after the fold, want none", n)
	}
	if err := store.CountUsageForTest(ctx, s, "acme", hour, 4); err != nil { // the late count
		t.Fatal(err)
	}
	if got := usageOf(t, s, "acme"); got.Accepted != 34 {
		t.Errorf("with the late count in its shard: %d accepted, want 34", got.Accepted)
	}
	fold()
	if got := usageOf(t, s, "acme"); got.Accepted != 34 {
		t.Errorf("after the next fold: %d accepted, want 34", got.Accepted)
	}
	if n := count(t, s, `SELECT accepted FROM usage_hours WHERE tenant_id = 'acme' AND hour = $1`, hour); n != 34 {
		t.Errorf("the hour's row holds %d accepted, want 34", n)
	}
	if n := count(t, s, `SELECT count(*) FROM usage_counts`); n != 0 {
		t.Errorf("%d shard rows after the second fold, want none", n)
	}
}

// The fold moves every count exactly once while counting statements keep adding to the hours it moves
// (late counts, each to a shard at random): whatever interleaving, the hour's row in usage_hours ends
// with every count, and usage_counts with none of the hour.
func TestTheFoldMovesEachCountOnceUnderConcurrentCounting(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	hours := []time.Time{time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour), time.Now().UTC().Truncate(time.Hour).Add(-4 * time.Hour)}
	const counters, each = 6, 60
	var wg sync.WaitGroup
	errs := make(chan error, counters+1)
	done := make(chan struct{})
	for c := range counters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				tenant := []string{"acme", "globex"}[(c+i)%2]
				if err := store.CountUsageForTest(ctx, s, tenant, hours[i%2], 1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	go func() { // the retention pass, in small statements, again and again while they count
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Purge(ctx, store.PurgeUsageShards, store.RetentionPolicy{}, 3); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for {
		n, err := s.Purge(ctx, store.PurgeUsageShards, store.RetentionPolicy{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n := count(t, s, `SELECT coalesce(sum(accepted), 0) FROM usage_hours`); n != counters*each {
		t.Errorf("%d accepted moved to usage_hours, want every one of the %d counted", n, counters*each)
	}
	if n := count(t, s, `SELECT count(*) FROM usage_hours`); n != 4 {
		t.Errorf("%d rows in usage_hours, want one per tenant and hour, 4", n)
	}
	if n := count(t, s, `SELECT count(*) FROM usage_counts`); n != 0 {
		t.Errorf("%d shard rows left, want none", n)
	}
}

// A Tenant's last day (the operator's status) sums the tenant's hours from since on, over their shards:
// not an hour before, not another tenant's; nothing counted is zeros.
func TestUsageSinceSumsTheTenantsHoursFromSince(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO usage_counts (tenant_id, hour, shard, accepted, delivered, failed) VALUES
		('acme', '2026-03-01T09:00:00Z', 0, 50, 50, 0), ('acme', '2026-03-01T10:00:00Z', 0, 2, 1, 1),
		('acme', '2026-03-01T10:00:00Z', 5, 1, 1, 0), ('acme', '2026-03-02T09:00:00Z', 2, 4, 3, 0),
		('other', '2026-03-01T10:00:00Z', 0, 100, 100, 0)`)
	exec(t, s, `INSERT INTO usage_hours (tenant_id, hour, accepted, delivered) VALUES
		('acme', '2026-03-01T08:00:00Z', 30, 30), ('acme', '2026-03-01T11:00:00Z', 20, 10), ('other', '2026-03-01T11:00:00Z', 9, 9)`)
	since, _ := time.Parse(time.RFC3339, "2026-03-01T10:00:00Z")
	got, err := s.UsageSince(ctx, "acme", since)
	if err != nil {
		t.Fatal(err)
	}
	if want := (usage.Counts{Accepted: 27, Delivered: 15, Failed: 1}); got != want {
		t.Errorf("acme since %s: %+v, want %+v", since, got, want)
	}
	none, err := s.UsageSince(ctx, "nobody", since)
	if err != nil || none != (usage.Counts{}) {
		t.Errorf("a tenant with nothing counted: %+v %v, want zeros", none, err)
	}
}
