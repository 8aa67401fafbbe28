package send

import (
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/internal/notification"
)

// The platform's error_code is whatever integer the other end (or anything posing as it) sends: copied into
// a label, it would grow /metrics without bound. Recorded outcomes stay within a closed set of series.
func TestDeliveryOutcomeLabelsStayBoundedWhateverCodesThePlatformSends(t *testing.T) {
	statuses := []notification.Status{notification.Delivered, notification.Retrying, notification.Failed, notification.Blocked, notification.Unlinked}
	for range 5000 {
		code := rand.IntN(1 << 30)
		if rand.IntN(2) == 0 {
			code = rand.IntN(1000)
		}
		recordOutcome(statuses[rand.IntN(len(statuses))], code)
	}
	ch := make(chan prometheus.Metric, 100000)
	outcomes.Collect(ch)
	close(ch)
	if n := len(ch); n > len(statuses)*40 {
		t.Errorf("5000 attempts with random error codes made %d series of herald_worker_deliveries_total, want a bounded set", n)
	}
}
