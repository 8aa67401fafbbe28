package store

// A tenant's users as Herald knows them (GET /v1/users/{user_id}), and their erasure (DELETE): the user
// record and everything hanging off it — users, links, link_tokens, phone_verifications — and the bodies of
// the user's notifications.

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// User is what a tenant may read about one of its users: never the chat id or the phone number.
type User struct {
	UserID            string
	LinkedAt          *time.Time // nil: not linked
	PhoneVerification string     // unverified, pending or verified
	VerifiedAt        *time.Time
	PhoneLast4        *string
}

// GetUser reads a user of the tenant; ErrNotFound when the tenant has never asked for a link token for
// them (or erased them since).
func (s *Store) GetUser(ctx context.Context, tenantID, userID string) (User, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	u := User{UserID: userID}
	err := s.pool.QueryRow(ctx, `
		SELECT l.linked_at, `+verificationStatusSQL+`, v.verified_at, v.phone_last4
		FROM users u
		LEFT JOIN links l USING (tenant_id, user_id)
		LEFT JOIN phone_verifications v USING (tenant_id, user_id)
		WHERE u.tenant_id = $1 AND u.user_id = $2`, tenantID, userID).
		Scan(&u.LinkedAt, &u.PhoneVerification, &u.VerifiedAt, &u.PhoneLast4)
	return u, translate(err, "reading user")
}

// Erasure counts what EraseUser did.
type Erasure struct {
	Cancelled    int // notifications that were scheduled, queued or retrying
	BodiesErased int // notification bodies emptied (the cancelled ones included)
}

// EraseUser erases what Herald holds about a tenant's user, in one transaction: the phone verification
// (digest, last four digits, session), the link, every link token, the user record, and the bodies of the
// user's notifications; notifications still scheduled, queued or retrying are cancelled (the cancel
// transition, lifecycle.go). Delivery metadata stays. ErrNotFound when there was nothing to erase.
//
// The user's gate lock comes first (see lockGateSQL): it waits for the sends that already hold it to
// commit — their notifications are then visible to the cancel below — and makes every later send wait for
// this transaction, then find no verified phone (409 phone_unverified). A notification being delivered
// right now is not stopped (its worker has read the body already); its body is erased all the same.
func (s *Store) EraseUser(ctx context.Context, tenantID, userID string) (Erasure, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var e Erasure
	errNothing := errors.New("nothing to erase")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		e = Erasure{}
		if _, err := tx.Exec(ctx, eraseGateSQL, userGateBucket(tenantID, userID)); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM phone_verifications WHERE tenant_id = $1 AND user_id = $2`,
			`DELETE FROM links WHERE tenant_id = $1 AND user_id = $2`,
			`DELETE FROM link_tokens WHERE tenant_id = $1 AND user_id = $2`,
		} {
			if _, err := tx.Exec(ctx, q, tenantID, userID); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM users WHERE tenant_id = $1 AND user_id = $2`, tenantID, userID)
		if err != nil {
			return err
		}
		existed := tag.RowsAffected() == 1
		const theirs = `tenant_id = $1 AND user_id = $2 AND kind = 'tenant'`
		// Each notification cancelled reports notification.cancelled, in this transaction.
		if err := tx.QueryRow(ctx, `WITH changed AS (`+cancelUpdate(theirs)+` RETURNING `+notificationEventColumns+`),
			`+notificationEvents("changed")+`
			SELECT count(*) FROM changed`, tenantID, userID).Scan(&e.Cancelled); err != nil {
			return err
		}
		if tag, err = tx.Exec(ctx, `UPDATE notifications SET body = '' WHERE `+theirs+` AND body <> ''`, tenantID, userID); err != nil {
			return err
		}
		e.BodiesErased = int(tag.RowsAffected())
		if !existed && e.Cancelled == 0 && e.BodiesErased == 0 {
			return errNothing
		}
		return nil
	})
	if errors.Is(err, errNothing) {
		return e, translate(pgx.ErrNoRows, "erasing user")
	}
	return e, translate(err, "erasing user")
}
