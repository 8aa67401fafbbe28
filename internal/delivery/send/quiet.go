package send

// Quiet hours at the claim (spec v1-extensions §14): the second of the two decisions (the ingress makes
// the first at acceptance). A notification whose turn comes inside its tenant's window — a send_at or a
// retry that fell into it, a backlog, a user whose time_zone changed, hours set after its acceptance — is
// held (mode hold: back to scheduled until the window ends, nothing sent, the attempt not counted) or
// sent without a sound (mode silent). The claim read the tenant's hours and the user's zone
// (Delivery.Quiet, UserZone) in its one statement, so the decision costs no query.

import (
	"context"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/quiet"
)

// quietDecision is what the quiet hours make of a claimed notification at now: hold it until the time
// given, send it silently, or neither.
func quietDecision(d notification.Delivery, now time.Time) (holdUntil time.Time, hold, silent bool) {
	if d.Quiet == nil {
		return time.Time{}, false, false
	}
	until, inside := d.Quiet.Until(now, d.Quiet.Location(d.UserZone))
	if !inside {
		return time.Time{}, false, false
	}
	if d.Quiet.Mode == quiet.Silent {
		return time.Time{}, false, true
	}
	return until, true, false
}

// hold writes notification.Hold: the claimed notification waits in scheduled until the window ends,
// when the scheduler releases it and a worker claims it again. A write that fails leaves the claim to its
// lease: the redrive publishes it again, and the next claim decides again.
func (s *Sender) hold(d notification.Delivery, until time.Time) bool {
	if s.opts.Killed() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok, err := s.opts.Store.HoldDelivery(ctx, d, until)
	switch {
	case err != nil:
		s.log.Error("could not hold a notification for quiet hours; the lease will expire and redrive it", "tracking_id", d.TrackingID, "err", err)
	case !ok:
		skipped.WithLabelValues("stale_result").Inc()
	default:
		skipped.WithLabelValues("quiet_hours").Inc()
		s.log.Debug("held for quiet hours", "tracking_id", d.TrackingID, "until", until)
	}
	return true
}
