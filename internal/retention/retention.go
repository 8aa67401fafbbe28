// Package retention is the purge job: it removes what Herald no longer needs (bodies, notifications, expired
// link tokens and verification sessions, idempotency keys, processed update ids, finished callback events)
// when its retention is over.
// The rules — what, after how long — are internal/store/retention.go; this package runs them.
//
// Every worker (and herald dev) runs a Purger; one runs at a time across all of them, under a PostgreSQL
// advisory lock, and the others skip their turn. A run purges every kind in batches of BatchSize rows, each
// batch a statement of its own, so no lock is held for long and the hot path never waits on a purge (rows
// it holds are skipped and purged next time). A run does at most MaxBatches per kind, so the lock changes
// hands now and then; when more is left, the next run follows at once, and herald_retention_overdue_seconds
// shows the backlog.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/heraldhq/herald/internal/metric"
	"github.com/heraldhq/herald/internal/store"
)

var (
	purged = metric.CounterVec("herald_retention_purged_total",
		"Rows purged by the retention job, by kind (bodies are erased, the rest deleted or, for verification sessions, closed).", "kind")
	runs = metric.CounterVec("herald_retention_runs_total",
		"Retention runs by result: ok, error, skipped (another worker held the lock).", "result")
	lastSuccess = metric.Gauge("herald_retention_last_success_timestamp_seconds",
		"When this process last completed a retention run (0: never). Alert on the max over workers growing old.")
	overdue = metric.GaugeVec("herald_retention_overdue_seconds",
		"After this process's last run: how long ago the oldest row still due became due, by kind (0: caught up). Above the run interval, the purge is behind.", "kind")
)

// Defaults of Options.
const (
	DefaultInterval   = 5 * time.Minute
	DefaultBatchSize  = 1000
	DefaultMaxBatches = 100
	DefaultPause      = 20 * time.Millisecond
)

// Options configure a Purger. Zero values take the defaults.
type Options struct {
	Store  *store.Store
	Policy store.RetentionPolicy
	Logger *slog.Logger
	// Interval between two runs; the first run starts at once.
	Interval time.Duration
	// BatchSize is the most rows one statement purges.
	BatchSize int
	// MaxBatches bounds one run's work per kind.
	MaxBatches int
	// Pause between two batches, leaving room to the hot path.
	Pause time.Duration
}

// Purger runs the purge.
type Purger struct {
	o Options
}

// New returns a Purger.
func New(o Options) *Purger {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.MaxBatches <= 0 {
		o.MaxBatches = DefaultMaxBatches
	}
	if o.Pause < 0 {
		o.Pause = 0
	} else if o.Pause == 0 {
		o.Pause = DefaultPause
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Purger{o: o}
}

// Report is what one run did.
type Report struct {
	// Ran is false when another process held the lock: this one did nothing.
	Ran bool
	// Purged counts rows by kind.
	Purged map[store.PurgeKind]int64
	// Overdue is, per kind, how long ago the oldest row still due became due (0: caught up).
	Overdue map[store.PurgeKind]time.Duration
	// Behind: some kind used the whole budget of the run (MaxBatches full batches), so more may be due.
	Behind bool
}

// Run purges at once and then every Interval until ctx ends; a run that spent its budget with more left
// to purge is followed by the next one at once (after a second), so the purge keeps up with any rate. A
// failed run is logged and retried at the next interval; Run itself returns nil when ctx ends.
func (p *Purger) Run(ctx context.Context) error {
	for {
		rep, err := p.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.o.Logger.Warn("retention run failed; the next run continues", "err", err)
		}
		wait := p.o.Interval
		if err == nil && rep.Behind {
			wait = min(time.Second, p.o.Interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// RunOnce runs the purge once, if no other process is running it.
func (p *Purger) RunOnce(ctx context.Context) (Report, error) {
	rep := Report{Purged: map[store.PurgeKind]int64{}, Overdue: map[store.PurgeKind]time.Duration{}}
	unlock, ok, err := p.o.Store.TryRetentionLock(ctx)
	if err != nil {
		runs.WithLabelValues("error").Inc()
		return rep, err
	}
	if !ok {
		runs.WithLabelValues("skipped").Inc()
		return rep, nil
	}
	defer unlock()
	rep.Ran = true
	start := time.Now()
	for _, kind := range store.PurgeKinds {
		n, err := p.purge(ctx, kind)
		rep.Purged[kind] = n
		rep.Behind = rep.Behind || n >= int64(p.o.MaxBatches*p.o.BatchSize)
		if err != nil {
			runs.WithLabelValues("error").Inc()
			return rep, fmt.Errorf("while purging %s: %w", kind, err)
		}
		d, err := p.o.Store.Overdue(ctx, kind, p.o.Policy)
		if err != nil {
			runs.WithLabelValues("error").Inc()
			return rep, err
		}
		rep.Overdue[kind] = d
		overdue.WithLabelValues(string(kind)).Set(d.Seconds())
	}
	runs.WithLabelValues("ok").Inc()
	lastSuccess.SetToCurrentTime()
	var total int64
	for _, n := range rep.Purged {
		total += n
	}
	if total > 0 {
		attrs := []any{"duration", time.Since(start).Round(time.Millisecond)}
		for _, kind := range store.PurgeKinds {
			attrs = append(attrs, string(kind), rep.Purged[kind])
		}
		p.o.Logger.Info("retention run purged", attrs...)
	}
	return rep, nil
}

// purge runs one kind's batches until one comes back short or the run's budget is spent.
func (p *Purger) purge(ctx context.Context, kind store.PurgeKind) (int64, error) {
	var total int64
	for range p.o.MaxBatches {
		n, err := p.o.Store.Purge(ctx, kind, p.o.Policy, p.o.BatchSize)
		total += n
		purged.WithLabelValues(string(kind)).Add(float64(n))
		if err != nil || n < int64(p.o.BatchSize) {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(p.o.Pause):
		}
	}
	return total, nil
}
