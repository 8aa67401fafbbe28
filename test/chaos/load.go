package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ClientTimeout is the load generator's timeout for one POST /v1/send. The ingress bounds a send by its
// query timeout (5 s) plus its produce budget (2 s); an answer later than this is a hang.
const ClientTimeout = 10 * time.Second

// Attempt is one POST /v1/send as the client saw it.
type Attempt struct {
	User   int    // index in Env.Users
	Seq    int    // per user, in sending order; with one request in flight per user, also the 202 order
	Token  string // unique, the whole message text
	Target string // the ingress address it went to
	Sent   time.Time
	Done   time.Time // answer read, or the transport error

	Status     int    // 0: no HTTP answer
	Code       string // the error code of an error body
	TrackingID string
	Err        string // transport error
	// NotServed marks a transport error that proves no handler saw the request: the connection was
	// refused, or the server closed it as idle as the request went out. A load balancer retries these.
	NotServed bool
	TimedOut  bool // the client gave up after ClientTimeout: a hang
	// ErrKind names a transport error for the report: refused, not-sent, closed-idle, timeout,
	// eof-on-reused (the request was written on a kept-alive connection and the server closed it without
	// an answer: what an HTTP server that closes idle connections at shutdown does to a request in its
	// socket buffer), or broken (anything else after the request was written).
	ErrKind string
}

// Accepted reports a 202.
func (a Attempt) Accepted() bool { return a.Status == http.StatusAccepted }

// Latency is the time from sending to the answer.
func (a Attempt) Latency() time.Duration { return a.Done.Sub(a.Sent) }

// Load is a steady send load: every user sends PerUser messages per second, one request in flight per user
// at a time, so that the order of one user's 202s is the order of their messages. Requests go round-robin
// over the ingresses, skipping one that refused a connection in the last second or failed its last
// readiness poll, as a load balancer would.
type Load struct {
	e       *Env
	perUser float64
	client  *http.Client

	stop     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	attempts []Attempt
	down     map[string]time.Time // target → refused until
	burst    []int                // per user: extra messages to send back to back
	wake     []chan struct{}      // per user: a burst is waiting
	changed  chan struct{}        // closed and replaced on every recorded attempt
	started  time.Time
	stopped  time.Time
}

// StartLoad starts sending at perUser messages per second per user.
func (e *Env) StartLoad(perUser float64) *Load {
	l := &Load{
		e:       e,
		perUser: perUser,
		client: &http.Client{
			Timeout: ClientTimeout,
			Transport: &http.Transport{
				// One keep-alive connection per user and ingress, as a client pool would keep.
				MaxIdleConnsPerHost: len(e.Users) + 1,
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			},
		},
		stop:    make(chan struct{}),
		down:    map[string]time.Time{},
		burst:   make([]int, len(e.Users)),
		wake:    make([]chan struct{}, len(e.Users)),
		changed: make(chan struct{}),
		started: time.Now(),
	}
	period := time.Duration(float64(time.Second) / perUser)
	for i := range e.Users {
		l.wake[i] = make(chan struct{}, 1)
		// Users start spread over one period, so the load is steady rather than in waves.
		offset := period * time.Duration(i) / time.Duration(len(e.Users))
		l.wg.Go(func() { l.user(i, offset, period) })
	}
	l.wg.Go(l.pollReadiness)
	e.T.Cleanup(l.Stop)
	return l
}

// ReadinessPoll is how often the load asks each ingress's /readyz, as a load balancer's health check or
// Kubernetes' readiness probe does (more often than the chart's probe, so a scenario stays short).
const ReadinessPoll = 250 * time.Millisecond

// pollReadiness takes an ingress out of the rotation while its /readyz does not answer 200.
func (l *Load) pollReadiness() {
	client := &http.Client{Timeout: ReadinessPoll}
	tick := time.NewTicker(ReadinessPoll)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		for _, p := range l.e.ingresses() {
			res, err := client.Get("http://" + p.Addr + "/readyz")
			ready := err == nil && res.StatusCode == http.StatusOK
			if err == nil {
				_ = res.Body.Close()
			}
			if !ready {
				until := time.Now().Add(ReadinessPoll + 50*time.Millisecond)
				l.mu.Lock()
				if until.After(l.down[p.Addr]) {
					l.down[p.Addr] = until
				}
				l.mu.Unlock()
			}
		}
	}
}

func (l *Load) user(i int, offset, period time.Duration) {
	next := time.Now().Add(offset)
	for seq := 0; ; seq++ {
		if !l.takeBurst(i) {
			t := time.NewTimer(time.Until(next))
			select {
			case <-l.stop:
				t.Stop()
				return
			case <-l.wake[i]:
				t.Stop()
			case <-t.C:
			}
			// Woken for a burst: the scheduled send stays scheduled. Otherwise a fixed rate, but no
			// catching up after a slow answer: that would be a burst.
			if !l.takeBurst(i) {
				if next = next.Add(period); next.Before(time.Now()) {
					next = time.Now()
				}
			}
		}
		select {
		case <-l.stop:
			return
		default:
		}
		l.record(l.send(i, seq))
	}
}

// takeBurst takes one of user i's burst messages, if any are left.
func (l *Load) takeBurst(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.burst[i] == 0 {
		return false
	}
	l.burst[i]--
	return true
}

// Burst makes every user send n extra messages at once, back to back (each still waiting for the previous
// answer): a backlog for the workers, and for a moment one request in flight per user at the ingress.
func (l *Load) Burst(n int) {
	l.mu.Lock()
	for i := range l.burst {
		l.burst[i] += n
	}
	l.mu.Unlock()
	for _, w := range l.wake {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (l *Load) target(user, seq int) string {
	ingresses := l.e.ingresses()
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for k := range ingresses {
		p := ingresses[(user+seq+k)%len(ingresses)]
		if now.After(l.down[p.Addr]) {
			return p.Addr
		}
	}
	return ingresses[(user+seq)%len(ingresses)].Addr
}

func (l *Load) send(i, seq int) Attempt {
	u := l.e.Users[i]
	a := Attempt{User: i, Seq: seq, Token: fmt.Sprintf("chaos-%s-%s-%06d", l.e.Run, u.ID, seq), Target: l.target(i, seq)}
	body, _ := json.Marshal(map[string]string{"user_id": u.ID, "message": a.Token})
	var wrote, reused atomic.Bool
	trace := &httptrace.ClientTrace{
		GotConn:      func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost,
		"http://"+a.Target+"/v1/send", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.e.Key)
	a.Sent = time.Now()
	res, err := l.client.Do(req)
	if err != nil {
		a.Done = time.Now()
		a.Err = err.Error()
		var ne net.Error
		a.TimedOut = errors.As(err, &ne) && ne.Timeout()
		// Refused: nothing listens. Closed idle: the server shut an idle keep-alive connection as the
		// request went out, so it never read it (Go's client reports exactly this case by that text).
		// A reset after the request was written is not among them: the client cannot tell whether the
		// server acted on it (a listener closed with connections still in its accept queue does that).
		a.NotServed = errors.Is(err, syscall.ECONNREFUSED) || (!wrote.Load() && !a.TimedOut) ||
			strings.Contains(err.Error(), "server closed idle connection")
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			a.ErrKind = "refused"
		case a.TimedOut:
			a.ErrKind = "timeout"
		case strings.Contains(err.Error(), "server closed idle connection"):
			a.ErrKind = "closed-idle"
		case !wrote.Load():
			a.ErrKind = "not-sent"
		case reused.Load() && errors.Is(err, io.EOF):
			a.ErrKind = "eof-on-reused"
		default:
			a.ErrKind = "broken"
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			l.mu.Lock()
			l.down[a.Target] = time.Now().Add(time.Second)
			l.mu.Unlock()
		}
		return a
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	a.Done = time.Now()
	a.Status = res.StatusCode
	if err != nil {
		a.Err = err.Error()
	}
	var out struct {
		TrackingID string `json:"tracking_id"`
		Error      string `json:"error"`
	}
	_ = json.Unmarshal(b, &out)
	a.TrackingID, a.Code = out.TrackingID, out.Error
	return a
}

func (l *Load) record(a Attempt) {
	l.mu.Lock()
	l.attempts = append(l.attempts, a)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// Stop stops sending and waits for the requests in flight to be answered.
func (l *Load) Stop() {
	l.mu.Lock()
	select {
	case <-l.stop:
		l.mu.Unlock()
		return
	default:
	}
	close(l.stop)
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	l.stopped = time.Now()
	l.mu.Unlock()
}

// Attempts returns every request so far.
func (l *Load) Attempts() []Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Attempt(nil), l.attempts...)
}

// WaitAccepted waits until n more requests than now have been accepted (202), or the timeout passes: the
// way a scenario lets the load run "for a while" on a condition rather than a sleep.
func (l *Load) WaitAccepted(ctx context.Context, n int, timeout time.Duration) error {
	count := func() (int, chan struct{}) {
		l.mu.Lock()
		defer l.mu.Unlock()
		k := 0
		for _, a := range l.attempts {
			if a.Accepted() {
				k++
			}
		}
		return k, l.changed
	}
	base, _ := count()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		k, changed := count()
		if k-base >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d more sends accepted within %v", k-base, n, timeout)
		}
	}
}

// WaitAnswered waits until n requests sent after since have been answered (any outcome): the load has
// seen the fault.
func (l *Load) WaitAnswered(ctx context.Context, since time.Time, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		l.mu.Lock()
		k := 0
		for _, a := range l.attempts {
			if !a.Sent.Before(since) {
				k++
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if k >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d requests answered within %v", k, n, timeout)
		}
	}
}
