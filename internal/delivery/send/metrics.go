package send

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/metriclabel"
	"github.com/heraldhq/herald/internal/notification"
)

// The sender's metrics (the worker's, by name: herald_worker_*).
var (
	outcomes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_deliveries_total",
		Help: "Delivery attempts by resulting status and last_error_code (0 = none; codes Herald does not know are counted as 4xx, 5xx or other).",
	}, []string{"status", "error_code"})
	platformLatency = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_worker_platform_latency_seconds",
		Help:    "Latency of sendMessage calls to the messaging platform, by outcome class.",
		Buckets: []float64{.01, .025, .05, .075, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"outcome"})
	batchSizes = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_worker_batch_size",
		Help:    "Notifications per statement of the batched claims and status writes (the lanes' of the same moment), by statement (claim, finish).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	}, []string{"statement"})
	limiterWait = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_worker_ratelimit_wait_seconds",
		Help:    "Time a delivery waited for the rate limiter, by limiter (global, chat; order: for a message ahead of it in its chat) and priority.",
		Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"limiter", "priority"})
	inFlight = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_in_flight",
		Help: "Fetched messages not yet finished, by priority.",
	}, []string{"priority"})
	skipped = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_skipped_total",
		Help: "Kafka messages dropped without a send, by reason (not_claimable, leased, not_found, bad_envelope, stale_result, quiet_hours: held until the window ends).",
	}, []string{"reason"})
	throttles = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_throttled_total",
		Help: "429 answers from the platform, by scope (chat, bot).",
	}, []string{"scope"})
	// Per bot: the bot label is "shared" for the shared bot, a tenant's bot's username (capped, see
	// internal/metriclabel).
	botSends = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_bot_sends_total",
		Help: "sendMessage and editMessageText calls per bot (\"shared\", or a tenant's bot's username, capped at 100 then \"other\"), by outcome (delivered, retry, blocked, unlinked, failed, token_refused: the platform refused the bot's token).",
	}, []string{"bot", "outcome"})
	// Per tenant (capped, see internal/metriclabel; "system" for a system message of no tenant).
	parseFailures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_entity_parse_failures_total",
		Help: "Sends the messaging platform refused as formatted (400 \"can't parse entities\" or keyboard, \"entities too long\", an entity or button URL refused: messenger.Unparsable), by tenant (capped at 100 names, then \"other\"; \"system\" for messages of no tenant). Herald validates every message at the door: anything but 0 means it and the platform disagree, and the notification failed.",
	}, []string{"tenant"})
	// Replace deliveries (spec v1-extensions §13).
	edits = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_edits_total",
		Help: "editMessageText calls of notifications with a replace_key, by outcome (edited; not_modified: the message showed it already, delivered; uneditable: the message was gone or could not be edited, a new message went instead; error: any other answer, handled as a send's).",
	}, []string{"outcome"})
	deletes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_message_deletes_total",
		Help: "deleteMessage calls on tenants' requests (DELETE /v1/notifications/{id}/message), by outcome (deleted; gone: the platform no longer had the message, counted as deleted; refused: it will not delete it, given up; retry: tried again later).",
	}, []string{"outcome"})
	botThrottles = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_bot_throttled_total",
		Help: "429 answers from the platform per bot (\"shared\", or a tenant's bot's username, capped at 100 then \"other\").",
	}, []string{"bot"})
)

// outcomeTokenRefused is the outcome of a send through a tenant's bot that the platform answered 401: the
// bot's token was refused.
const outcomeTokenRefused = "token_refused"

func init() {
	// The series the alerts count exist from the start at 0, so that increase() and rate() see a process's
	// first event: a series born at 1 has no earlier sample to increase from, and an alert would miss it.
	for _, scope := range []string{"chat", "bot"} {
		throttles.WithLabelValues(scope)
	}
	botThrottles.WithLabelValues(metriclabel.SharedBot)
	botSends.WithLabelValues(metriclabel.SharedBot, outcomeTokenRefused)
	parseFailures.WithLabelValues("system")
}

// tenantLabel is the tenant label of a per-tenant metric of the sender: the tenant's id (capped), or
// "system" for a message of no tenant.
func tenantLabel(tenantID string) string {
	if tenantID == "" {
		return "system"
	}
	return metriclabel.Tenants.Of(tenantID)
}

// recordOutcome counts a recorded attempt.
func recordOutcome(status notification.Status, code int) {
	outcomes.WithLabelValues(string(status), errorCodeLabel(code)).Inc()
}

// errorCodeLabel is the error_code label of an attempt. The platform's error_code is any integer the other
// end sends, so only the codes Herald knows are labels of their own; the rest are counted by class.
func errorCodeLabel(code int) string {
	switch code {
	case 0, 400, 401, 403, 404, 409, 413, 420, 429, 500, 502, 503, 504,
		messenger.CodeTimeout, messenger.CodeNetwork, messenger.CodeBadResponse, messenger.CodeCanceled, notification.CodeNoLink,
		notification.CodeBotTokenRefused, notification.CodeBotUnavailable:
		return strconv.Itoa(code)
	}
	switch {
	case code >= 400 && code < 500:
		return "4xx"
	case code >= 500 && code < 600:
		return "5xx"
	}
	return "other"
}
