package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/callbackstate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// endpoint creates a callback endpoint of tenant subscribed to events, with a (fake) sealed secret, and
// returns its id.
func endpoint(t *testing.T, s *store.Store, tenant string, events ...string) string {
	t.Helper()
	if len(events) == 0 {
		events = store.EventTypes
	}
	e, err := s.CreateCallbackEndpoint(context.Background(), store.CallbackEndpoint{
		ID: uuid.NewString(), TenantID: tenant, URL: "https://example.com/" + tenant, Events: events}, []byte("sealed-0"))
	if err != nil {
		t.Fatalf("creating an endpoint: %v", err)
	}
	return e.ID
}

type eventRow struct {
	EventID, EndpointID, Type, TrackingID, UserID string
}

// events dispatches the inbox and lists the outbox, oldest first.
func events(t *testing.T, s *store.Store) []eventRow {
	t.Helper()
	if _, _, err := s.DispatchCallbackEvents(context.Background(), 1000); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Pool().Query(context.Background(), `
		SELECT event_id::text, endpoint_id::text, type, COALESCE(tracking_id::text, ''), COALESCE(user_id, '')
		FROM callback_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []eventRow
	for rows.Next() {
		var r eventRow
		if err := rows.Scan(&r.EventID, &r.EndpointID, &r.Type, &r.TrackingID, &r.UserID); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// finish claims the notification and records result r.
func finish(t *testing.T, s *store.Store, id string, r notification.DeliveryResult) {
	t.Helper()
	d, err := s.ClaimDelivery(context.Background(), id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.FinishDelivery(context.Background(), d, r); !ok || err != nil {
		t.Fatalf("FinishDelivery = %v, %v", ok, err)
	}
}

func TestEveryTerminalStateHasItsEventType(t *testing.T) {
	for _, st := range notification.Statuses {
		if st.Terminal() && !slices.Contains(store.EventTypes, store.NotificationEvent(st)) {
			t.Errorf("terminal state %s has no event type %s in store.EventTypes", st, store.NotificationEvent(st))
		}
	}
}

// A terminal state records one event (one event_id) for every endpoint of the notification's tenant that
// subscribed to it, in the status write itself; other states, system messages and other tenants' endpoints
// get nothing.
func TestTerminalStatusWriteRecordsItsEventForTheSubscribedEndpointsOnly(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "other", "Other"); err != nil {
		t.Fatal(err)
	}
	all := endpoint(t, s, "acme")
	failedOnly := endpoint(t, s, "acme", "notification.failed")
	endpoint(t, s, "other")

	delivered := queued(t, s)
	finish(t, s, delivered, notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "7"})
	// The status write records one narrow row in the inbox, whatever the number of endpoints.
	if n := count(t, s, `SELECT count(*) FROM callback_inbox WHERE tenant_id = 'acme' AND type = 'notification.delivered' AND tracking_id = $1`, delivered); n != 1 {
		t.Fatalf("%d inbox rows for one event", n)
	}
	got := events(t, s)
	if len(got) != 1 || got[0] != (eventRow{got[0].EventID, all, "notification.delivered", delivered, ""}) {
		t.Fatalf("after delivered: %+v, want one notification.delivered for the endpoint of every event", got)
	}

	retried := queued(t, s)
	finish(t, s, retried, notification.DeliveryResult{Status: notification.Retrying, ErrorCode: 502, RetryIn: time.Millisecond})
	if n := len(events(t, s)); n != 1 {
		t.Fatalf("a retry recorded events: %d rows", n)
	}
	time.Sleep(5 * time.Millisecond)
	finish(t, s, retried, notification.DeliveryResult{Status: notification.Failed, ErrorCode: 400, ErrorMessage: "Bad Request"})
	if n := count(t, s, `SELECT count(*) FROM callback_inbox`); n != 1 {
		t.Fatalf("%d inbox rows for one event to two endpoints", n)
	}
	got = events(t, s)[1:]
	if len(got) != 2 || got[0].EventID != got[1].EventID || got[0].Type != "notification.failed" ||
		!slices.Contains([]string{got[0].EndpointID, got[1].EndpointID}, failedOnly) {
		t.Fatalf("after failed: %+v, want notification.failed once per subscribed endpoint, under one event id", got)
	}
	if got[0].EventID == events(t, s)[0].EventID {
		t.Error("two events share an event id")
	}

	for _, st := range []notification.Status{notification.Blocked, notification.Unlinked} {
		id := queued(t, s)
		finish(t, s, id, notification.DeliveryResult{Status: st, ErrorCode: 403})
		last := events(t, s)
		if e := last[len(last)-1]; e.Type != store.NotificationEvent(st) || e.TrackingID != id || e.EndpointID != all {
			t.Errorf("after %s: last event %+v", st, e)
		}
	}

	// A tenant whose endpoints want none of it records nothing, not even in the inbox.
	exec(t, s, `UPDATE callback_endpoints SET events = '{ping}' WHERE tenant_id = 'acme'`)
	ignored := queued(t, s)
	finish(t, s, ignored, notification.DeliveryResult{Status: notification.Delivered})
	if n := count(t, s, `SELECT count(*) FROM callback_inbox`); n != 0 {
		t.Errorf("%d inbox rows for a tenant subscribed to none of it", n)
	}
	exec(t, s, `UPDATE callback_endpoints SET events = $1 WHERE id = $2`, store.EventTypes, all)

	sys := store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, TenantID: "acme", ChatID: 1, Body: "x", Priority: 9}
	if err := s.InsertSystemMessage(ctx, sys); err != nil {
		t.Fatal(err)
	}
	before := len(events(t, s))
	finish(t, s, sys.TrackingID, notification.DeliveryResult{Status: notification.Delivered})
	if after := len(events(t, s)); after != before {
		t.Errorf("a system message recorded %d events", after-before)
	}
}

// The link and the verification record their user.* events in their own transaction.
func TestLinkAndVerificationRecordUserEvents(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	ep := endpoint(t, s, "acme", store.EventUserLinked, store.EventUserVerified)
	digest := [32]byte{1}
	if _, err := s.CreateLinkToken(ctx, "acme", "carol", digest, "Acme"); err != nil {
		t.Fatal(err)
	}
	eff, res := store.RedeemLinkToken(1, store.Redemption{Digest: digest, MessengerUserID: 30, ChatID: 30},
		func(store.LinkResult) store.NewNotification {
			return store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 30, Body: "linked", Priority: 9}
		})
	if err := s.ApplyUpdates(ctx, []*store.Effect{eff}); err != nil || res.Outcome != store.LinkLinked {
		t.Fatalf("redeem: %v %+v", err, res)
	}
	if _, _, err := s.StartVerification(ctx, "acme", "carol", "Acme", func(chat int64) store.NewNotification {
		return store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: chat, Body: "share", Priority: 9}
	}); err != nil {
		t.Fatal(err)
	}
	eff, vres := store.CompleteVerifications(2, store.ContactShare{MessengerUserID: 30, PhoneLast4: "1234"},
		func(store.VerificationResult) []store.NewNotification { return nil })
	if err := s.ApplyUpdates(ctx, []*store.Effect{eff}); err != nil || len(vres.Verified) != 1 {
		t.Fatalf("verify: %v %+v", err, vres)
	}
	got := events(t, s)
	want := []eventRow{{got[0].EventID, ep, "user.linked", "", "carol"}, {got[len(got)-1].EventID, ep, "user.verified", "", "carol"}}
	if !slices.Equal(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
	// A repeated update id takes no effect, so it records nothing.
	eff, _ = store.CompleteVerifications(2, store.ContactShare{MessengerUserID: 30, PhoneLast4: "1234"},
		func(store.VerificationResult) []store.NewNotification { return nil })
	_ = s.ApplyUpdates(ctx, []*store.Effect{eff})
	if n := len(events(t, s)); n != 2 {
		t.Errorf("%d events after a repeated update, want 2", n)
	}
}

func TestATenantHasAtMostFiveEndpointsEvenUnderConcurrentCreates(t *testing.T) {
	s := fixture(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for range 12 {
		wg.Go(func() {
			_, err := s.CreateCallbackEndpoint(context.Background(), store.CallbackEndpoint{
				ID: uuid.NewString(), TenantID: "acme", URL: "https://example.com", Events: []string{"ping"}}, []byte("s"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, store.ErrLimitReached):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if created != store.MaxCallbackEndpoints || refused != 12-store.MaxCallbackEndpoints {
		t.Errorf("%d created, %d refused; want %d and %d", created, refused, store.MaxCallbackEndpoints, 12-store.MaxCallbackEndpoints)
	}
}

func TestAnotherTenantsEndpointIsNotFound(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "other", "Other"); err != nil {
		t.Fatal(err)
	}
	id := endpoint(t, s, "acme")
	for name, err := range map[string]error{
		"delete": s.DeleteCallbackEndpoint(ctx, "other", id),
		"rotate": s.RotateCallbackSecret(ctx, "other", id, []byte("x"), time.Hour),
		"ping":   s.EnqueuePing(ctx, "other", id),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s by another tenant: %v, want ErrNotFound", name, err)
		}
	}
	if l, _ := s.ListCallbackEndpoints(ctx, "other"); len(l) != 0 {
		t.Errorf("another tenant lists %+v", l)
	}
	if n := len(events(t, s)); n != 0 {
		t.Errorf("%d events recorded", n)
	}
}

// addEvents queues n pings for endpoint ep.
func addEvents(t *testing.T, s *store.Store, ep string, n int) {
	t.Helper()
	exec(t, s, `INSERT INTO callback_events (event_id, endpoint_id, type) SELECT gen_random_uuid(), $1, 'ping' FROM generate_series(1, $2)`, ep, n)
}

func TestAClaimTakesAtMostPerEndpointInFlightAtEachEndpoint(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	slow, fast := endpoint(t, s, "acme"), endpoint(t, s, "acme")
	addEvents(t, s, slow, 20)
	addEvents(t, s, fast, 20)
	// Until the reclaims at the end, every event claimed is claimed for its first attempt.
	firstAttempts := true
	claim := func(limit int) map[string]int {
		t.Helper()
		evs, err := s.ClaimCallbackEvents(ctx, limit, 3, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		per := map[string]int{}
		for _, e := range evs {
			per[e.EndpointID]++
			if (firstAttempts && e.Attempts != 1) || e.Attempts < 1 || e.Type != "ping" || e.TenantID != "acme" || len(e.Secrets) != 1 {
				t.Errorf("claimed %+v", e)
			}
		}
		return per
	}
	if got := claim(100); got[slow] != 3 || got[fast] != 3 {
		t.Fatalf("first claim %v, want 3 per endpoint", got)
	}
	if got := claim(100); len(got) != 0 {
		t.Fatalf("second claim %v, want nothing: both endpoints have 3 in flight", got)
	}
	// One of fast's attempts ends: fast gets one more, slow none.
	var id, attempts int64
	if err := s.Pool().QueryRow(ctx, `SELECT id, attempts FROM callback_events WHERE endpoint_id = $1 AND leased_until IS NOT NULL LIMIT 1`, fast).
		Scan(&id, &attempts); err != nil {
		t.Fatal(err)
	}
	state, err := s.FinishCallbackEvent(ctx, store.CallbackEvent{ID: id, Attempts: int(attempts)}, store.CallbackResult{Delivered: true, Status: 204})
	if err != nil || state != callbackstate.Delivered {
		t.Fatalf("finish: %q %v", state, err)
	}
	if got := claim(100); got[fast] != 1 || got[slow] != 0 {
		t.Fatalf("claim after one end %v, want one at fast", got)
	}
	// A claim of some endpoints only takes theirs.
	firstAttempts = false
	exec(t, s, `UPDATE callback_events SET leased_until = NULL, next_attempt_at = now() WHERE state = 'pending'`)
	only, err := s.ClaimCallbackEvents(ctx, 100, 3, time.Minute, []string{slow})
	if err != nil || len(only) != 3 || only[0].EndpointID != slow || only[2].EndpointID != slow {
		t.Fatalf("a claim of the slow endpoint only: %d events, %v", len(only), err)
	}
	// The limit caps the whole claim.
	exec(t, s, `UPDATE callback_events SET leased_until = NULL, next_attempt_at = now() WHERE state = 'pending'`)
	if got := claim(4); got[fast]+got[slow] != 4 {
		t.Fatalf("claim of 4: %v", got)
	}
}

func TestAttemptResultsRetryDropAndRecover(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	ep := endpoint(t, s, "acme")
	addEvents(t, s, ep, 3)
	evs, err := s.ClaimCallbackEvents(ctx, 10, 10, time.Minute, nil)
	if err != nil || len(evs) != 3 {
		t.Fatalf("claim: %v %v", evs, err)
	}
	fail := store.CallbackResult{Status: 503, Error: "HTTP 503", Payload: []byte(`{"a":1}`), RetryIn: time.Hour, RetryFor: 24 * time.Hour}
	if st, err := s.FinishCallbackEvent(ctx, evs[0], fail); st != callbackstate.Pending || err != nil {
		t.Fatalf("a failure: %q %v, want pending", st, err)
	}
	if st, _ := s.FinishCallbackEvent(ctx, evs[0], fail); st != "" {
		t.Errorf("a second result for one attempt: %q, want \"\" (stale)", st)
	}
	var failures int
	var lastFailure *time.Time
	_ = s.Pool().QueryRow(ctx, `SELECT consecutive_failures, last_failure_at FROM callback_endpoints WHERE id = $1`, ep).Scan(&failures, &lastFailure)
	if failures != 1 || lastFailure == nil {
		t.Errorf("endpoint after a failure: %d failures, last %v", failures, lastFailure)
	}
	// An event older than the retry window is dropped at its next failure.
	exec(t, s, `UPDATE callback_events SET created_at = now() - interval '25 hours' WHERE id = $1`, evs[1].ID)
	if st, _ := s.FinishCallbackEvent(ctx, evs[1], fail); st != callbackstate.Dropped {
		t.Errorf("a failure 25 h after the event: %q, want dropped", st)
	}
	// The first success after failures makes the waiting event due at once.
	if st, _ := s.FinishCallbackEvent(ctx, evs[2], store.CallbackResult{Delivered: true, Status: 200}); st != callbackstate.Delivered {
		t.Errorf("success: %q", st)
	}
	again, _ := s.ClaimCallbackEvents(ctx, 10, 10, time.Minute, nil)
	if len(again) != 1 || again[0].ID != evs[0].ID || string(again[0].Payload) != `{"a":1}` || again[0].Attempts != 2 {
		t.Fatalf("after the recovery: %+v, want the failed event due again with its payload", again)
	}
	var lastSuccess *time.Time
	_ = s.Pool().QueryRow(ctx, `SELECT consecutive_failures, last_success_at FROM callback_endpoints WHERE id = $1`, ep).Scan(&failures, &lastSuccess)
	if failures != 0 || lastSuccess == nil {
		t.Errorf("endpoint after a success: %d failures, last success %v", failures, lastSuccess)
	}
	// Released: not counted, due at once.
	if st, _ := s.FinishCallbackEvent(ctx, again[0], store.CallbackResult{Release: true}); st != callbackstate.Pending {
		t.Errorf("release: %q", st)
	}
	if back, _ := s.ClaimCallbackEvents(ctx, 10, 10, time.Minute, nil); len(back) != 1 || back[0].Attempts != 2 {
		t.Errorf("after a release: %+v, want the event due with its attempt not counted", back)
	}
}

func TestRotationKeepsRecentPreviousSecretsSigningUntilTheyExpire(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	ep := endpoint(t, s, "acme")
	secretsOf := func() []string {
		addEvents(t, s, ep, 1)
		evs, err := s.ClaimCallbackEvents(ctx, 1, 1, time.Minute, nil)
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim: %v %v", evs, err)
		}
		exec(t, s, `DELETE FROM callback_events`)
		var out []string
		for _, b := range evs[0].Secrets {
			out = append(out, string(b))
		}
		return out
	}
	if err := s.RotateCallbackSecret(ctx, "acme", ep, []byte("sealed-1"), store.SecretOverlap); err != nil {
		t.Fatal(err)
	}
	if got := secretsOf(); !slices.Equal(got, []string{"sealed-1", "sealed-0"}) {
		t.Fatalf("after one rotation: %q, want the new one first, then the old", got)
	}
	// The overlap ends: the old secret no longer signs.
	exec(t, s, `UPDATE callback_secrets SET expires_at = now() - interval '1 second' WHERE sealed = 'sealed-0'`)
	if got := secretsOf(); !slices.Equal(got, []string{"sealed-1"}) {
		t.Fatalf("after the overlap: %q", got)
	}
	for _, n := range []string{"2", "3", "4", "5", "6", "7"} {
		if err := s.RotateCallbackSecret(ctx, "acme", ep, []byte("sealed-"+n), store.SecretOverlap); err != nil {
			t.Fatal(err)
		}
	}
	if got := secretsOf(); !slices.Equal(got, []string{"sealed-7", "sealed-6", "sealed-5", "sealed-4", "sealed-3"}) {
		t.Fatalf("after six quick rotations: %q, want the current and the %d latest", got, store.MaxPreviousSecrets)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_secrets`); n != 1+store.MaxPreviousSecrets {
		t.Errorf("%d secrets kept", n)
	}
}

// The retention purge of callback events (TestRetentionPurgesWhatIsDueAndNothingElse has every kind) goes
// in batches, finished events only.
func TestPurgeRemovesOnlyFinishedEventsPastTheRetention(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	ep := endpoint(t, s, "acme")
	addEvents(t, s, ep, 6)
	exec(t, s, `UPDATE callback_events SET state = 'delivered', finished_at = now() - interval '8 days' WHERE id IN (SELECT id FROM callback_events ORDER BY id LIMIT 2)`)
	exec(t, s, `UPDATE callback_events SET state = 'dropped', finished_at = now() - interval '8 days' WHERE id IN (SELECT id FROM callback_events ORDER BY id OFFSET 2 LIMIT 1)`)
	exec(t, s, `UPDATE callback_events SET state = 'delivered', finished_at = now() - interval '1 day' WHERE id IN (SELECT id FROM callback_events ORDER BY id OFFSET 3 LIMIT 1)`)
	exec(t, s, `UPDATE callback_events SET created_at = now() - interval '30 days'`) // pending stays, however old
	if d, err := s.Overdue(ctx, store.PurgeCallbackEvents, policy); err != nil || d < 24*time.Hour-time.Minute {
		t.Errorf("overdue %s (%v), want a day: due since a day", d, err)
	}
	for i, want := range []int64{2, 1, 0} { // batches of 2
		n, err := s.Purge(ctx, store.PurgeCallbackEvents, policy, 2)
		if err != nil || n != want {
			t.Fatalf("batch %d: purged %d, %v; want %d", i+1, n, err, want)
		}
	}
	if left := count(t, s, `SELECT count(*) FROM callback_events`); left != 3 {
		t.Errorf("%d events left, want 3", left)
	}
	if d, err := s.Overdue(ctx, store.PurgeCallbackEvents, policy); err != nil || d != 0 {
		t.Errorf("after the purge, overdue %s (%v)", d, err)
	}
}

// An endpoint holds at most MaxPendingPings undelivered pings: a test call beyond them adds none (a ping is
// on its way) but makes one of them due now, so that a test after fixing a receiver still sends a ping at
// once (and the success makes the endpoint's backlog due).
func TestAnEndpointHoldsAFewUndeliveredPingsAtMost(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	ep := endpoint(t, s, "acme")
	pending := func() int {
		return count(t, s, `SELECT count(*) FROM callback_events WHERE endpoint_id = $1 AND type = 'ping' AND state = 'pending'`, ep)
	}
	for range 10 {
		if err := s.EnqueuePing(ctx, "acme", ep); err != nil {
			t.Fatal(err)
		}
	}
	if n := pending(); n != store.MaxPendingPings {
		t.Fatalf("10 test calls left %d pings pending, want %d", n, store.MaxPendingPings)
	}
	// Every ping failed and waits for its retry; one is in flight.
	exec(t, s, `UPDATE callback_events SET attempts = 5, next_attempt_at = now() + interval '1 hour'`)
	exec(t, s, `UPDATE callback_events SET leased_until = now() + interval '30 seconds' WHERE id = (SELECT min(id) FROM callback_events)`)
	if err := s.EnqueuePing(ctx, "acme", ep); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != store.MaxPendingPings {
		t.Errorf("%d pings pending, want %d", n, store.MaxPendingPings)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_events WHERE next_attempt_at <= now() AND leased_until IS NULL`); n != 1 {
		t.Errorf("%d pings due after a test call at the bound, want 1", n)
	}
	// Once they are delivered, a test call adds a ping again.
	exec(t, s, `UPDATE callback_events SET state = 'delivered', finished_at = now(), leased_until = NULL`)
	if err := s.EnqueuePing(ctx, "acme", ep); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 1 {
		t.Errorf("%d pings pending after the others were delivered, want 1", n)
	}
	// The bound is per endpoint.
	other := endpoint(t, s, "acme")
	if err := s.EnqueuePing(ctx, "acme", other); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_events WHERE endpoint_id = $1`, other); n != 1 {
		t.Errorf("the other endpoint has %d pings, want 1", n)
	}
}

// A rotation of HERALD_CALLBACK_SECRET_KEY reads the valid secrets not sealed under the current key (by the
// prefix of its sealed form), and replaces each unless it changed meanwhile.
func TestTheSecretsToSealAgainAreThoseUnderAnotherKey(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	a, b, c := endpoint(t, s, "acme"), endpoint(t, s, "acme"), endpoint(t, s, "acme")
	exec(t, s, `UPDATE callback_secrets SET sealed = '\x01aaaa0000' WHERE endpoint_id = $1`, a)
	exec(t, s, `UPDATE callback_secrets SET sealed = '\x01bbbb0001' WHERE endpoint_id = $1`, b)
	exec(t, s, `UPDATE callback_secrets SET sealed = '\x01bbbb0002' WHERE endpoint_id = $1`, c)
	// A secret rotated out, whose overlap ended: it signs nothing any more.
	exec(t, s, `INSERT INTO callback_secrets (endpoint_id, sealed, expires_at) VALUES ($1, '\x01bbbb0003', now() - interval '1 minute')`, a)
	current := []byte{1, 0xaa, 0xaa}
	got, total, err := s.CallbackSecretsSealedOtherwise(ctx, current, 1)
	if err != nil || total != 2 || len(got) != 1 || got[0].EndpointID != b || string(got[0].Sealed) != "\x01\xbb\xbb\x00\x01" {
		t.Fatalf("got %+v, %d in all, %v; want b's secret, 2 in all", got, total, err)
	}
	if ok, err := s.ResealCallbackSecret(ctx, got[0].ID, []byte("changed meanwhile"), []byte{1, 0xaa, 0xaa, 9}); err != nil || ok {
		t.Errorf("a secret that changed meanwhile was replaced: %v %v", ok, err)
	}
	if ok, err := s.ResealCallbackSecret(ctx, got[0].ID, got[0].Sealed, []byte{1, 0xaa, 0xaa, 9}); err != nil || !ok {
		t.Errorf("reseal: %v %v", ok, err)
	}
	if _, total, err := s.CallbackSecretsSealedOtherwise(ctx, current, 10); err != nil || total != 1 {
		t.Errorf("%d left, %v; want c's", total, err)
	}
}

func TestTenantPurgeDeletesItsCallbackEndpointsAndTheirEvents(t *testing.T) {
	s := fixture(t)
	ep := endpoint(t, s, "acme")
	addEvents(t, s, ep, 3)
	exec(t, s, `INSERT INTO callback_inbox (tenant_id, type, user_id, created_at) VALUES ('acme', 'user.linked', 'u', now())`)
	p, err := s.PurgeTenantUsers(context.Background(), "acme")
	if err != nil || p.CallbackEndpoints != 1 {
		t.Fatalf("purge: %+v %v", p, err)
	}
	for _, table := range []string{"callback_endpoints", "callback_secrets", "callback_events", "callback_inbox"} {
		if n := count(t, s, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%d rows left in %s", n, table)
		}
	}
}

// BenchmarkFinishDelivery measures the terminal status write, one statement per delivery: without the
// callback events (the statement before callbacks), and with them for a tenant with no endpoint (the common
// case: an index probe, no round trip), one endpoint and five (one inbox row either way).
func BenchmarkFinishDelivery(b *testing.B) {
	for _, c := range []struct {
		name      string
		endpoints int
		bare      bool
	}{{"without events (before callbacks)", 0, true}, {"no endpoint", 0, false}, {"1 endpoint", 1, false}, {"5 endpoints", 5, false}} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := pgtest.NewStore(b)
			ctx := context.Background()
			if err := s.CreateTenant(ctx, "acme", "Acme"); err != nil {
				b.Fatal(err)
			}
			for i := range c.endpoints {
				if _, err := s.CreateCallbackEndpoint(ctx, store.CallbackEndpoint{ID: uuid.NewString(), TenantID: "acme",
					URL: "https://example.com/" + string(rune('a'+i)), Events: store.EventTypes}, []byte("s")); err != nil {
					b.Fatal(err)
				}
			}
			// Another tenant's endpoints, so the join has rows to skip.
			if err := s.CreateTenant(ctx, "other", "Other"); err != nil {
				b.Fatal(err)
			}
			for range 5 {
				if _, err := s.CreateCallbackEndpoint(ctx, store.CallbackEndpoint{ID: uuid.NewString(), TenantID: "other",
					URL: "https://example.com/o", Events: store.EventTypes}, []byte("s")); err != nil {
					b.Fatal(err)
				}
			}
			ids := make([]string, b.N)
			for i := range ids {
				ids[i] = uuid.Must(uuid.NewV7()).String()
			}
			if _, err := s.Pool().Exec(ctx, `
				INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, attempts, lease_expires_at)
				SELECT id, 'tenant', 'acme', 'u', 5, 'hello', 'delivering', 1, now() + interval '1 hour' FROM unnest($1::uuid[]) id`, ids); err != nil {
				b.Fatal(err)
			}
			r := notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "1"}
			b.ResetTimer()
			for i := range b.N {
				if c.bare {
					msgID := "1"
					if _, err := s.Pool().Exec(ctx, store.FinishUpdateSQL, ids[i], 1, r.Status, &msgID, 0, (*string)(nil), 0.0, false); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if ok, err := s.FinishDelivery(ctx, notification.Delivery{TrackingID: ids[i], Kind: notification.KindTenant, TenantID: "acme", UserID: "u", Attempts: 1}, r); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

// The lifecycle's transitions report like delivery's, in their own statements: a cancel, the expiry sweep,
// a claim that finds the notification expired, and the erasure of a user (for each notification it
// cancels) each record one notification.<state> event.
func TestLifecycleTransitionsRecordTheirEvents(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	ep := endpoint(t, s, "acme")
	last := func() eventRow {
		t.Helper()
		got := events(t, s)
		if len(got) == 0 {
			t.Fatal("no event")
		}
		return got[len(got)-1]
	}
	want := func(what string, st notification.Status, id string) {
		t.Helper()
		if e := last(); e.Type != store.NotificationEvent(st) || e.TrackingID != id || e.EndpointID != ep {
			t.Errorf("after %s: last event %+v, want %s of %s", what, e, store.NotificationEvent(st), id)
		}
	}

	cancelled := queued(t, s)
	if _, err := s.CancelNotification(ctx, "acme", cancelled); err != nil {
		t.Fatal(err)
	}
	want("a cancel", notification.Cancelled, cancelled)

	expiring := func() string {
		n := tenantNotification("ok")
		soon := time.Now().Add(50 * time.Millisecond)
		n.ExpiresAt = &soon
		if got, err := s.InsertTenantNotifications(ctx, []store.NewNotification{n}); err != nil || len(got) != 1 {
			t.Fatalf("insert: %v %v", got, err)
		}
		return n.TrackingID
	}
	swept, claimed := expiring(), expiring()
	time.Sleep(100 * time.Millisecond)
	if _, err := s.ClaimDelivery(ctx, claimed, time.Minute); err == nil {
		t.Fatal("an expired notification was claimed")
	}
	want("a claim after expires_at", notification.Expired, claimed)
	if ids, err := s.ExpireDue(ctx, 10); err != nil || len(ids) != 1 || ids[0] != swept {
		t.Fatalf("the sweep expired %v, %v; want %s", ids, err, swept)
	}
	want("the expiry sweep", notification.Expired, swept)

	erased := queued(t, s)
	if _, err := s.EraseUser(ctx, "acme", "ok"); err != nil {
		t.Fatal(err)
	}
	want("an erasure", notification.Cancelled, erased)
	if n := len(events(t, s)); n != 4 {
		t.Errorf("%d events for four transitions", n)
	}
}
