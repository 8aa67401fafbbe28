package delivery

import (
	"context"
	"time"

	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/metric"
	"github.com/heraldhq/herald/internal/metriclabel"
	"github.com/heraldhq/herald/internal/notification"
)

// The metrics of the worker's loops. The consumer's, the sender's and the rate lease's are theirs
// (consume/metrics.go, send/metrics.go, rate/metrics.go); all are herald_worker_*.
var (
	republished = metric.CounterVec("herald_worker_republished_total",
		"Envelopes produced again by the worker, by reason (retry_due, unpublished, redrive).", "reason")
	released = metric.Counter("herald_worker_scheduled_released_total",
		"Scheduled notifications released (queued and published) by the scheduler when their send_at came.")
	expired = metric.Counter("herald_worker_expired_total",
		"Notifications the expiry sweep moved to expired (their expires_at passed before an attempt started).")
	botBacklogAge = metric.GaugeVec("herald_worker_bot_backlog_age_seconds",
		"Per bot (\"shared\", or a tenant's bot's username, capped at 100 then \"other\"): how long ago the oldest message this worker holds for it (fetched and not finished) was published; 0 when it holds none.", "bot")
	botTokenRefused = metric.GaugeVec("herald_worker_bot_token_refused",
		"1 for a tenant's bot whose token the messaging platform refused (its notifications fail with 1102 until the tenant gives a new token), 0 for the others (bot: its username, capped at 100 then \"other\"; \"shared\" for the shared bot, always 0).", "bot")
	redriveFound = metric.CounterVec("herald_worker_redrive_found_total",
		"Notifications the redrive found stuck, by status: queued (queued for longer than the queued-redrive threshold while the group has consumed everything published half as long before: its envelope was lost) or delivering (its lease expired: the worker died).", "status")
)

func init() {
	// The series the alerts count exist from the start at 0 (an alert would miss a series born at 1).
	metric.StartAtZero(redriveFound, string(notification.Queued), string(notification.Delivering))
	botBacklogAge.WithLabelValues(metriclabel.SharedBot)
	botTokenRefused.WithLabelValues(metriclabel.SharedBot)
}

// botMetricsInterval is how often the per-bot gauges are set.
const botMetricsInterval = 5 * time.Second

// updateBotMetrics sets the per-bot gauges: each bot's backlog age here, and whether its token was
// refused (the registry's state of every tenant's bot: the HeraldBotTokenInvalid alert).
func (w *Worker) updateBotMetrics(ctx context.Context) {
	ages := map[string]float64{}
	for b, age := range w.group.BacklogAges() {
		l := w.botLabel(b)
		ages[l] = max(ages[l], age.Seconds())
	}
	w.metricsMu.Lock()
	defer w.metricsMu.Unlock()
	for l := range w.agesSet {
		if _, ok := ages[l]; !ok {
			botBacklogAge.WithLabelValues(l).Set(0)
		}
	}
	for l, age := range ages {
		botBacklogAge.WithLabelValues(l).Set(age)
	}
	w.agesSet = ages
	if w.opts.Bots == nil {
		return
	}
	refused := map[string]float64{}
	for _, b := range w.opts.Bots.Bots() {
		l := w.botLabel(b.ID)
		if b.State == botstate.TokenInvalid {
			refused[l] = 1
		} else if _, ok := refused[l]; !ok {
			refused[l] = 0
		}
	}
	for l, v := range refused {
		botTokenRefused.WithLabelValues(l).Set(v)
	}
}
