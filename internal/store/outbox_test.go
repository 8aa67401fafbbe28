package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/pgtest"
	"github.com/heraldhq/herald/internal/store"
)

// fixture creates tenant acme with users "ok" (linked, verified) and "no" (linked, unverified).
func fixture(t *testing.T) *store.Store {
	t.Helper()
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO users (tenant_id, user_id) VALUES ('acme', 'ok'), ('acme', 'no')`,
		`INSERT INTO links (tenant_id, user_id, messenger_user_id, chat_id) VALUES ('acme', 'ok', 1, 1), ('acme', 'no', 2, 2)`,
		`INSERT INTO phone_verifications (tenant_id, user_id, status) VALUES ('acme', 'ok', 'verified'), ('acme', 'no', 'unverified')`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func tenantNotification(user string) store.NewNotification {
	return store.NewNotification{TrackingID: uuid.Must(uuid.NewV7()).String(), Kind: store.KindTenant, TenantID: "acme",
		UserID: user, Priority: 5, Body: "hello"}
}

func count(t *testing.T, s *store.Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Rows commit before the publish (a worker never receives an envelope whose row is not there yet); a
// publish that fails takes the accepted rows back, and the gate's refusals stand as refusals.
func TestBatchPublishFailureTakesTheRowsBack(t *testing.T) {
	s := fixture(t)
	ok1, ok2, no := tenantNotification("ok"), tenantNotification("ok"), tenantNotification("no")
	var visibleDuringPublish int
	accepted, publishErr, err := s.EnqueueTenantBatch(context.Background(), []store.NewNotification{ok1, no, ok2},
		func(ctx context.Context, out []store.NewNotification) error {
			visibleDuringPublish = count(t, s, `SELECT count(*) FROM notifications`) // another connection: committed rows only
			if len(out) != 2 {
				t.Errorf("publish got %d notifications, want the 2 that passed the gate", len(out))
			}
			return errors.New("broker down")
		})
	if err != nil {
		t.Fatal(err)
	}
	if publishErr == nil {
		t.Fatal("publish error not reported")
	}
	if !accepted[ok1.TrackingID] || !accepted[ok2.TrackingID] || accepted[no.TrackingID] {
		t.Errorf("accepted = %v: want the two verified sends, not the unverified one", accepted)
	}
	if visibleDuringPublish != 2 {
		t.Errorf("%d rows visible while publishing, want 2 (committed before the publish)", visibleDuringPublish)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d rows left after a failed publish, want 0", n)
	}
}

// A duplicate of an idempotent send that arrives while the first is still publishing waits for its
// outcome: when the first publish fails and takes its notification back, the duplicate becomes the first
// (it never answers 202 for a notification that no longer exists).
func TestIdempotentReplayWaitsForTheFirstPublish(t *testing.T) {
	s := fixture(t)
	idem := &store.Idempotency{Key: "k1", RequestHash: [32]byte{1}}
	first, second := tenantNotification("ok"), tenantNotification("ok")
	publishing := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	var firstPublishErr error
	wg.Go(func() {
		_, _, firstPublishErr, _ = s.EnqueueTenant(context.Background(), first, idem, func(context.Context) error {
			close(publishing)
			<-release
			return errors.New("broker down")
		})
	})
	<-publishing
	type result struct {
		id       string
		replayed bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		id, replayed, perr, err := s.EnqueueTenant(context.Background(), second, idem, func(context.Context) error { return nil })
		done <- result{id, replayed, errors.Join(perr, err)}
	}()
	select {
	case r := <-done:
		t.Fatalf("the duplicate answered (%+v) while the first was still publishing", r)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	if firstPublishErr == nil {
		t.Fatal("first publish error not reported")
	}
	r := <-done
	if r.err != nil || r.replayed || r.id != second.TrackingID {
		t.Fatalf("duplicate after the first failed: %+v; want its own notification, not a replay", r)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1`, second.TrackingID); n != 1 {
		t.Errorf("the duplicate's notification is not stored")
	}
	if n := count(t, s, `SELECT count(*) FROM idempotency_keys WHERE key = 'k1' AND tracking_id = $1`, second.TrackingID); n != 1 {
		t.Errorf("the key does not name the duplicate's notification")
	}
}

// A claim tells a notification held by a live attempt (a handover, or a redelivered copy) from one that
// is finished.
func TestClaimReportsALiveLease(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	n := tenantNotification("ok")
	if _, _, _, err := s.EnqueueTenant(ctx, n, nil, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	d, err := s.ClaimDelivery(ctx, n.TrackingID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ClaimDelivery(ctx, n.TrackingID, time.Minute)
	var nc *store.NotClaimable
	if !errors.As(err, &nc) || !nc.Leased || nc.Status != "delivering" || !errors.Is(err, store.ErrNotClaimable) {
		t.Fatalf("second claim: %v, want a live lease", err)
	}
	if ok, err := s.FinishDelivery(ctx, d, store.DeliveryResult{Status: "delivered", MessengerMessageID: "7"}); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	_, err = s.ClaimDelivery(ctx, n.TrackingID, time.Minute)
	if !errors.As(err, &nc) || nc.Leased || nc.Status != "delivered" {
		t.Fatalf("claim after delivery: %v, want not claimable (delivered), no lease", err)
	}
	if _, err := s.ClaimDelivery(ctx, uuid.Must(uuid.NewV7()).String(), time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim of a missing row: %v, want ErrNotFound", err)
	}
}

// A status write whose answer was lost is recognised on retry as already recorded.
func TestDeliveryRecordedRecognisesAnEarlierWrite(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	n := tenantNotification("ok")
	if _, _, _, err := s.EnqueueTenant(ctx, n, nil, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	d, err := s.ClaimDelivery(ctx, n.TrackingID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r := store.DeliveryResult{Status: "delivered", MessengerMessageID: "7"}
	if ok, err := s.FinishDelivery(ctx, d, r); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := s.FinishDelivery(ctx, d, r); err != nil || ok {
		t.Fatalf("a repeated write matched (%v, %v); it must not", ok, err)
	}
	if rec, err := s.DeliveryRecorded(ctx, d, r); err != nil || !rec {
		t.Fatalf("DeliveryRecorded = %v, %v; want true", rec, err)
	}
	if rec, _ := s.DeliveryRecorded(ctx, d, store.DeliveryResult{Status: "failed"}); rec {
		t.Fatal("DeliveryRecorded matched another result")
	}
}

// A PostgreSQL restart ends every session with 57P01 (admin shutdown): that is "unavailable, retry", not
// an internal error.
func TestTerminatedSessionIsUnavailable(t *testing.T) {
	s := fixture(t)
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
	other, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	other.Release()
	_, err = conn.Exec(ctx, `SELECT 1`)
	if err == nil {
		t.Fatal("a query on a terminated session succeeded")
	}
	if !store.IsUnavailable(err) {
		t.Fatalf("IsUnavailable(%v) = false, want true", err)
	}
}
