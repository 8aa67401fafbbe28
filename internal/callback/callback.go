// Package callback is the sender of status callbacks behind `herald callbacks` (docs/callbacks.md): it
// fans the events recorded with each change out to the endpoints, claims due events from the outbox in
// PostgreSQL (internal/store: callback_inbox, callback_events), signs them the Standard Webhooks way
// (internal/signing), POSTs them to the tenants' endpoints through a guard against requests to internal
// addresses (internal/egress), and records each result: delivered, retried with backoff (backoff.go), or
// dropped after 24 hours. Several senders share the outbox; a sender that dies mid-send
// loses nothing (its leases run out and the events are due again).
package callback

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald/internal/callbackstate"
	"github.com/heraldhq/herald/internal/egress"
	"github.com/heraldhq/herald/internal/metriclabel"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
)

// DefaultBackoff is the retry schedule of an endpoint's failed attempts: 5 s, 10 s, 20 s, … 42 m 40 s, then
// every hour: about 1 h 25 m over the first eleven failures, then hourly until the event is older than
// Options.RetryFor (24 h) and is dropped at its next failure — some 34 attempts in all.
var DefaultBackoff = notification.Backoff{Base: 5 * time.Second, Max: time.Hour, Jitter: 0.2}

// Options configure a Sender. Zero values take the defaults given in each comment.
type Options struct {
	Store  *store.Store  // required
	Key    *signing.Key  // required: opens the endpoints' secrets
	Policy egress.Policy // where callbacks may go
	Logger *slog.Logger  // slog.Default()

	Concurrency         int                  // attempts in flight in this sender; 256
	EndpointConcurrency int                  // attempts in flight per endpoint, across senders; 8
	Timeout             time.Duration        // one attempt, connection included; 10 s (the contract)
	Lease               time.Duration        // how long a claimed event may stay in flight before it is due again; Timeout + 20 s
	Backoff             notification.Backoff // DefaultBackoff
	RetryFor            time.Duration        // how long an event is retried before it is dropped; 24 h
	PollInterval        time.Duration        // how often every endpoint is looked at for due events; 500 ms
	ClaimInterval       time.Duration        // the least time between two claims of the endpoints whose attempts ended; 10 ms
	StatsInterval       time.Duration        // how often the outbox gauges are refreshed; 15 s
	GracePeriod         time.Duration        // shutdown: how long attempts in flight may finish; 15 s
	ResponseLimit       int64                // bytes of a response body read (then discarded); 1 KiB

	// LookupIP replaces the system resolver (tests: a name that resolves to a forbidden address).
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// RootCAs replaces the system's trusted roots (tests: a receiver's self-signed certificate).
	RootCAs *x509.CertPool
}

func (o *Options) defaults() error {
	if o.Store == nil || o.Key == nil {
		return errors.New("callback: Store and Key are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 256
	}
	if o.EndpointConcurrency <= 0 {
		o.EndpointConcurrency = 8
	}
	def(&o.Timeout, 10*time.Second)
	def(&o.Lease, o.Timeout+20*time.Second)
	if o.Lease <= o.Timeout {
		return fmt.Errorf("callback: the lease (%s) must be longer than the timeout (%s)", o.Lease, o.Timeout)
	}
	if o.Backoff.Base <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.Backoff.Max < o.Backoff.Base {
		o.Backoff.Max = o.Backoff.Base
	}
	def(&o.RetryFor, 24*time.Hour)
	def(&o.PollInterval, 500*time.Millisecond)
	def(&o.ClaimInterval, 10*time.Millisecond)
	def(&o.StatsInterval, 15*time.Second)
	def(&o.GracePeriod, 15*time.Second)
	if o.ResponseLimit <= 0 {
		o.ResponseLimit = 1 << 10
	}
	return nil
}

// Sender delivers callbacks. Build it with New and call Run once.
type Sender struct {
	opts   Options
	log    *slog.Logger
	client *http.Client

	inflight atomic.Int64
	wake     chan struct{}
	hotMu    sync.Mutex
	hot      map[string]bool // endpoints whose attempts ended since the last claim

	// killed and killCtx are the test hook for a crash (export_test.go): stop at once, write nothing more.
	killed  atomic.Bool
	killCtx context.Context
	kill    context.CancelFunc
}

// New checks the options and builds a sender.
func New(opts Options) (*Sender, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	s := &Sender{opts: opts, log: opts.Logger, wake: make(chan struct{}, 1), hot: map[string]bool{}}
	s.client = NewClient(&egress.Dialer{Policy: opts.Policy, LookupIP: opts.LookupIP}, opts.Timeout, opts.RootCAs, opts.EndpointConcurrency)
	s.killCtx, s.kill = context.WithCancel(context.Background())
	return s, nil
}

// MaxResponseHeaderBytes bounds the headers of an endpoint's answer (HTTP/2: the header list size Herald
// advertises). Go's default is 10 MiB, which a hostile endpoint can answer in full to each of the sender's
// attempts at once: HERALD_CALLBACK_ENDPOINT_CONCURRENCY (8) per endpoint, 5 endpoints per tenant, hundreds
// of megabytes. Herald reads only the status; a reverse proxy such as nginx forwards at most 4 or 8 KiB of
// headers by default, so 16 KiB refuses no real receiver and bounds what the sender's 256 attempts can make
// it hold at 4 MiB. An answer with more is a failed attempt, retried like any other.
const MaxResponseHeaderBytes = 16 << 10

// NewClient is the HTTP client of callbacks: every connection through d, never a proxy from the
// environment (it would connect in d's place), no redirect followed (a 3xx is a failed attempt), at most
// MaxResponseHeaderBytes of an answer's headers, timeout for a whole attempt. rootCAs nil means the
// system's roots.
func NewClient(d *egress.Dialer, timeout time.Duration, rootCAs *x509.CertPool, perHost int) *http.Client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		MaxIdleConns:           1000,
		MaxIdleConnsPerHost:    perHost,
		IdleConnTimeout:        90 * time.Second,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Run sends until ctx ends, then stops claiming, lets attempts in flight finish for up to GracePeriod,
// and gives the rest back (due at once, the attempt not counted).
func (s *Sender) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(s.killCtx, stop)()
	// Attempts outlive ctx by the grace period; abort ends them.
	workCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	defer context.AfterFunc(s.killCtx, abort)()

	var wg sync.WaitGroup
	wg.Go(func() { s.housekeeping(ctx) })
	s.log.Info("callback sender started", "concurrency", s.opts.Concurrency, "endpoint_concurrency", s.opts.EndpointConcurrency,
		"allow_insecure", s.opts.Policy.AllowInsecure, "allow_private", s.opts.Policy.AllowPrivate)

	// Each round first fans the inbox out to the endpoints (DispatchCallbackEvents), then claims. Two kinds
	// of claim: a full claim looks at every endpoint (the store scans them all, two index probes each); it
	// runs at least every PollInterval. Between them, an attempt that ends makes its endpoint "hot", and so
	// does a dispatch that gave it events: the next claim looks at the hot endpoints only, at most every
	// ClaimInterval. So a busy sender costs PostgreSQL little however many endpoints there are, and a new
	// event waits at most PollInterval.
	var attemptsWG sync.WaitGroup
	var lastClaim, lastFull time.Time
	for ctx.Err() == nil {
		free := s.opts.Concurrency - int(s.inflight.Load())
		asked, got := 0, 0
		if free > 0 {
			s.dispatch(ctx)
			var only []string
			full := time.Since(lastFull) >= s.opts.PollInterval
			if full {
				lastFull = time.Now()
				s.takeHot()
			} else {
				only = s.takeHot()
			}
			if full || len(only) > 0 {
				lastClaim = time.Now()
				asked = min(free, 500)
				evs, err := s.claim(ctx, asked, only)
				if err != nil && ctx.Err() == nil {
					s.log.Warn("could not claim callback events", "err", err)
				}
				got = len(evs)
				for _, ev := range evs {
					s.inflight.Add(1)
					inFlight.Inc()
					attemptsWG.Go(func() {
						defer func() {
							s.inflight.Add(-1)
							inFlight.Dec()
							s.markHot(ev.EndpointID)
						}()
						s.attempt(workCtx, ev)
					})
				}
			}
		}
		if got > 0 && got == asked {
			continue // there may be more due
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
			// Let a few more attempts end before claiming again.
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(lastClaim.Add(s.opts.ClaimInterval))):
			}
		case <-time.After(time.Until(lastFull.Add(s.opts.PollInterval))):
		}
	}

	done := make(chan struct{})
	go func() { attemptsWG.Wait(); close(done) }()
	if s.inflight.Load() > 0 && !s.killed.Load() {
		s.log.Info("callback sender stopping: letting attempts in flight finish", "in_flight", s.inflight.Load(), "grace_period", s.opts.GracePeriod)
	}
	select {
	case <-done:
	case <-time.After(s.opts.GracePeriod):
		s.log.Warn("grace period over: giving the attempts in flight back")
		abort()
		<-done
	}
	wg.Wait()
	s.log.Info("callback sender stopped")
	return nil
}

// dispatch fans the inbox out to the endpoints, a batch at a time while batches come full, and marks the
// endpoints that received events hot.
func (s *Sender) dispatch(ctx context.Context) {
	for range 10 {
		n, endpoints, err := s.opts.Store.DispatchCallbackEvents(ctx, dispatchBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("could not dispatch callback events", "err", err)
			}
			return
		}
		s.hotMu.Lock()
		for _, id := range endpoints {
			s.hot[id] = true
		}
		s.hotMu.Unlock()
		if n < dispatchBatch {
			return
		}
	}
}

// dispatchBatch is how many inbox events one statement fans out.
const dispatchBatch = 1000

// markHot notes that an attempt at endpoint ended, and wakes the claim loop.
func (s *Sender) markHot(endpoint string) {
	s.hotMu.Lock()
	s.hot[endpoint] = true
	s.hotMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// takeHot returns the hot endpoints and forgets them.
func (s *Sender) takeHot() []string {
	s.hotMu.Lock()
	defer s.hotMu.Unlock()
	out := make([]string, 0, len(s.hot))
	for id := range s.hot {
		out = append(out, id)
	}
	clear(s.hot)
	return out
}

// claim leases up to n due events (of the endpoints only, or of all when only is nil) and renders the
// payloads of first attempts.
func (s *Sender) claim(ctx context.Context, n int, only []string) ([]store.CallbackEvent, error) {
	evs, err := s.opts.Store.ClaimCallbackEvents(ctx, n, s.opts.EndpointConcurrency, s.opts.Lease, only)
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	if err := s.render(ctx, evs); err != nil {
		// The events stay leased and come back when their lease runs out; nothing was sent.
		return nil, fmt.Errorf("while rendering callback payloads: %w", err)
	}
	return evs, nil
}

// attempt sends one event to its endpoint and records the result.
func (s *Sender) attempt(ctx context.Context, ev store.CallbackEvent) {
	log := s.log.With("event_id", ev.EventID, "endpoint_id", ev.EndpointID, "type", ev.Type, "attempt", ev.Attempts)
	if ev.Payload == nil {
		// Its notification is gone (a retention purge): there is nothing to send.
		s.record(log, ev, store.CallbackResult{Drop: true, Error: "the notification no longer exists"}, "")
		dropped.WithLabelValues("gone").Inc()
		return
	}
	start := time.Now()
	status, err := s.post(ctx, ev)
	outcome := classify(status, err)
	elapsed := time.Since(start)
	if outcome == "canceled" {
		attempts.WithLabelValues(outcome).Inc()
		s.record(log, ev, store.CallbackResult{Release: true}, outcome)
		return
	}
	attempts.WithLabelValues(outcome).Inc()
	attemptDuration.WithLabelValues(outcome).Observe(elapsed.Seconds())
	if outcome == "delivered" {
		s.record(log, ev, store.CallbackResult{Delivered: true, Status: status}, outcome)
		return
	}
	msg := fmt.Sprintf("HTTP %d", status)
	switch {
	case outcome == "timeout":
		msg = fmt.Sprintf("timeout: no answer within %s", s.opts.Timeout)
	case err != nil:
		msg = truncate(storableText(err.Error()), 200)
	}
	log.Info("callback attempt failed", "outcome", outcome, "error", msg, "duration", elapsed)
	s.record(log, ev, store.CallbackResult{
		Status: status, Error: msg, Payload: ev.Payload,
		RetryIn: s.opts.Backoff.Delay(ev.Attempts), RetryFor: s.opts.RetryFor,
	}, outcome)
}

// post sends the event's request and returns the answer's status (0 when there was none).
func (s *Sender) post(ctx context.Context, ev store.CallbackEvent) (int, error) {
	if _, err := s.opts.Policy.CheckURL(ev.URL); err != nil {
		return 0, &BlockedURLError{err}
	}
	var secrets []signing.Secret
	for _, sealed := range ev.Secrets {
		sec, err := s.opts.Key.Open(sealed, ev.EndpointID)
		if err != nil {
			s.log.Error("a callback secret does not open: is HERALD_CALLBACK_SECRET_KEY the one it was sealed with?",
				"endpoint_id", ev.EndpointID, "err", err)
			continue
		}
		secrets = append(secrets, sec)
	}
	if len(secrets) == 0 {
		return 0, errors.New("no secret of the endpoint could be opened")
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ev.URL, bytes.NewReader(ev.Payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Herald-Callbacks/1")
	signing.Sign(webhookID(ev.EventID), time.Now(), ev.Payload, secrets...).Set(req.Header)
	res, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	// Read a little (so the connection can be reused), never the whole body, and keep none of it.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, s.opts.ResponseLimit))
	_ = res.Body.Close()
	return res.StatusCode, nil
}

// BlockedURLError is an endpoint URL the policy no longer allows (the configuration changed since it was
// created).
type BlockedURLError struct{ err error }

func (e *BlockedURLError) Error() string { return e.err.Error() }

// classify names the outcome of an attempt for the metrics.
func classify(status int, err error) string {
	var blocked *egress.BlockedError
	var blockedURL *BlockedURLError
	var netErr net.Error
	switch {
	case err == nil && status >= 200 && status < 300:
		return "delivered"
	case err == nil:
		return "rejected"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &blocked), errors.As(err, &blockedURL):
		return "blocked"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	default:
		return "network"
	}
}

// record writes a result, trying a few times: a result that cannot be written leaves the event leased,
// and it is due again when the lease runs out (sent again under the same webhook-id).
func (s *Sender) record(log *slog.Logger, ev store.CallbackEvent, r store.CallbackResult, outcome string) {
	if s.killed.Load() {
		return // a dead sender writes nothing
	}
	var err error
	for try := range 3 {
		if try > 0 {
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var state callbackstate.State
		state, err = s.opts.Store.FinishCallbackEvent(ctx, ev, r)
		cancel()
		if err != nil {
			continue
		}
		switch {
		case state == "":
			log.Warn("callback result not recorded: the endpoint was deleted, or the event's lease ran out and another attempt took it")
		case state == callbackstate.Dropped && !r.Drop:
			dropped.WithLabelValues("expired").Inc()
			log.Warn("callback event dropped: still failing after the retry window", "retry_for", s.opts.RetryFor, "outcome", outcome)
		case state == callbackstate.Delivered:
			log.Debug("callback delivered")
		}
		return
	}
	log.Error("could not record a callback result; the event is due again when its lease runs out", "err", err)
}

// refreshStats sets the outbox gauges from PostgreSQL.
func (s *Sender) refreshStats(ctx context.Context) {
	st, err := s.opts.Store.CallbackStats(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("could not read the callback outbox", "err", err)
		}
		return
	}
	queueDepth.WithLabelValues("due").Set(float64(st.Due))
	queueDepth.WithLabelValues("in_flight").Set(float64(st.InFlight))
	queueDepth.WithLabelValues("retrying").Set(float64(max(0, st.Pending-st.Due-st.InFlight)))
	oldestDue.Set(st.OldestDue.Seconds())
	// Reset: a tenant whose endpoints recovered, or went, has no series.
	endpointFailures.Reset()
	byLabel := map[string]int{}
	for tenant, n := range st.Failing {
		name := metriclabel.Tenants.Of(tenant)
		byLabel[name] = max(byLabel[name], n)
	}
	for name, n := range byLabel {
		endpointFailures.WithLabelValues(name).Set(float64(n))
	}
}

// reseal completes a rotation of HERALD_CALLBACK_SECRET_KEY: each endpoint secret sealed under another key
// of the list than the first is sealed again under the first, a batch each run, so that the other keys can
// be removed (herald_callback_secrets_old_key at 0 says when). A secret no key of the list opens stays as
// it is, and counted.
func (s *Sender) reseal(ctx context.Context) {
	stale, total, err := s.opts.Store.CallbackSecretsSealedOtherwise(ctx, s.opts.Key.CurrentPrefix(), resealBatch)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("could not read the callback secrets to seal again", "err", err)
		}
		return
	}
	resealed := 0
	for _, sec := range stale {
		secret, err := s.opts.Key.Open(sec.Sealed, sec.EndpointID)
		if err != nil {
			continue // the sender logs it at each attempt of the endpoint
		}
		ok, err := s.opts.Store.ResealCallbackSecret(ctx, sec.ID, sec.Sealed, s.opts.Key.Seal(secret, sec.EndpointID))
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("could not seal a callback secret again", "endpoint_id", sec.EndpointID, "err", err)
			}
			break
		}
		if ok {
			resealed++
		}
	}
	left := total - int64(resealed)
	secretsOldKey.Set(float64(left))
	if resealed > 0 {
		s.log.Info("sealed callback secrets again under the first key of HERALD_CALLBACK_SECRET_KEY",
			"resealed", resealed, "left", left)
		if left == 0 {
			s.log.Info("every callback secret is sealed under the first key of HERALD_CALLBACK_SECRET_KEY: the others can be removed")
		}
	}
}

// resealBatch is how many secrets one run of reseal looks at.
const resealBatch = 100

// housekeeping refreshes the outbox gauges and seals secrets under the first key again, at once and then
// every StatsInterval until ctx ends.
func (s *Sender) housekeeping(ctx context.Context) {
	t := time.NewTicker(s.opts.StatsInterval)
	defer t.Stop()
	for {
		s.refreshStats(ctx)
		s.reseal(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// storableText is s without control characters and invalid UTF-8: an error can quote what the receiver
// sent (a certificate's names may hold a NUL), and PostgreSQL's text holds neither a NUL nor invalid UTF-8 —
// a result it refused would leave the event leased, sent again every lease and never recorded.
func storableText(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
}

// truncate keeps at most n bytes of s, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
