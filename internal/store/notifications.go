package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/phone"
	"github.com/heraldhq/herald/internal/usage"
)

// NewNotification is a notification to insert.
type NewNotification struct {
	TrackingID string
	Kind       string // notification.KindTenant or KindSystem
	TenantID   string // empty for a system message of no tenant
	UserID     string // tenant notifications
	ChatID     int64  // system messages; for tenant notifications, set from the link when stored
	// Bot is the bot a system message goes through (the one that received the update it answers, or the
	// bot of the link it is about); for tenant notifications, set from the link when stored.
	Bot         notification.BotID
	Priority    int
	Body        string          // branded snapshot
	ReplyMarkup json.RawMessage // a system message's keyboard; a tenant notification's link buttons (§10)
	// Rich: a tenant notification's format, entities (of Body) and send flags (§10).
	notification.Rich

	// Tenant notifications only (the options of a send). Status is notification.Queued (the default when
	// empty: published at once; notification.Accept) or Scheduled (it waits for SendAt in PostgreSQL and is
	// not published now; notification.Schedule).
	Status    notification.Status
	Metadata  map[string]string // nil or empty: none
	SendAt    *time.Time        // as the tenant gave it, also when already due
	ExpiresAt *time.Time
	Category  string // "": none
	// Template: the template the body was rendered from (§12); nil: none.
	Template *notification.TemplateRef
	// ReplaceKey: the send's replace_key (§13); "": none.
	ReplaceKey string
	// QuietIgnore: the send ignores its tenant's quiet hours (§14: "ignore", or the default at priority 7
	// and above).
	QuietIgnore bool
	// Digest: the send's digest option (§14); nil: none. Its item is stored scheduled, without a send_at
	// until it joins its digest (Tx.JoinDigests, in the same transaction).
	Digest *notification.Digest
}

// Every row is committed before its envelope is published (internal/outbox), so a worker that receives an
// envelope finds its row, and an envelope without a row is an orphan to drop. Rows are inserted with
// published_at set ("a publish is under way"); a publish that fails either takes the row back
// (DiscardNotifications: the tenant is told nothing was stored) or clears published_at for the relay
// (MarkUnpublished). A producer that dies between the commit and the publish leaves a row with
// published_at set that nobody consumes: the redrive (RepublishStuck) finds it.

// insertTenantSQL inserts tenant notifications, queued or scheduled, each only when its user has a link
// and a verified phone and no opt-out covers it — none of the tenant, none of its category (the send gate
// and the insert are one statement; refusedByOptOutsSQL tells the refusals apart) —, and returns the ones it inserted
// with the bot and the chat each goes to: the envelope's partition key (queue.NewOutgoing). Both are
// recorded on the row, from the link: the chat of the account whose phone was verified, through the bot
// the link was made through, is the only one the notification may reach
// (the claim sends there only while the link still leads there; a relink to another account ends the
// waiting ones: RedeemLinkToken), and republishing keys it alike. Queued rows are inserted with
// published_at set (their publish follows the commit); scheduled ones are not published until the
// scheduler releases them (ReleaseScheduled).
var insertTenantSQL = `
	WITH r AS (
		SELECT r.tracking_id, r.tenant_id, r.user_id, r.priority, r.body, r.status, r.metadata, r.send_at,
		       r.expires_at, r.category, r.format, r.entities, r.reply_markup, r.silent, r.protect_content, r.link_preview,
		       r.template_name, r.template_version, r.template_locale, r.replace_key, r.quiet_ignore, r.digest_key, l.chat_id, l.bot_id
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::smallint[], $5::text[], $6::text[], $7::text[],
		            $8::timestamptz[], $9::timestamptz[], $10::text[], $11::text[], $12::text[], $13::text[],
		            $14::boolean[], $15::boolean[], $16::boolean[], $17::text[], $18::int[], $19::text[], $20::text[],
		            $21::boolean[], $22::text[])
		     AS r(tracking_id, tenant_id, user_id, priority, body, status, metadata, send_at, expires_at, category,
		          format, entities, reply_markup, silent, protect_content, link_preview, template_name, template_version,
		          template_locale, replace_key, quiet_ignore, digest_key)
		JOIN links l ON l.tenant_id = r.tenant_id AND l.user_id = r.user_id
		JOIN phone_verifications v ON v.tenant_id = r.tenant_id AND v.user_id = r.user_id
		WHERE v.status = ` + phone.Verified.SQL() + `
		  AND NOT EXISTS (SELECT 1 FROM opt_outs o WHERE o.tenant_id = r.tenant_id AND o.user_id = r.user_id AND ` + optOutCovers(`r.category`) + `)),
	ins AS (
	INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, chat_id, bot_id, priority, body, status, published_at,
	                           metadata, send_at, expires_at, category, format, entities, reply_markup, silent, protect_content,
	                           link_preview, template_name, template_version, template_locale, replace_key, quiet_ignore, digest_key)
	SELECT tracking_id, ` + notification.KindTenantSQL + `, tenant_id, user_id, chat_id, bot_id, priority, body, status,
	       CASE WHEN status = ` + notification.Queued.SQL() + ` THEN now() END, metadata::jsonb, send_at, expires_at, category,
	       format, entities, reply_markup::jsonb, silent, protect_content, link_preview, template_name, template_version,
	       template_locale, replace_key, quiet_ignore, digest_key
	FROM r
	RETURNING tracking_id, bot_id, chat_id, tenant_id, created_at),
	` + countUsage("accepted", "ins", "created_at", usage.AcceptedDelta) + `
	SELECT tracking_id::text, COALESCE(bot_id, 0), chat_id FROM ins`

// The send gate and the erasure of a user (EraseUser) serialise on an advisory lock of the user's bucket
// (and an opt-out, OptOut, likewise: read "opt-out" for "erasure" below, and "finds the opt-out" for "finds
// no verified phone"):
// a send holds its users' buckets shared from just before its insert until it commits; an erasure holds its
// user's bucket exclusively for its whole transaction. So a send that got its lock first commits before
// the erasure goes on (which then sees, and cancels, its notification), and a send that waits for an
// erasure takes its gate's snapshot after the erasure committed, finds no verified phone and inserts
// nothing. Without it, a send whose snapshot predates the erasure could commit a notification for an
// erased user after it. Advisory locks live in memory: the gate writes nothing for them (a row lock, FOR
// KEY SHARE on the verification row, does the same job but writes a WAL record per user and per send
// statement: docs/benchmarks.md). Users share buckets (1024, by a hash of tenant and user) so that a batch
// takes a bounded number of locks; an erasure delays the sends of the users of its bucket only, for as long
// as it runs.
const (
	userGateClass   = 0x48524c44 // "HRLD": the first key of Herald's two-key advisory locks of the gate
	userGateBuckets = 1024
)

// lockGateSQL takes the shared locks of a send statement, in ascending order.
var lockGateSQL = `SELECT count(pg_advisory_xact_lock_shared(` + strconv.Itoa(userGateClass) + `, b)) FROM unnest($1::int[]) AS b`

// eraseGateSQL takes the exclusive lock of a user's bucket (an erasure's, or an opt-out's).
var eraseGateSQL = `SELECT pg_advisory_xact_lock(` + strconv.Itoa(userGateClass) + `, $1::int)`

// userGateBucket is the bucket of a tenant's user.
func userGateBucket(tenantID, userID string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenantID))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(userID))
	return int32(h.Sum32() % userGateBuckets)
}

// Destination is where an accepted notification goes: a chat, of a bot.
type Destination struct {
	Bot  notification.BotID
	Chat int64
}

// InsertTenantNotifications inserts tenant notifications in one statement of its own (committed when it
// returns), each gated on its user's verified phone and opt-outs, and returns the tracking ids it inserted
// with their destinations (recorded from their users' links); the others' users may not receive them.
func (s *Store) InsertTenantNotifications(ctx context.Context, ns []NewNotification) (map[string]Destination, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	accepted, _, err := insertTenant(ctx, s.pool, ns, false)
	return accepted, err
}

// InsertTenantNotifications is the transaction's variant of Store.InsertTenantNotifications.
func (tx *Tx) InsertTenantNotifications(ctx context.Context, ns []NewNotification) (map[string]Destination, error) {
	accepted, _, err := insertTenant(ctx, tx.tx, ns, false)
	return accepted, err
}

// AcceptTenantNotifications is InsertTenantNotifications that also tells the refusals apart: optedOut maps
// each refused notification an opt-out covers (409 user_opted_out; the others' users have no link or no
// verified phone: 409 phone_unverified) to the category of an opt-out that covers it, "" for the whole
// tenant's. The read is part of the insert's transaction and round trip: either both happened or neither
// did, so a failure (PostgreSQL restarting between two statements) never leaves stored notifications
// behind an error answer.
func (s *Store) AcceptTenantNotifications(ctx context.Context, ns []NewNotification) (accepted map[string]Destination, optedOut map[string]string, err error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return insertTenant(ctx, s.pool, ns, true)
}

// AcceptTenantNotifications is the transaction's variant of Store.AcceptTenantNotifications.
func (tx *Tx) AcceptTenantNotifications(ctx context.Context, ns []NewNotification) (accepted map[string]Destination, optedOut map[string]string, err error) {
	return insertTenant(ctx, tx.tx, ns, true)
}

func insertTenant(ctx context.Context, q querier, ns []NewNotification, optOuts bool) (map[string]Destination, map[string]string, error) {
	ids := make([]string, len(ns))
	tenants := make([]string, len(ns))
	users := make([]string, len(ns))
	prios := make([]int16, len(ns))
	bodies := make([]string, len(ns))
	statuses := make([]string, len(ns))
	metadata := make([]*string, len(ns))
	sendAt := make([]*time.Time, len(ns))
	expiresAt := make([]*time.Time, len(ns))
	categories := make([]*string, len(ns))
	// The rich options (§10) are NULL when not given, so that a plain-text row stores nothing more.
	formats := make([]*string, len(ns))
	entities := make([]*string, len(ns))
	markups := make([]*string, len(ns))
	silent := make([]*bool, len(ns))
	protect := make([]*bool, len(ns))
	preview := make([]*bool, len(ns))
	// The template (§12), NULL for a send without one.
	tNames := make([]*string, len(ns))
	tVersions := make([]*int32, len(ns))
	tLocales := make([]*string, len(ns))
	replaceKeys := make([]*string, len(ns)) // §13, NULL for none
	quietIgnore := make([]*bool, len(ns))   // NULL: respects the quiet hours (§14)
	digestKeys := make([]*string, len(ns))
	for i, n := range ns {
		replaceKeys[i] = optionalText(n.ReplaceKey)
		quietIgnore[i] = optionalTrue(n.QuietIgnore)
		if n.Digest != nil {
			digestKeys[i] = &n.Digest.Key
		}
		if t := n.Template; t != nil {
			v := int32(t.Version)
			tNames[i], tVersions[i], tLocales[i] = &t.Name, &v, &t.Locale
		}
		ids[i], tenants[i], users[i], prios[i], bodies[i] = n.TrackingID, n.TenantID, n.UserID, int16(n.Priority), n.Body
		statuses[i] = string(notification.Accept.To())
		if n.Status != "" {
			statuses[i] = string(n.Status)
		}
		if len(n.Metadata) > 0 {
			b, _ := json.Marshal(n.Metadata) // strings only: cannot fail
			m := string(b)
			metadata[i] = &m
		}
		sendAt[i], expiresAt[i], categories[i] = n.SendAt, n.ExpiresAt, optionalText(n.Category)
		formats[i], entities[i], markups[i] = optionalText(n.Format), optionalText(n.Entities), optionalJSON(n.ReplyMarkup)
		silent[i], protect[i] = optionalTrue(n.Silent), optionalTrue(n.ProtectContent)
		if n.NoLinkPreview {
			preview[i] = new(bool) // false: the default, true, is NULL
		}
	}
	buckets := make([]int32, len(ns))
	for i, n := range ns {
		buckets[i] = userGateBucket(n.TenantID, n.UserID)
	}
	slices.Sort(buckets)
	buckets = slices.Compact(buckets)
	// The statements go in one round trip and one transaction (pgx runs a batch in an implicit transaction,
	// or in the caller's): the locks, then the insert, whose snapshot is taken after them, then (optOuts)
	// the read of the refusals an opt-out covers, which sees the insert's rows.
	b := &pgx.Batch{}
	b.Queue(lockGateSQL, buckets)
	b.Queue(insertTenantSQL, ids, tenants, users, prios, bodies, statuses, metadata, sendAt, expiresAt, categories,
		formats, entities, markups, silent, protect, preview, tNames, tVersions, tLocales, replaceKeys, quietIgnore, digestKeys)
	if optOuts {
		b.Queue(refusedByOptOutsSQL, ids, tenants, users, categories)
	}
	br := q.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, nil, translate(err, "inserting notifications")
	}
	accepted := make(map[string]Destination, len(ns))
	var optedOut map[string]string
	rows, err := br.Query()
	if err == nil {
		var id string
		var to Destination
		_, err = pgx.ForEachRow(rows, []any{&id, &to.Bot, &to.Chat}, func() error { accepted[id] = to; return nil })
	}
	if err == nil && optOuts {
		optedOut = map[string]string{}
		if rows, err = br.Query(); err == nil {
			var id, category string
			_, err = pgx.ForEachRow(rows, []any{&id, &category}, func() error { optedOut[id] = category; return nil })
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, translate(err, "inserting notifications")
	}
	return accepted, optedOut, nil
}

// optionalJSON is a JSON value as a text parameter, NULL for none.
func optionalJSON(b json.RawMessage) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

// optionalTrue is a flag as a parameter: true, or NULL for false (its default).
func optionalTrue(b bool) *bool {
	if !b {
		return nil
	}
	return &b
}

// insertSystemSQL inserts a system message in state queued; systemArgs are its arguments.
var insertSystemSQL = `
	INSERT INTO notifications (tracking_id, kind, tenant_id, chat_id, bot_id, priority, body, reply_markup, status, published_at)
	VALUES ($1, ` + notification.KindSystemSQL + `, NULLIF($2, ''), $3, $7, $4, $5, $6::jsonb, ` + notification.Accept.To().SQL() + `, now())`

func systemArgs(n NewNotification) []any {
	var markup any
	if len(n.ReplyMarkup) > 0 {
		markup = string(n.ReplyMarkup)
	}
	return []any{n.TrackingID, n.TenantID, n.ChatID, n.Priority, n.Body, markup, botArg(n.Bot)}
}

func insertSystem(ctx context.Context, q querier, n NewNotification) error {
	if _, err := q.Exec(ctx, insertSystemSQL, systemArgs(n)...); err != nil {
		return fmt.Errorf("inserting system message: %w", err)
	}
	return nil
}

// InsertSystemMessage inserts one system message (addressed to n.ChatID) in state queued, on its own.
func (s *Store) InsertSystemMessage(ctx context.Context, n NewNotification) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return translate(insertSystem(ctx, s.pool, n), "inserting a system message")
}

// discardSQL deletes the notifications $1 that are still in the state a send stored them in.
var discardSQL = `WITH gone AS (
	DELETE FROM notifications WHERE tracking_id = ANY($1::uuid[])
	AND ` + notification.StatusIn(notification.Accept.To(), notification.Schedule.To()) + `
	RETURNING tracking_id, kind, tenant_id, created_at),
	` + countUsage("taken_back", "gone WHERE kind = "+notification.KindTenantSQL, "created_at", usage.DiscardedDelta) + `
	SELECT tracking_id::text FROM gone`

// DiscardNotifications deletes the notifications whose publish failed (queued ones, and the scheduled
// ones of the same requests), so that the 502 their tenant receives is true, and returns the ones it
// deleted. One it did not delete was claimed by a worker
// meanwhile — the publish that timed out reached the broker after all — and is being delivered: its
// request must be answered as accepted (internal/outbox).
func (s *Store) DiscardNotifications(ctx context.Context, trackingIDs []string) (map[string]bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, discardSQL, trackingIDs)
	if err != nil {
		return nil, translate(err, "discarding unpublished notifications")
	}
	taken := map[string]bool{}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error { taken[id] = true; return nil })
	return taken, translate(err, "discarding unpublished notifications")
}

// MarkUnpublished hands notifications whose publish failed to the relay (RepublishUnpublished).
func (s *Store) MarkUnpublished(ctx context.Context, trackingIDs []string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `UPDATE notifications SET published_at = NULL WHERE tracking_id = ANY($1::uuid[]) AND status = `+notification.Queued.SQL(), trackingIDs)
	return translate(err, "marking notifications unpublished")
}

// viewColumns are the columns of a notification.View, in the order of viewScanArgs.
var viewColumns = `tracking_id::text, user_id, priority, status, attempts, created_at, updated_at,
	messenger_message_id, last_error_code, last_error_message, COALESCE(metadata, '{}'::jsonb), send_at, expires_at,
	delivered_at, CASE WHEN status = ` + notification.Retrying.SQL() + ` THEN next_attempt_at END, category,
	COALESCE(format, '` + notification.FormatText + `'),
	CASE WHEN template_name IS NOT NULL THEN jsonb_build_object('name', template_name, 'version', template_version, 'locale', template_locale) END,
	replace_key, CASE WHEN status = ` + notification.Delivered.SQL() + ` THEN COALESCE(delivered_as, '` + notification.DeliveredSent + `') END,
	message_deleted_at, digest_key, digest_size::int`

// viewScanArgs are the destinations of viewColumns in v.
func viewScanArgs(v *notification.View) []any {
	return []any{&v.TrackingID, &v.UserID, &v.Priority, &v.Status, &v.Attempts, &v.CreatedAt, &v.UpdatedAt,
		&v.MessengerMessageID, &v.LastErrorCode, &v.LastErrorMessage, &v.Metadata, &v.SendAt, &v.ExpiresAt,
		&v.DeliveredAt, &v.NextAttemptAt, &v.Category, &v.Format, &v.Template, &v.ReplaceKey, &v.DeliveredAs, &v.MessageDeletedAt, &v.DigestKey, &v.DigestSize}
}

// scanView reads one row of viewColumns.
func scanView(row pgx.CollectableRow) (notification.View, error) {
	var v notification.View
	err := row.Scan(viewScanArgs(&v)...)
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	return v, err
}

// GetNotification reads a tenant notification of this tenant; ErrNotFound for another tenant's, a system
// message, or an unknown id.
func (s *Store) GetNotification(ctx context.Context, tenantID, trackingID string) (notification.View, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return getView(ctx, s.pool, tenantID, trackingID)
}

func getView(ctx context.Context, q querier, tenantID, trackingID string) (notification.View, error) {
	rows, _ := q.Query(ctx, `SELECT `+viewColumns+`
		FROM notifications WHERE tracking_id = $1 AND tenant_id = $2 AND kind = `+notification.KindTenantSQL, trackingID, tenantID)
	v, err := pgx.CollectExactlyOneRow(rows, scanView)
	return v, translate(err, "reading notification")
}

// TenantNotification is a tenant notification's metadata with its tenant (never the body).
type TenantNotification struct {
	TenantID string
	notification.View
}

// FindTenantNotification reads the metadata of a tenant notification that belongs to one of tenantIDs
// (a developer's tenants); ErrNotFound otherwise (unknown id, a system message, or another tenant's).
func (s *Store) FindTenantNotification(ctx context.Context, tenantIDs []string, trackingID string) (TenantNotification, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, _ := s.pool.Query(ctx, `SELECT tenant_id, `+viewColumns+`
		FROM notifications WHERE tracking_id = $1 AND kind = `+notification.KindTenantSQL+` AND tenant_id = ANY ($2)`, trackingID, tenantIDs)
	v, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (TenantNotification, error) {
		var v TenantNotification
		err := row.Scan(append([]any{&v.TenantID}, viewScanArgs(&v.View)...)...)
		if v.Metadata == nil {
			v.Metadata = map[string]string{}
		}
		return v, err
	})
	return v, translate(err, "reading notification")
}

// Listing a tenant's notifications (GET /v1/notifications): newest first, by the keyset (created_at,
// tracking_id), which never changes for a row, so walking the pages returns each notification once even
// while new ones arrive (they sort before the pages already read). Every page is one range scan of
// notifications_tenant_list_idx, which starts with the tenant: its cost does not grow with other tenants'
// rows, nor with how deep the page is (no OFFSET). The status and user_id filters are applied to the
// tenant's rows in that walk.

// List page sizes.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// ListFilter selects a tenant's notifications; zero fields select everything.
type ListFilter struct {
	Statuses      []notification.Status // any of these states
	UserID        string                // this user only
	CreatedAfter  *time.Time            // created strictly after
	CreatedBefore *time.Time            // created strictly before
}

// fingerprint identifies the filter, so that a cursor is not used with another one.
func (f ListFilter) fingerprint() [8]byte {
	statuses := make([]string, len(f.Statuses))
	for i, st := range f.Statuses {
		statuses[i] = string(st)
	}
	slices.Sort(statuses)
	statuses = slices.Compact(statuses)
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	b, _ := json.Marshal([]any{statuses, f.UserID, ts(f.CreatedAfter), ts(f.CreatedBefore)})
	sum := sha256.Sum256(b)
	return [8]byte(sum[:8])
}

// ListCursor is the position after a page: the keyset of its last notification.
type ListCursor struct {
	CreatedAt  time.Time // to the microsecond, as PostgreSQL keeps it
	TrackingID string
}

// ErrBadCursor is a cursor that this filter's listing did not hand out.
var ErrBadCursor = errors.New("invalid cursor")

const cursorVersion = 1

// Encode renders the cursor as the opaque string clients pass back, bound to the filter of its listing.
func (c ListCursor) Encode(f ListFilter) string {
	id, _ := uuid.Parse(c.TrackingID) // a tracking id read from the table: always a UUID
	b := make([]byte, 0, 33)
	b = append(b, cursorVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(c.CreatedAt.UnixMicro()))
	b = append(b, id[:]...)
	fp := f.fingerprint()
	b = append(b, fp[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// The times a cursor may carry, in microseconds since 1970: a row's created_at is the database's clock at
// insert, so a cursor outside these years was forged, and part of int64's range is outside what
// PostgreSQL's timestamptz holds (the statement would fail: a 500 instead of a 400).
const (
	cursorEarliestMicros = 0                  // 1970-01-01
	cursorLatestMicros   = 253402300800000000 // 10000-01-01, excluded
)

// DecodeListCursor reads a cursor that Encode rendered for the same filter; ErrBadCursor otherwise.
// Cursors are not signed: one can only name a place in the caller's own listing (the tenant comes from
// the key), so a forged one reveals nothing; each field is checked so that the query cannot fail.
func DecodeListCursor(s string, f ListFilter) (ListCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 33 || b[0] != cursorVersion {
		return ListCursor{}, ErrBadCursor
	}
	if fp := f.fingerprint(); !bytes.Equal(b[25:], fp[:]) {
		return ListCursor{}, fmt.Errorf("%w: it belongs to a listing with other filters", ErrBadCursor)
	}
	micros := int64(binary.BigEndian.Uint64(b[1:9]))
	if micros < cursorEarliestMicros || micros >= cursorLatestMicros {
		return ListCursor{}, fmt.Errorf("%w: its time is out of range", ErrBadCursor)
	}
	// Any 16 bytes are a UUID to PostgreSQL, and a position in the keyset.
	id, _ := uuid.FromBytes(b[9:25])
	return ListCursor{CreatedAt: time.UnixMicro(micros).UTC(), TrackingID: id.String()}, nil
}

// ListNotifications returns up to limit of the tenant's notifications matching f, newest first, after the
// cursor (nil: from the newest), and the cursor after the page (nil when it was the last).
func (s *Store) ListNotifications(ctx context.Context, tenantID string, f ListFilter, limit int, after *ListCursor) ([]notification.View, *ListCursor, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	limit = max(1, min(limit, MaxListLimit))
	query, args := listSQL(tenantID, f, limit+1, after)
	rows, _ := s.pool.Query(ctx, query, args...)
	page, err := pgx.CollectRows(rows, scanView)
	if err != nil {
		return nil, nil, translate(err, "listing notifications")
	}
	if len(page) <= limit {
		return page, nil, nil
	}
	page = page[:limit]
	last := page[limit-1]
	return page, &ListCursor{CreatedAt: last.CreatedAt, TrackingID: last.TrackingID}, nil
}

// listSQL is the query of a page of at most limit rows, with only the conditions the filter uses, so that
// each shape gets a plan of its own.
func listSQL(tenantID string, f ListFilter, limit int, after *ListCursor) (string, []any) {
	args := []any{tenantID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := []string{"tenant_id = $1", "kind = " + notification.KindTenantSQL}
	if len(f.Statuses) > 0 {
		statuses := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			statuses[i] = string(st)
		}
		where = append(where, "status = ANY("+arg(statuses)+"::text[])")
	}
	if f.UserID != "" {
		where = append(where, "user_id = "+arg(f.UserID))
	}
	if f.CreatedAfter != nil {
		where = append(where, "created_at > "+arg(*f.CreatedAfter))
	}
	if f.CreatedBefore != nil {
		where = append(where, "created_at < "+arg(*f.CreatedBefore))
	}
	if after != nil {
		// A row comparison: the index's range condition, so a deep page costs what the first one does.
		where = append(where, "(created_at, tracking_id) < ("+arg(after.CreatedAt)+"::timestamptz, "+arg(after.TrackingID)+"::uuid)")
	}
	// The order names the table's columns (the select list's tracking_id is text, which the index does not
	// hold); the limit is a literal: a generic plan must not have to guess it.
	return `SELECT ` + viewColumns + ` FROM notifications WHERE ` + strings.Join(where, " AND ") + `
		ORDER BY notifications.created_at DESC, notifications.tracking_id DESC LIMIT ` + strconv.Itoa(limit), args
}

// StatusCount is the number of a tenant's notifications in one status.
type StatusCount struct {
	TenantID string
	Status   notification.Status
	Count    int64
}

// NotificationStats counts the tenant notifications of the given tenants created within the last window,
// by tenant and status, ordered by tenant and status.
func (s *Store) NotificationStats(ctx context.Context, tenantIDs []string, window time.Duration) ([]StatusCount, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT tenant_id, status, count(*) FROM notifications
		WHERE kind = `+notification.KindTenantSQL+` AND tenant_id = ANY ($1) AND created_at > now() - $2::interval
		GROUP BY tenant_id, status ORDER BY tenant_id, status`, tenantIDs, window.String())
	if err != nil {
		return nil, translate(err, "counting notifications")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StatusCount, error) {
		var c StatusCount
		err := r.Scan(&c.TenantID, &c.Status, &c.Count)
		return c, err
	})
	return out, translate(err, "counting notifications")
}

// PublishWindow bounds how long a producer may take to publish a notification it has just committed: one
// that gets no acknowledgement within it has given up (its rows are discarded or left to the relay).
// Producers use shorter timeouts (2 s); the window is what a concurrent duplicate of an idempotent send
// waits for before it trusts the first request's outcome.
const PublishWindow = 5 * time.Second

// TenantNotifications reads the metadata of tenant notifications by tracking id, each with its tenant (the
// payloads of callbacks); ids that name nothing (any more) are absent from the result.
func (s *Store) TenantNotifications(ctx context.Context, trackingIDs []string) (map[string]TenantNotification, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT tenant_id, `+viewColumns+`
		FROM notifications WHERE tracking_id = ANY ($1::uuid[]) AND kind = `+notification.KindTenantSQL, trackingIDs)
	if err != nil {
		return nil, translate(err, "reading notifications")
	}
	out := map[string]TenantNotification{}
	var v TenantNotification
	_, err = pgx.ForEachRow(rows, append([]any{&v.TenantID}, viewScanArgs(&v.View)...), func() error {
		out[v.TrackingID] = v
		return nil
	})
	return out, translate(err, "reading notifications")
}
