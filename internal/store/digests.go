package store

// Digests (spec v1-extensions §14): the join of an accepted notification to its key's open digest, in the
// transaction that stores it, and the gathering of a digest's items by the worker that claimed one of them.
//
// At most one digest per tenant, user and key is open (digests_open_idx, a partial unique index): the
// join's INSERT … ON CONFLICT DO UPDATE either opens it or joins the open one, and a concurrent join waits
// for the first's row lock and then joins what the first made — two concurrent sends never open two
// digests, whichever ingress replicas serve them. A worker closes the digest (open = false) in its own
// statement before it takes the items, under the same row lock: a join that committed before is seen by
// the taking statement (READ COMMITTED: a new snapshot per statement), one that comes after finds no open
// digest and opens the next.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
)

// closeLapsedSQL closes the key's open digest whose window has ended (no worker gathered it yet: its items
// are due, a worker will), so that the join after it opens the next.
const closeLapsedSQL = `UPDATE digests SET open = false
	WHERE tenant_id = $1 AND user_id = $2 AND key = $3 AND open AND closes_at <= now()`

// joinSQL opens the key's digest or joins the open one, when its items share the format: no row when they
// do not. A join that fills it (max_items) closes it at once.
const joinSQL = `
	INSERT INTO digests (tenant_id, user_id, key, format, max_items, items, closes_at, open)
	VALUES ($1, $2, $3, $4, $5::smallint, 1, now() + make_interval(secs => $6), $5::smallint > 1)
	ON CONFLICT (tenant_id, user_id, key) WHERE open DO UPDATE
	SET items = digests.items + 1, open = digests.items + 1 < digests.max_items,
	    closes_at = CASE WHEN digests.items + 1 < digests.max_items THEN digests.closes_at ELSE now() END
	WHERE digests.format = EXCLUDED.format
	RETURNING id, items, closes_at, open, format`

// placeSQL records the item's place in its digest and makes it due when the digest closes: at the end of
// its window, or now when this item filled it (then every waiting item of the digest is due now).
var placeSQL = `
	WITH i AS (INSERT INTO digest_items (tracking_id, digest_id, position) VALUES ($1, $2, $3))
	UPDATE notifications n SET send_at = $4
	WHERE n.tracking_id = $1
	   OR ($5 AND n.status = ` + notification.Scheduled.SQL() + ` AND n.tracking_id IN (SELECT tracking_id FROM digest_items WHERE digest_id = $2))`

// JoinDigests joins each accepted notification of ns that has a digest to its key's digest, in the
// transaction that stored it (the caller's), in the order of ns within each key. An item whose digest's
// items have another format is taken back (deleted) and returned with the reason: the send is refused.
// Keys are taken in a fixed order (tenant, user, key), so that two transactions never wait for each other
// in a circle.
func (tx *Tx) JoinDigests(ctx context.Context, ns []NewNotification, accepted map[string]Destination) (map[string]string, error) {
	var items []NewNotification
	for _, n := range ns {
		if _, ok := accepted[n.TrackingID]; ok && n.Digest != nil {
			items = append(items, n)
		}
	}
	slices.SortStableFunc(items, func(a, b NewNotification) int {
		return strings.Compare(a.TenantID+"\x00"+a.UserID+"\x00"+a.Digest.Key, b.TenantID+"\x00"+b.UserID+"\x00"+b.Digest.Key)
	})
	refused := map[string]string{}
	for _, n := range items {
		d := n.Digest
		if _, err := tx.tx.Exec(ctx, closeLapsedSQL, n.TenantID, n.UserID, d.Key); err != nil {
			return nil, translate(err, "closing a lapsed digest")
		}
		var id int64
		var position int16
		var closesAt time.Time
		var open bool
		var format string
		err := tx.tx.QueryRow(ctx, joinSQL, n.TenantID, n.UserID, d.Key, n.Format, d.MaxItems, d.Window.Seconds()).
			Scan(&id, &position, &closesAt, &open, &format)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := tx.tx.Exec(ctx, `DELETE FROM notifications WHERE tracking_id = $1`, n.TrackingID); err != nil {
				return nil, translate(err, "taking back a digest's item")
			}
			delete(accepted, n.TrackingID)
			refused[n.TrackingID] = fmt.Sprintf("the open digest %q of user %q holds %s messages: a digest's items must agree on format",
				d.Key, n.UserID, formatName(format))
			continue
		}
		if err != nil {
			return nil, translate(err, "joining a digest")
		}
		if _, err := tx.tx.Exec(ctx, placeSQL, n.TrackingID, id, position, closesAt, !open); err != nil {
			return nil, translate(err, "placing an item in its digest")
		}
	}
	return refused, nil
}

// formatName names a stored format ("" is text) in a message.
func formatName(f string) string {
	if f == "" {
		return notification.FormatText
	}
	return f
}

// gatherSQL is notification.Gather: the digest's other items that wait (or whose worker died), taken
// under the claim's lease, each an attempt of its own.
var gatherSQL = `
	UPDATE notifications n
	SET status = ` + notification.Gather.To().SQL() + `, attempts = n.attempts + 1,
	    lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
	FROM digest_items i
	WHERE i.digest_id = $1 AND n.tracking_id = i.tracking_id AND n.tracking_id <> $2 AND ` + notification.Gather.SQL() + `
	RETURNING n.tracking_id::text, n.attempts, i.position, n.body, COALESCE(n.entities, '')`

// GatherDigest takes the items of d's digest with d — a notification of a digest that d's worker has just
// claimed — to send them as one message: it closes the digest (no item joins it any more: a later send
// opens the next), then moves its other items that wait, or whose worker died, to delivering under the
// same lease (notification.Gather), records on each the size of the message, and returns them all, d
// included, in the order accepted. An item cancelled or expired is not taken: it is left out.
func (s *Store) GatherDigest(ctx context.Context, d notification.Delivery, lease time.Duration) ([]notification.DigestItem, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var items []notification.DigestItem
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		items = items[:0]
		var id int64
		var position int
		// First, alone: the row lock waits for a join under way, and the statements after it see that join.
		err := tx.QueryRow(ctx, `
			UPDATE digests g SET open = false FROM digest_items i
			WHERE i.tracking_id = $1 AND g.id = i.digest_id
			RETURNING g.id, i.position`, d.TrackingID).Scan(&id, &position)
		if err != nil {
			return err
		}
		items = append(items, notification.DigestItem{TrackingID: d.TrackingID, Attempts: d.Attempts, Position: position, Body: d.Body, Entities: d.Entities})
		rows, err := tx.Query(ctx, gatherSQL, id, d.TrackingID, lease.Seconds())
		if err != nil {
			return err
		}
		var it notification.DigestItem
		if _, err := pgx.ForEachRow(rows, []any{&it.TrackingID, &it.Attempts, &it.Position, &it.Body, &it.Entities}, func() error {
			items = append(items, it)
			return nil
		}); err != nil {
			return err
		}
		ids := make([]string, len(items))
		for i, it := range items {
			ids[i] = it.TrackingID
		}
		_, err = tx.Exec(ctx, `UPDATE notifications SET digest_size = $2 WHERE tracking_id = ANY($1::uuid[])`, ids, len(items))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("notification %s: %w", d.TrackingID, ErrNotFound)
	}
	if err != nil {
		return nil, translate(err, "gathering the digest of "+d.TrackingID)
	}
	slices.SortFunc(items, func(a, b notification.DigestItem) int { return a.Position - b.Position })
	return items, nil
}
