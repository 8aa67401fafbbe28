package send

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/delivery/consume"
	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
)

func count(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// pausedSender is a sender whose bot rate is 0 (its paces never lease any): a message that gets past the
// envelope check waits for a grant until its start context ends.
func pausedSender() *Sender {
	paces := rate.NewPaces(rate.PacesOptions{Pool: func(notification.BotID) string { return "" },
		Settings: func(notification.BotID) rate.Settings { return rate.Settings{} }, HighWeight: 9, PerChatInterval: time.Second,
	})
	return New(Options{Paces: paces, Concurrency: 1, Logger: slog.New(slog.DiscardHandler), Killed: func() bool { return false }})
}

// The consumer decodes each envelope once, at fetch; the sender takes that decoding and does not read the
// value again: a message the consumer found malformed is dropped (settled, counted bad_envelope) whatever
// its value holds, and one it decoded goes on to wait for its turn whatever its value holds.
func TestHandleTakesTheEnvelopeTheConsumerDecoded(t *testing.T) {
	valid := queue.Envelope{V: queue.EnvelopeVersion, TrackingID: "0190d6a4-1f1e-7c3a-9b1e-3f6f1f2a4b5c", TenantID: "acme"}
	bad := skipped.WithLabelValues("bad_envelope")

	before := count(bad)
	m := consume.Message{Message: kafka.Message{Value: valid.Marshal()}, Priority: rate.Normal, EnvelopeErr: errors.New("not an envelope")}
	start, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if settled := pausedSender().Handle(start, t.Context(), m, &consume.Lane{}); !settled {
		t.Error("a message the consumer found malformed was not settled")
	}
	if got := count(bad) - before; got != 1 {
		t.Errorf("bad_envelope counted %v times, want once", got)
	}

	before = count(bad)
	m = consume.Message{Message: kafka.Message{Value: []byte("not json")}, Priority: rate.Normal, Envelope: valid}
	start, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if settled := pausedSender().Handle(start, t.Context(), m, &consume.Lane{}); settled {
		t.Error("a decoded envelope was settled while the bot's rate granted nothing; want it to wait for its turn")
	}
	if got := count(bad) - before; got != 0 {
		t.Errorf("bad_envelope counted %v times for an envelope the consumer decoded, want 0", got)
	}
}
