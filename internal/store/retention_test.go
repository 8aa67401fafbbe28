package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

var policy = store.RetentionPolicy{Bodies: 7 * 24 * time.Hour, Notifications: 90 * 24 * time.Hour, Expired: 24 * time.Hour,
	CallbackEvents: 7 * 24 * time.Hour}

// notification inserts a notification in a state, last changed age ago (the clock moved back), and
// returns its id.
func agedNotification(t *testing.T, s *store.Store, kind string, status notification.Status, age time.Duration, body string) string {
	t.Helper()
	id := newID()
	if kind == notification.KindSystem {
		exec(t, s, `INSERT INTO notifications (tracking_id, kind, tenant_id, chat_id, priority, body, reply_markup, status, created_at, updated_at)
			VALUES ($1, 'system', 'acme', 1, 9, $2, '{"keyboard":[]}', $3, now() - $4::interval, now() - $4::interval)`, id, body, string(status), age.String())
		return id
	}
	exec(t, s, `INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, created_at, updated_at)
		VALUES ($1, 'tenant', 'acme', 'ok', 5, $2, $3, now() - $4::interval - interval '1 minute', now() - $4::interval)`, id, body, string(status), age.String())
	return id
}

func purgeAll(t *testing.T, s *store.Store, batch int) map[store.PurgeKind]int64 {
	t.Helper()
	purged := map[store.PurgeKind]int64{}
	for _, kind := range store.PurgeKinds {
		for {
			n, err := s.Purge(context.Background(), kind, policy, batch)
			if err != nil {
				t.Fatalf("purge %s: %v", kind, err)
			}
			if n > int64(batch) {
				t.Fatalf("purge %s removed %d rows in a batch of %d", kind, n, batch)
			}
			purged[kind] += n
			if n < int64(batch) {
				break
			}
		}
	}
	return purged
}

// What is due goes, what is not stays: bodies 7 days and rows 90 days after the final state, expired link
// tokens and verification sessions a day after expiry, idempotency keys after 24 hours, processed update
// ids after 48 hours, callback events 7 days after they were delivered or dropped, stop prompts after a day,
// usage counts 400 days after their hour. Notifications in flight
// and callback events still pending are never touched, however old.
func TestRetentionPurgesWhatIsDueAndNothingElse(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	day := 24 * time.Hour
	bodyDue := agedNotification(t, s, notification.KindTenant, notification.Delivered, 8*day, "old enough")
	bodyKept := agedNotification(t, s, notification.KindTenant, notification.Delivered, 6*day, "recent")
	systemDue := agedNotification(t, s, notification.KindSystem, notification.Delivered, 8*day, "a prompt")
	rowDue := agedNotification(t, s, notification.KindTenant, notification.Failed, 91*day, "")
	rowAndBodyDue := agedNotification(t, s, notification.KindTenant, notification.Blocked, 91*day, "never erased")
	rowKept := agedNotification(t, s, notification.KindTenant, notification.Unlinked, 89*day, "")
	var inFlight []string
	for _, st := range notification.Statuses {
		if !st.Terminal() {
			inFlight = append(inFlight, agedNotification(t, s, notification.KindTenant, st, 100*day, "in flight"))
		}
	}

	exec(t, s, `INSERT INTO users (tenant_id, user_id) VALUES ('acme', 'p1'), ('acme', 'p2')`)
	exec(t, s, `INSERT INTO link_tokens (digest, tenant_id, user_id, label, expires_at, used_at) VALUES
		(decode(repeat('01', 32), 'hex'), 'acme', 'ok', 'L', now() - interval '2 days', NULL),
		(decode(repeat('02', 32), 'hex'), 'acme', 'ok', 'L', now() - interval '2 days', now() - interval '2 days 1 minute'),
		(decode(repeat('03', 32), 'hex'), 'acme', 'ok', 'L', now() - interval '2 hours', NULL),
		(decode(repeat('04', 32), 'hex'), 'acme', 'ok', 'L', now() + interval '10 minutes', NULL)`)
	exec(t, s, `INSERT INTO phone_verifications (tenant_id, user_id, status, session_expires_at, label, updated_at) VALUES
		('acme', 'p1', 'pending', now() - interval '2 days', 'Label', now() - interval '2 days 10 minutes'),
		('acme', 'p2', 'pending', now() - interval '1 hour', 'Label', now() - interval '70 minutes')`)
	exec(t, s, `INSERT INTO idempotency_keys (tenant_id, key, request_hash, created_at) VALUES
		('acme', 'old', '\x00', now() - interval '25 hours'), ('acme', 'new', '\x00', now() - interval '23 hours')`)
	exec(t, s, `INSERT INTO processed_updates (update_id, processed_at) VALUES (1, now() - interval '3 days'), (2, now() - interval '1 hour')`)
	ep := endpoint(t, s, "acme")
	exec(t, s, `INSERT INTO callback_events (event_id, endpoint_id, type, state, created_at, finished_at) VALUES
		(gen_random_uuid(), $1, 'ping', 'delivered', now() - interval '8 days', now() - interval '8 days'),
		(gen_random_uuid(), $1, 'ping', 'dropped', now() - interval '9 days', now() - interval '8 days'),
		(gen_random_uuid(), $1, 'ping', 'delivered', now() - interval '6 days', now() - interval '6 days'),
		(gen_random_uuid(), $1, 'ping', 'pending', now() - interval '30 days', NULL)`, ep)
	exec(t, s, `INSERT INTO stop_prompts (id, chat_id, messenger_user_id, kind, choices, created_at) VALUES
		(decode(repeat('01', 16), 'hex'), 1, 1, 'stop', '[]', now() - interval '25 hours'),
		(decode(repeat('02', 16), 'hex'), 1, 1, 'stop', '[]', now() - interval '23 hours')`)
	// Digests: a closed one past the notifications' retention goes with its items' places; a closed one
	// within it, and an open one however old, stay.
	exec(t, s, `INSERT INTO digests (tenant_id, user_id, key, format, max_items, items, closes_at, open) VALUES
		('acme', 'ok', 'old', '', 50, 1, now() - interval '91 days', false),
		('acme', 'ok', 'recent', '', 50, 1, now() - interval '89 days', false),
		('acme', 'ok', 'open', '', 50, 1, now() - interval '100 days', true)`)
	exec(t, s, `INSERT INTO digest_items (tracking_id, digest_id, position) SELECT gen_random_uuid(), id, 1 FROM digests`)
	// Usage: the settled hours in usage_hours, and a shard the fold has not moved yet (it moves it, and the
	// usage purge, after it, purges it).
	exec(t, s, `INSERT INTO usage_hours (tenant_id, hour, accepted) VALUES
		('acme', date_trunc('hour', now()) - interval '402 days', 1), ('acme', date_trunc('hour', now()) - interval '399 days', 1)`)
	exec(t, s, `INSERT INTO usage_counts (tenant_id, hour, shard, accepted) VALUES
		('acme', date_trunc('hour', now()) - interval '401 days', 1, 1)`)
	exec(t, s, `INSERT INTO audit_events (tenant_id, type, actor, target, at) VALUES
		('acme', 'template.saved', 'operator', 'a', now() - interval '402 days'), ('acme', 'template.saved', 'operator', 'b', now() - interval '401 days'),
		('acme', 'template.saved', 'operator', 'c', now() - interval '399 days')`)

	for _, kind := range store.PurgeKinds {
		if d, err := s.Overdue(ctx, kind, policy); err != nil || d <= 0 {
			t.Errorf("before the purge, %s overdue %s (%v), want > 0", kind, d, err)
		}
	}
	purged := purgeAll(t, s, 2) // small batches: every kind takes several
	want := map[store.PurgeKind]int64{store.PurgeBodies: 3, store.PurgeNotifications: 2, store.PurgeLinkTokens: 2,
		store.PurgeVerificationSessions: 1, store.PurgeIdempotencyKeys: 1, store.PurgeProcessedUpdates: 1,
		store.PurgeCallbackEvents: 2, store.PurgeStopPrompts: 1, store.PurgeDigests: 1, store.PurgeUsage: 2, store.PurgeAuditEvents: 2}
	for kind, n := range want {
		if purged[kind] != n {
			t.Errorf("purged %d %s, want %d", purged[kind], kind, n)
		}
	}
	for _, kind := range store.PurgeKinds {
		if d, err := s.Overdue(ctx, kind, policy); err != nil || d != 0 {
			t.Errorf("after the purge, %s overdue %s (%v), want 0", kind, d, err)
		}
	}

	if n := count(t, s, `SELECT count(*) FROM digests d JOIN digest_items i ON i.digest_id = d.id WHERE d.key IN ('recent', 'open')`); n != 2 ||
		count(t, s, `SELECT count(*) FROM digest_items`) != 2 {
		t.Errorf("digests kept: %d of 2, with their items", n)
	}

	bodyOf := func(id string) (string, bool) {
		var body string
		var markup bool
		if err := s.Pool().QueryRow(ctx, `SELECT body, reply_markup IS NOT NULL FROM notifications WHERE tracking_id = $1`, id).Scan(&body, &markup); err != nil {
			t.Fatalf("notification %s: %v", id, err)
		}
		return body, markup
	}
	if b, _ := bodyOf(bodyDue); b != "" {
		t.Errorf("a body 8 days after delivery is kept: %q", b)
	}
	if b, markup := bodyOf(systemDue); b != "" || markup {
		t.Errorf("a system message 8 days after delivery keeps body %q, reply markup %v", b, markup)
	}
	if b, _ := bodyOf(bodyKept); b != "recent" {
		t.Errorf("a body 6 days after delivery is %q, want kept", b)
	}
	bodyOf(rowKept)
	for _, id := range []string{rowDue, rowAndBodyDue} {
		if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1`, id); n != 0 {
			t.Errorf("notification %s 91 days after its final state is kept", id)
		}
	}
	for _, id := range inFlight {
		if b, _ := bodyOf(id); b != "in flight" {
			t.Errorf("an in-flight notification lost its body")
		}
	}
	var tokens []string
	rows, _ := s.Pool().Query(ctx, `SELECT encode(substr(digest, 1, 1), 'hex') FROM link_tokens ORDER BY 1`)
	for rows.Next() {
		var d string
		_ = rows.Scan(&d)
		tokens = append(tokens, d)
	}
	if !slices.Equal(tokens, []string{"03", "04"}) {
		t.Errorf("link tokens left %v, want the one expired 2 hours ago and the live one", tokens)
	}
	var status string
	var label *string
	if err := s.Pool().QueryRow(ctx, `SELECT status, label FROM phone_verifications WHERE user_id = 'p1'`).Scan(&status, &label); err != nil || status != "unverified" || label != nil {
		t.Errorf("a session expired 2 days ago: status %q, label %v (%v); want unverified without a label", status, label, err)
	}
	if v, err := s.GetVerification(ctx, "acme", "p1"); err != nil || v.Status != "unverified" {
		t.Errorf("GET status of a purged session: %+v %v", v, err)
	}
	if n := count(t, s, `SELECT count(*) FROM phone_verifications WHERE user_id = 'p2' AND status = 'pending'`); n != 1 {
		t.Error("a session expired an hour ago was purged")
	}
	if n := count(t, s, `SELECT count(*) FROM idempotency_keys WHERE key = 'new'`) + count(t, s, `SELECT count(*) FROM idempotency_keys`); n != 2 {
		t.Error("idempotency keys: want only the 23-hour-old one left")
	}
	if n := count(t, s, `SELECT count(*) FROM processed_updates WHERE update_id = 2`) + count(t, s, `SELECT count(*) FROM processed_updates`); n != 2 {
		t.Error("processed updates: want only the recent one left")
	}
	if n := count(t, s, `SELECT count(*) FROM callback_events WHERE (state = 'delivered' AND finished_at > now() - interval '7 days') OR state = 'pending'`) +
		count(t, s, `SELECT count(*) FROM callback_events`); n != 4 {
		t.Error("callback events: want only the one delivered 6 days ago and the pending one left")
	}
	if n := count(t, s, `SELECT count(*) FROM stop_prompts WHERE created_at > now() - interval '1 day'`) + count(t, s, `SELECT count(*) FROM stop_prompts`); n != 2 {
		t.Error("stop prompts: want only the one made 23 hours ago left")
	}
	// A second run finds nothing.
	for kind, n := range purgeAll(t, s, 100) {
		if n != 0 {
			t.Errorf("a second purge removed %d %s", n, kind)
		}
	}
}

// The purge finds due bodies through a partial index whose predicate names the states that are not
// terminal. A state added to notification.Statuses that is not terminal must be named there too (a new migration),
// or its old notifications sit in the index and are re-read by every purge.
func TestRetentionIndexesExcludeEveryNonTerminalState(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	var def string
	if err := s.Pool().QueryRow(context.Background(), `SELECT indexdef FROM pg_indexes WHERE indexname = 'notifications_body_kept_idx'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	for _, st := range notification.Statuses {
		named := strings.Contains(def, "'"+string(st)+"'")
		if !st.Terminal() && !named {
			t.Errorf("state %s is not terminal but notifications_body_kept_idx does not exclude it: %s", st, def)
		}
		if st.Terminal() && named {
			t.Errorf("terminal state %s is excluded from notifications_body_kept_idx: its bodies would never be erased: %s", st, def)
		}
	}
	for kind, sql := range store.PurgeSQLForTest() {
		if kind != store.PurgeBodies && kind != store.PurgeNotifications {
			continue
		}
		// The test table is tiny, so ask whether the index can serve the statement, not whether it is cheaper.
		var plan strings.Builder
		tx, err := s.Pool().Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(context.Background(), `SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(context.Background(), `EXPLAIN `+sql, "7 days", 100)
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", kind, err)
		}
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			plan.WriteString(line + "\n")
		}
		_ = tx.Rollback(context.Background())
		want := map[store.PurgeKind]string{store.PurgeBodies: "notifications_body_kept_idx", store.PurgeNotifications: "notifications_body_erased_idx"}[kind]
		if !strings.Contains(plan.String(), want) {
			t.Errorf("the %s purge does not use %s:\n%s", kind, want, plan.String())
		}
	}
}

// One purge at a time across workers: the advisory lock is held by one session, and freed by unlock.
func TestOnePurgeRunsAtATime(t *testing.T) {
	a, url := pgtest.NewStore(t)
	b, err := store.Open(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	unlock, ok, err := a.TryRetentionLock(ctx)
	if err != nil || !ok {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	if _, ok, err := b.TryRetentionLock(ctx); err != nil || ok {
		t.Fatalf("a second worker took the lock while the first holds it: %v %v", ok, err)
	}
	unlock()
	unlockB, ok, err := b.TryRetentionLock(ctx)
	if err != nil || !ok {
		t.Fatalf("the lock is not free after unlock: %v %v", ok, err)
	}
	unlockB()
}
