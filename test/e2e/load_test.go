package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// loadMarker starts the text of every load message: "e2e load <label> #<n>".
const loadMarker = "e2e load "

// sendRecord is one POST /v1/send of the load and what came of it.
type sendRecord struct {
	n        int
	user     string
	text     string
	idemKey  string
	at       time.Duration // since the load began
	status   int           // of the first attempt; 0 for a transport error
	err      string        // the first attempt's failure
	tracking string        // once accepted (first attempt or a retry)
	retries  int
	fresh    bool // sent on a new connection (else on a kept-alive one)
}

// load sends POST /v1/send at a steady rate, round-robin over linked users, as tenant backends would: half
// the sends on a keep-alive HTTP client, half on a new connection each, one Idempotency-Key per
// notification, no retry in the first pass.
type load struct {
	base, key string
	users     []user
	prefix    string // of every message text
	keepAlive *http.Client
	fresh     *http.Client
	began     time.Time

	mu    sync.Mutex
	all   []*sendRecord
	sends map[string]*sendRecord // by tracking id
	marks []string
}

func newLoad(base, key string, users []user, label string) *load {
	keep := http.DefaultTransport.(*http.Transport).Clone()
	keep.MaxIdleConnsPerHost = 32
	fresh := http.DefaultTransport.(*http.Transport).Clone()
	fresh.DisableKeepAlives = true
	return &load{base: base, key: key, users: users, prefix: loadMarker + label + " #", sends: map[string]*sendRecord{},
		keepAlive: &http.Client{Timeout: 10 * time.Second, Transport: keep},
		fresh:     &http.Client{Timeout: 10 * time.Second, Transport: fresh}}
}

func (l *load) mark(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marks = append(l.marks, fmt.Sprintf("%7.2fs %s", time.Since(l.began).Seconds(), what))
}

// run sends rate requests per second until ctx is done, then waits for the answers.
func (l *load) run(ctx context.Context, rate int) {
	l.began = time.Now()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		u := l.users[n%len(l.users)]
		s := &sendRecord{n: n, user: u.id, text: fmt.Sprintf("%s%d", l.prefix, n), idemKey: fmt.Sprintf("e2e-%s-%d", run, n),
			at: time.Since(l.began), fresh: n%2 == 1}
		l.mu.Lock()
		l.all = append(l.all, s)
		l.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, tracking, err := l.send(s)
			l.mu.Lock()
			defer l.mu.Unlock()
			s.status = status
			if status == http.StatusAccepted {
				s.tracking = tracking
				l.sends[tracking] = s
			} else {
				s.err = describe(status, err)
			}
		}()
	}
}

func (l *load) send(s *sendRecord) (int, string, error) {
	priority := 3
	if s.n/2%2 == 0 {
		priority = 7
	}
	body, _ := json.Marshal(map[string]any{"user_id": s.user, "message": s.text, "priority": priority})
	req, err := http.NewRequest("POST", l.base+"/v1/send", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.key)
	req.Header.Set("Idempotency-Key", s.idemKey)
	client := l.keepAlive
	if s.fresh {
		client = l.fresh
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return resp.StatusCode, "", fmt.Errorf("%s", bytes.TrimSpace(raw))
	}
	var n notification
	if err := json.Unmarshal(raw, &n); err != nil || n.TrackingID == "" {
		return resp.StatusCode, "", fmt.Errorf("202 without a tracking_id: %s", raw)
	}
	return resp.StatusCode, n.TrackingID, nil
}

// describe names a failure by its HTTP status or the kind of transport error.
func describe(status int, err error) string {
	if status != 0 {
		return fmt.Sprintf("HTTP %d %v", status, err)
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "transport: connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "transport: connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "transport: EOF (connection closed by the server)"
	case errors.As(err, &ne) && ne.Timeout():
		return "transport: timeout"
	}
	return "transport: " + err.Error()
}

// report is the outcome of the first attempts, by kind, with the failures on the timeline of the marks.
func (l *load) report() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	kinds := map[string]int{}
	var failures []*sendRecord
	for _, s := range l.all {
		if s.status == http.StatusAccepted {
			kinds["202 accepted"]++
			continue
		}
		kind := s.err
		if i := strings.Index(kind, " {"); i > 0 {
			kind = kind[:i] // the status without the body
		}
		if s.fresh {
			kind += " (new connection)"
		} else {
			kind += " (kept-alive connection)"
		}
		kinds[kind]++
		failures = append(failures, s)
	}
	fmt.Fprintf(&b, "%d sends at a steady rate over %.0f s; first attempts:\n", len(l.all), time.Since(l.began).Seconds())
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "  %6d  %s\n", kinds[k], k)
	}
	b.WriteString("timeline:\n")
	for _, m := range l.marks {
		fmt.Fprintf(&b, "  %s\n", m)
	}
	for i, s := range failures {
		if i == 40 {
			fmt.Fprintf(&b, "  … %d more failures\n", len(failures)-40)
			break
		}
		conn := "kept-alive connection"
		if s.fresh {
			conn = "new connection"
		}
		fmt.Fprintf(&b, "  %7.2fs send #%d (%s): %s\n", s.at.Seconds(), s.n, conn, s.err)
	}
	return b.String()
}

func (l *load) firstAttemptFailures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.all {
		if s.status != http.StatusAccepted {
			n++
		}
	}
	return n
}

// retryFailed sends every failed request again with its Idempotency-Key until it is accepted: a request
// that failed in transport may have been accepted after all, and the key makes the retry return that
// notification instead of queuing a second one.
func (l *load) retryFailed(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	var failed []*sendRecord
	for _, s := range l.all {
		if s.tracking == "" {
			failed = append(failed, s)
		}
	}
	l.mu.Unlock()
	for _, s := range failed {
		for s.tracking == "" {
			s.retries++
			status, tracking, err := l.send(s)
			if status == http.StatusAccepted {
				l.mu.Lock()
				s.tracking = tracking
				l.sends[tracking] = s
				l.mu.Unlock()
				break
			}
			if s.retries == 10 {
				t.Fatalf("send #%d still fails after %d retries: %s", s.n, s.retries, describe(status, err))
			}
			time.Sleep(time.Second)
		}
	}
	if len(failed) > 0 {
		t.Logf("%d failed sends accepted on retry with their Idempotency-Key", len(failed))
	}
}

// accepted lists the tracking ids of every accepted notification.
func (l *load) accepted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.sends))
	for id := range l.sends {
		ids = append(ids, id)
	}
	return ids
}
