package phone

// The lifecycle of a user's phone verification (spec §7), as data below the store:
//
//	unverified, pending, verified ──start──▶ pending        the tenant starts a session (VerificationTTL)
//	pending (within the session) ──verify──▶ verified       the user shared their own contact
//	pending (session over)        reads as unverified       (retention writes it so, later)
//	pending, verified ──reset──▶ unverified                  a relink, a change of bot, an erasure of the link
//
// The CHECK constraint on phone_verifications.status holds the same list (TestStatesMatchTheSchema in
// internal/store).

import "time"

// Status is a user's phone verification status.
type Status string

// The statuses.
const (
	Unverified Status = "unverified" // never verified, or reset, or a session that ran out
	Pending    Status = "pending"    // a session waits for the user's contact
	Verified   Status = "verified"   // the user shared their own number
)

// Statuses lists every status.
var Statuses = []Status{Unverified, Pending, Verified}

// SQL is s as a SQL literal.
func (s Status) SQL() string { return "'" + string(s) + "'" }

// Seen is the status a tenant sees of a stored status whose session runs out at expires (nil: none): a
// pending session past its end reads unverified.
func Seen(stored Status, expires *time.Time, now time.Time) Status {
	if stored == Pending && expires != nil && !expires.After(now) {
		return Unverified
	}
	if stored == "" {
		return Unverified
	}
	return stored
}

// SeenSQL is Seen in SQL, over the status and session_expires_at of the phone_verifications row v (NULL:
// none).
func SeenSQL(v string) string {
	return `CASE WHEN ` + v + `.status = ` + Pending.SQL() + ` AND ` + v + `.session_expires_at <= now() THEN ` + Unverified.SQL() + `
		            ELSE COALESCE(` + v + `.status, ` + Unverified.SQL() + `) END`
}
