package store_test

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/usage"
)

// latestMigration is the version of the newest migration: this release's code needs the schema at it.
var latestMigration = func() int64 {
	files, _ := fs.Glob(store.MigrationsForTest(), "*.sql")
	var latest int64
	for _, f := range files {
		v, _ := strconv.ParseInt(strings.SplitN(f, "_", 2)[0], 10, 64)
		latest = max(latest, v)
	}
	return latest
}()

// migrateTo moves the database at url to version v, up or down.
func migrateTo(t *testing.T, url string, v int64) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, store.MigrationsForTest())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v < current {
		_, err = p.DownTo(ctx, v)
	} else {
		_, err = p.UpTo(ctx, v)
	}
	if err != nil {
		t.Fatalf("migrating from %d to %d: %v", current, v, err)
	}
}

// The bots migrations (00014, 00015) keep every row written before them working as the shared bot's: a
// link, a notification waiting for it and a processed update id. They go down and up again.
func TestTheBotsMigrationsKeepTheRowsOfTheSharedBot(t *testing.T) {
	s, url := pgtest.NewStore(t)
	ctx := context.Background()
	migrateTo(t, url, 13)
	exec(t, s, `INSERT INTO tenants (id, developer_name) VALUES ('acme', 'Acme')`)
	exec(t, s, `INSERT INTO users (tenant_id, user_id) VALUES ('acme', 'ok')`)
	exec(t, s, `INSERT INTO links (tenant_id, user_id, messenger_user_id, chat_id) VALUES ('acme', 'ok', 1, 1)`)
	exec(t, s, `INSERT INTO phone_verifications (tenant_id, user_id, status) VALUES ('acme', 'ok', 'verified')`)
	exec(t, s, `INSERT INTO processed_updates (update_id) VALUES (500)`)
	before := newID()
	exec(t, s, `INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, chat_id, priority, body, status, published_at)
		VALUES ($1, 'tenant', 'acme', 'ok', 1, 5, 'hello', 'queued', now())`, before)

	migrateTo(t, url, latestMigration)
	// The previous release's webhook claims an update id as it did.
	exec(t, s, `INSERT INTO processed_updates (update_id) SELECT unnest('{500,501}'::bigint[]) ON CONFLICT DO NOTHING`)
	if n := count(t, s, `SELECT count(*) FROM processed_updates WHERE bot_id = 0`); n != 2 {
		t.Errorf("%d processed updates of the shared bot, want 2 (500 once, and 501)", n)
	}
	eff := store.ReplyEffect(500, store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 1, Priority: 9, Body: "r"})
	if err := s.ApplyUpdates(ctx, []*store.Effect{eff}); err != nil || !errors.Is(eff.Err, store.ErrUpdateProcessed) {
		t.Errorf("update 500 after the migration: %v %v, want a repeat", err, eff.Err)
	}
	d, err := s.ClaimDelivery(ctx, before, time.Minute)
	if err != nil || d.Bot != notification.SharedBot || d.ChatID != 1 || d.Relinked {
		t.Errorf("the notification accepted before: %+v %v, want chat 1 of the shared bot", d, err)
	}
	after := tenantNotification("ok")
	if got, err := s.InsertTenantNotifications(ctx, []store.NewNotification{after}); err != nil || got[after.TrackingID] != (store.Destination{Chat: 1}) {
		t.Errorf("a send through the link made before: %v %v", got, err)
	}
	var pkey string
	if err := s.Pool().QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'processed_updates_pkey'`).Scan(&pkey); err != nil ||
		pkey != "PRIMARY KEY (bot_id, update_id)" {
		t.Errorf("processed_updates' key: %q %v", pkey, err)
	}
	var validated bool
	if err := s.Pool().QueryRow(ctx, `SELECT convalidated FROM pg_constraint WHERE conname = 'links_bot_id_fkey'`).Scan(&validated); err != nil || !validated {
		t.Errorf("links_bot_id_fkey validated %v %v", validated, err)
	}

	// Down and up again: a second bot's update id that the old key cannot hold goes; the rest stays.
	exec(t, s, `INSERT INTO processed_updates (bot_id, update_id) VALUES (9, 500)`)
	migrateTo(t, url, 13)
	if n := count(t, s, `SELECT count(*) FROM processed_updates`); n != 2 {
		t.Errorf("%d processed updates after going down, want the shared bot's 2", n)
	}
	migrateTo(t, url, 15)
	if n := count(t, s, `SELECT count(*) FROM links WHERE bot_id IS NULL`); n != 1 {
		t.Errorf("%d links of the shared bot after down and up, want 1", n)
	}
}

// The opt-outs migrations (00016, 00017) go down and up again over a database in use: a user's opt-out, a
// blocked link, a categorised notification and a stop prompt do not stop the way down, and a send for the
// user keeps working on both sides.
func TestTheOptOutsMigrationsGoDownAndUp(t *testing.T) {
	s, url := pgtest.NewStore(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	verifiedUser(t, s, "acme", "ok", 1)
	if _, err := s.OptOut(ctx, "acme", "ok", "promo", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetChatBlocked(ctx, notification.SharedBot, 1, true); err != nil {
		t.Fatal(err)
	}
	n := tenantNotification("ok")
	n.Category = "news"
	insert(t, s, n)
	exec(t, s, `INSERT INTO stop_prompts (id, chat_id, messenger_user_id, kind, choices) VALUES (decode(repeat('01', 16), 'hex'), 1, 1, 'stop', '[]')`)

	migrateTo(t, url, 15)
	exec(t, s, `INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, chat_id, priority, body, status) VALUES ($1, 'tenant', 'acme', 'ok', 1, 5, 'x', 'queued')`, newID())
	migrateTo(t, url, latestMigration)
	if u, err := s.GetUser(ctx, "acme", "ok"); err != nil || u.OptedOut || len(u.OptedOutCategories) != 0 || u.Blocked {
		t.Errorf("after down and up: %+v %v, want the user without opt-outs or a block (the way down drops them)", u, err)
	}
	insert(t, s, tenantNotification("ok"))
}

// The usage_hours migration (00029) moves the settled hours' shards of usage_counts into one row per
// tenant and hour, summed, and leaves the hours still written in their shards; a reader's counts are the
// same before and after, and after the way down and up again.
func TestTheUsageHoursMigrationMovesTheSettledHours(t *testing.T) {
	s, url := pgtest.NewStore(t)
	ctx := context.Background()
	migrateTo(t, url, 28)
	exec(t, s, `INSERT INTO usage_counts (tenant_id, hour, shard, accepted, delivered, paid_broadcast)
		SELECT t, date_trunc('hour', now()) - h * interval '1 hour', sh, 10 * h + sh, h, 1
		FROM unnest(ARRAY['acme', 'globex']) t, generate_series(0, 9) h, generate_series(0, 7) sh
		WHERE sh = 0 OR h < 6`) // hours 6..9 folded into shard 0 already (00027's fold), 0..5 in their shards
	read := func() []usage.Period {
		t.Helper()
		now := time.Now().UTC()
		ps, err := s.Usage(ctx, "", usage.Window{From: now.Add(-24 * time.Hour), To: now.Add(time.Hour), Granularity: usage.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	migrateTo(t, url, latestMigration)
	after := read()
	if len(after) != 2*10 {
		t.Fatalf("%d periods after the migration, want %d", len(after), 2*10)
	}
	for _, p := range after {
		h := int64(time.Now().UTC().Truncate(time.Hour).Sub(p.Start) / time.Hour)
		want := usage.Counts{Accepted: 10 * h, Delivered: h, PaidBroadcast: 1}
		if h < 6 {
			want = usage.Counts{Accepted: 8*10*h + 28, Delivered: 8 * h, PaidBroadcast: 8}
		}
		if p.Counts != want {
			t.Errorf("%s hour %d after the migration: %+v, want %+v", p.TenantID, h, p.Counts, want)
		}
	}
	// Hours 2..9 are settled (usage.SettleAfter): moved; 0 and 1 keep their shards.
	if n := count(t, s, `SELECT count(*) FROM usage_hours`); n != 2*8 {
		t.Errorf("%d rows in usage_hours, want one per tenant and settled hour, %d", n, 2*8)
	}
	if n := count(t, s, `SELECT count(*) FROM usage_counts`); n != 2*2*8 {
		t.Errorf("%d rows left in usage_counts, want the %d shards of the last two hours", n, 2*2*8)
	}
	migrateTo(t, url, 28)
	if n := count(t, s, `SELECT count(*) FROM usage_counts`); n != 2*2*8+2*8 {
		t.Errorf("%d rows in usage_counts after the way down, want %d (the settled hours as shard 0)", n, 2*2*8+2*8)
	}
	migrateTo(t, url, latestMigration)
	if again := read(); !equalPeriods(again, after) {
		t.Errorf("after down and up: %+v, want %+v", again, after)
	}
}
