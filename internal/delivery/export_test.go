package delivery

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/heraldhq/herald/internal/notification"
)

// Kill stops the worker as a crash would: in-flight sends are cut off, nothing more is written to
// PostgreSQL, no offset is committed; the readers still close, as the broker would notice a dead client.
func (w *Worker) Kill() {
	w.killed.Store(true)
	w.kill()
}

// ClientID names the worker's members in the consumer group.
func (w *Worker) ClientID() string { return w.clientID }

// Rate is the worker's current share of the shared bot's global rate.
func (w *Worker) Rate() float64 { return w.paces.Rate(notification.SharedBot) }

// Held is how many fetched messages the worker holds past their bots' shares of its buffer.
func (w *Worker) Held() int { return w.group.Held() }

// Lanes is how many of a bot's keys have messages in the worker's lanes.
func (w *Worker) Lanes(b notification.BotID) int { return w.group.Lanes(b) }

// BotRate is the worker's current share of a bot's global rate.
func (w *Worker) BotRate(b notification.BotID) float64 { return w.paces.Rate(b) }

// GenerationsEnded is how many consumer group generations the process's readers saw end
// (herald_worker_generations_total{event="ended"}, the consumer's).
func GenerationsEnded() float64 {
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if f.GetName() != "herald_worker_generations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "event" && l.GetValue() == "ended" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// RedriveFound is herald_worker_redrive_found_total{status}.
func RedriveFound(status string) float64 {
	return counter(redriveFound.WithLabelValues(status))
}

func counter(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// CaughtUpTo reports whether the group has consumed every message produced before t.
func (w *Worker) CaughtUpTo(ctx context.Context, t time.Time) (bool, error) {
	return w.group.CaughtUpTo(ctx, t)
}

// Partitions are the partitions of topic this worker held at the last reading of the group.
func (w *Worker) Partitions(topic string) map[int]bool {
	return w.group.Partitions(topic)
}
