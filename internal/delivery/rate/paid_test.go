package rate

import (
	"context"
	"testing"
	"time"
)

// A bot allowed paid broadcasts sends at its whole rate, and AdmitPaid marks paid only what does not fit
// in the free rate: at most that many unmarked requests leave in any second, and the free rate is used
// (a request that leaves late does not push the later free slots back).
func TestAdmitPaidMarksOnlyWhatTheFreeRateCannotTake(t *testing.T) {
	const rate, free, n = 200, 60, 400
	l := NewLimiter(rate, 9)
	l.SetFree(free)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	// Each admission's decision falls between the moments before and after the call: a pair is surely
	// inside one second when the later one's after and the earlier one's before are (timestamps taken
	// after the call alone moved with the scheduler, and counted 61 of 60 on a busy machine).
	type span struct{ before, after time.Time }
	var unpaid []span
	var first, last time.Time
	for i := range n {
		if err := l.Wait(ctx, Normal, "t"); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		paid, err := l.AdmitPaid(ctx)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if i == 0 {
			first = now
		}
		last = now
		if !paid {
			unpaid = append(unpaid, span{before, now})
		}
	}
	for i, at := range unpaid {
		in := 0
		for j := i; j >= 0 && at.after.Sub(unpaid[j].before) < time.Second; j-- {
			in++
		}
		if in > free {
			t.Fatalf("%d requests left unmarked within one second; the free rate is %d", in, free)
		}
	}
	if span := last.Sub(first).Seconds(); float64(len(unpaid)) < free*(span-0.5) {
		t.Errorf("%d of %d requests over %.2f s left unmarked; want the free %d a second used", len(unpaid), n, span, free)
	}

	l.SetFree(NoPaidBroadcast)
	if paid, err := l.AdmitPaid(ctx); err != nil || paid {
		t.Errorf("a bot without paid broadcast: paid %v (%v), want never", paid, err)
	}
	l.SetFree(0)
	if paid, err := l.AdmitPaid(ctx); err != nil || !paid {
		t.Errorf("a worker with no part of the free rate: paid %v (%v), want always", paid, err)
	}
}
