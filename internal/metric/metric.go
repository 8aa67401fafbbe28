// Package metric declares Herald's Prometheus metrics, each by its name, its help and its labels: what a
// reader of /metrics sees, and nothing of the options' plumbing. The package-level constructors register
// with the default registry, the one every herald process serves at /metrics; With serves another (the
// operator's, controller-runtime's).
package metric

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Factory makes metrics registered with one registry.
type Factory struct{ f promauto.Factory }

// With returns the factory of metrics registered with reg.
func With(reg prometheus.Registerer) Factory { return Factory{promauto.With(reg)} }

var std = With(prometheus.DefaultRegisterer)

// Counter is a counter without labels.
func (m Factory) Counter(name, help string) prometheus.Counter {
	return m.f.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec is a counter with labels.
func (m Factory) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return m.f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge is a gauge without labels.
func (m Factory) Gauge(name, help string) prometheus.Gauge {
	return m.f.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// GaugeVec is a gauge with labels.
func (m Factory) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return m.f.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// HistogramVec is a histogram with buckets and labels.
func (m Factory) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return m.f.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// Counter is Factory.Counter of the default registry.
func Counter(name, help string) prometheus.Counter { return std.Counter(name, help) }

// CounterVec is Factory.CounterVec of the default registry.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return std.CounterVec(name, help, labels...)
}

// Gauge is Factory.Gauge of the default registry.
func Gauge(name, help string) prometheus.Gauge { return std.Gauge(name, help) }

// GaugeVec is Factory.GaugeVec of the default registry.
func GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return std.GaugeVec(name, help, labels...)
}

// HistogramVec is Factory.HistogramVec of the default registry.
func HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return std.HistogramVec(name, help, buckets, labels...)
}

// StartAtZero makes the series of each value of a one-label vector exist from the start, at 0, so that
// increase() and rate() see a process's first event and the dashboards and alerts find the series before
// anything happened: a series born at 1 has no earlier sample to increase from.
func StartAtZero(vec *prometheus.CounterVec, values ...string) {
	for _, v := range values {
		vec.WithLabelValues(v)
	}
}
