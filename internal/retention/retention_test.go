package retention_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/internal/callbackstate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/retention"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var policy = store.RetentionPolicy{Bodies: 7 * 24 * time.Hour, Notifications: 90 * 24 * time.Hour, Expired: 24 * time.Hour}

func count(t *testing.T, s *store.Store, q string) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// seed makes a tenant and n delivered notifications whose bodies are due (delivered 8 days ago: the clock
// moved back), and n link tokens expired two days ago.
func seed(t *testing.T, s *store.Store, n int) {
	t.Helper()
	fx := fixture.New(s)
	fx.Tenant(t, "acme", fixture.DeveloperName("Acme"))
	fx.User(t, "acme", "u")
	delivered, expired := time.Now().Add(-8*24*time.Hour), time.Now().Add(-2*24*time.Hour)
	for range n {
		fx.Notification(t, fixture.For("acme", "u"), fixture.InState(notification.Delivered), fixture.Body("secret words"),
			fixture.CreatedAt(delivered), fixture.UpdatedAt(delivered))
		fx.LinkToken(t, "acme", "u", fixture.TokenLabel("L"), fixture.TokenExpiredAt(expired))
	}
}

func gauge(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// The job a worker runs purges what is due, in batches, and says so in its metrics: rows purged by kind,
// the time of the last successful run, and nothing overdue once it has caught up.
func TestTheWorkersPurgeJobPurgesAndReports(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	seed(t, s, 7)
	before, _ := gauge(t, "herald_retention_purged_total", map[string]string{"kind": "bodies"})
	p := retention.New(retention.Options{Store: s, Policy: policy, Logger: slog.New(slog.DiscardHandler),
		Interval: 50 * time.Millisecond, BatchSize: 3, Pause: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for count(t, s, `SELECT count(*) FROM notifications WHERE body <> ''`)+count(t, s, `SELECT count(*) FROM link_tokens`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the purge job did not erase the due bodies and tokens within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The run that purged them finishes (overdue measured, success recorded) before the job stops.
	var last float64
	for last == 0 || time.Since(time.Unix(int64(last), 0)) > time.Minute {
		if time.Now().After(deadline) {
			t.Fatal("herald_retention_last_success_timestamp_seconds not set")
		}
		time.Sleep(20 * time.Millisecond)
		last, _ = gauge(t, "herald_retention_last_success_timestamp_seconds", nil)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run returned %v", err)
	}
	if after, _ := gauge(t, "herald_retention_purged_total", map[string]string{"kind": "bodies"}); after-before != 7 {
		t.Errorf("herald_retention_purged_total{kind=bodies} grew by %v, want 7", after-before)
	}
	if v, ok := gauge(t, "herald_retention_overdue_seconds", map[string]string{"kind": "bodies"}); !ok || v != 0 {
		t.Errorf("herald_retention_overdue_seconds{kind=bodies} = %v (%v), want 0 after catching up", v, ok)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications`); n != 7 {
		t.Errorf("%d notifications left, want all 7 (their rows are kept for 90 days)", n)
	}
}

// One purge at a time across workers: a worker that finds the lock taken skips its turn.
func TestOneWorkerPurgesAtATime(t *testing.T) {
	s, url := pgtest.NewStore(t)
	seed(t, s, 2)
	other, err := store.Open(context.Background(), url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	unlock, ok, err := other.TryRetentionLock(context.Background())
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	p := retention.New(retention.Options{Store: s, Policy: policy, Logger: slog.New(slog.DiscardHandler)})
	rep, err := p.RunOnce(context.Background())
	if err != nil || rep.Ran {
		t.Fatalf("with another worker's purge running: ran %v, err %v; want skipped", rep.Ran, err)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE body <> ''`); n != 2 {
		t.Errorf("a skipped run erased %d bodies", 2-n)
	}
	unlock()
	if rep, err := p.RunOnce(context.Background()); err != nil || !rep.Ran || rep.Purged[store.PurgeBodies] != 2 {
		t.Errorf("after the other run ended: %+v %v, want 2 bodies erased", rep, err)
	}
}

// A run does a bounded amount of work; when more is due than that, it says it is behind (overdue > 0),
// and the next runs catch up.
func TestAPurgeThatFallsBehindSaysSoAndCatchesUp(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	seed(t, s, 7)
	p := retention.New(retention.Options{Store: s, Policy: policy, Logger: slog.New(slog.DiscardHandler), BatchSize: 2, MaxBatches: 2, Pause: -1})
	rep, err := p.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Purged[store.PurgeBodies] != 4 || !rep.Behind || rep.Overdue[store.PurgeBodies] < 24*time.Hour {
		t.Fatalf("first run: %d bodies erased, behind %v, overdue %s; want 4, behind, a day overdue (due since a day ago)", rep.Purged[store.PurgeBodies], rep.Behind, rep.Overdue[store.PurgeBodies])
	}
	if v, _ := gauge(t, "herald_retention_overdue_seconds", map[string]string{"kind": "bodies"}); v < 86400 {
		t.Errorf("herald_retention_overdue_seconds{kind=bodies} = %v, want at least a day", v)
	}
	rep, err = p.RunOnce(context.Background())
	if err != nil || rep.Purged[store.PurgeBodies] != 3 || rep.Behind || rep.Overdue[store.PurgeBodies] != 0 {
		t.Errorf("second run: %+v %v, want the 3 left erased and nothing overdue", rep, err)
	}
}

// A run that spends its budget with more left is followed by the next at once, not after the interval: the
// purge keeps up with any rate of notifications.
func TestAPurgeThatIsBehindRunsAgainAtOnce(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	seed(t, s, 7)
	p := retention.New(retention.Options{Store: s, Policy: policy, Logger: slog.New(slog.DiscardHandler),
		Interval: time.Hour, BatchSize: 2, MaxBatches: 1, Pause: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(15 * time.Second)
	for count(t, s, `SELECT count(*) FROM notifications WHERE body <> ''`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("7 due bodies in batches of 2, one batch a run, are not all erased within 15 s although the interval is an hour")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Callback events are a retention kind: the workers' purge deletes those delivered or dropped more than the
// retention ago (7 days by default), counts them, and leaves pending ones, however old.
func TestThePurgeJobDeletesFinishedCallbackEvents(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	seed(t, s, 0)
	ep := uuid.NewString()
	if _, err := s.CreateCallbackEndpoint(context.Background(), store.CallbackEndpoint{ID: ep, TenantID: "acme",
		URL: "https://hooks.example.com/h", Events: store.EventTypes}, []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	// The clock moved: delivered and dropped 8 days ago (due), delivered 6 days ago, pending for 30 days.
	fx := fixture.New(s)
	daysAgo := func(n int) time.Time { return time.Now().Add(-time.Duration(n) * 24 * time.Hour) }
	fx.CallbackEvents(t, ep, 1, fixture.EventState(callbackstate.Delivered), fixture.EventCreatedAt(daysAgo(8)), fixture.EventFinishedAt(daysAgo(8)))
	fx.CallbackEvents(t, ep, 1, fixture.EventState(callbackstate.Dropped), fixture.EventCreatedAt(daysAgo(9)), fixture.EventFinishedAt(daysAgo(8)))
	fx.CallbackEvents(t, ep, 1, fixture.EventState(callbackstate.Delivered), fixture.EventCreatedAt(daysAgo(6)), fixture.EventFinishedAt(daysAgo(6)))
	fx.CallbackEvents(t, ep, 1, fixture.EventState(callbackstate.Pending), fixture.EventCreatedAt(daysAgo(30)))
	kind := map[string]string{"kind": "callback_events"}
	before, _ := gauge(t, "herald_retention_purged_total", kind)
	p := retention.New(retention.Options{Store: s, Policy: store.DefaultRetention, Logger: slog.New(slog.DiscardHandler), BatchSize: 1, Pause: -1})
	rep, err := p.RunOnce(context.Background())
	if err != nil || rep.Purged["callback_events"] != 2 || rep.Overdue["callback_events"] != 0 {
		t.Fatalf("run: %+v %v; want 2 callback events purged and none overdue", rep, err)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_events WHERE state = 'pending' OR finished_at > now() - interval '7 days'`) +
		count(t, s, `SELECT count(*) FROM callback_events`); n != 4 {
		t.Errorf("want the event delivered 6 days ago and the pending one left, and only them")
	}
	if after, _ := gauge(t, "herald_retention_purged_total", kind); after-before != 2 {
		t.Errorf("herald_retention_purged_total{kind=callback_events} grew by %v, want 2", after-before)
	}
	if v, ok := gauge(t, "herald_retention_overdue_seconds", kind); !ok || v != 0 {
		t.Errorf("herald_retention_overdue_seconds{kind=callback_events} = %v (%v), want 0", v, ok)
	}
}
