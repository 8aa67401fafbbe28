package main

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/testing/benchutil"
)

// sampler polls the ingress's /metrics (on its own listener, so that the phases' load and the ingress's
// shedding do not touch it) and its RSS every 200 ms, and reports per phase the peaks of its goroutines,
// heap, goroutine stacks and RSS: where the memory of a phase went.
type sampler struct {
	addr string
	pid  int
	done chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	peak map[string]float64
}

var currentSampler *sampler

var sampled = []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes"}

func startSampler(metricsAddr string, pid int) *sampler {
	s := &sampler{addr: metricsAddr, pid: pid, done: make(chan struct{}), peak: map[string]float64{}}
	currentSampler = s
	s.wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.sample()
			}
		}
	})
	return s
}

func (s *sampler) stop() { close(s.done); s.wg.Wait() }

func (s *sampler) sample() {
	vals := map[string]float64{}
	if m, err := benchutil.Memory(s.pid); err == nil {
		vals["rss"], vals["anon"], vals["file"] = float64(m.RSS), float64(m.Anon), float64(m.File)
	}
	// Uncompressed: the ingress is what is measured, and compressing five scrapes a second for the sampler
	// took a measurable part of its CPU and of what it allocated (docs/benchmarks.md, "Less garbage, the
	// default GOGC", re-measured after the review).
	c := http.Client{Timeout: 2 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.addr+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "identity")
	if res, err := c.Do(req); err == nil {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			name, value, ok := strings.Cut(sc.Text(), " ")
			if !ok {
				continue
			}
			for _, m := range sampled {
				if name == m {
					vals[m], _ = strconv.ParseFloat(value, 64)
				}
			}
		}
		res.Body.Close()
	}
	s.mu.Lock()
	for k, v := range vals {
		s.peak[k] = max(s.peak[k], v)
	}
	s.mu.Unlock()
}

// report prints the peaks since the last report, starts over, and returns the RSS peak.
func (s *sampler) report() float64 {
	if s == nil {
		return 0
	}
	s.sample()
	s.mu.Lock()
	p := s.peak
	s.peak = map[string]float64{}
	s.mu.Unlock()
	fmt.Printf("   ingress peaks: RSS %.1f MB (anonymous %.1f, files %.1f), heap in use %.1f MB, stacks %.1f MB, %.0f goroutines\n",
		p["rss"]/1e6, p["anon"]/1e6, p["file"]/1e6, p["go_memstats_heap_inuse_bytes"]/1e6, p["go_memstats_stack_inuse_bytes"]/1e6, p["go_goroutines"])
	return p["rss"]
}

// shedByRoute reads the ingress's herald_http_requests_total and returns its 503s by route: the
// connections shed at the listener (route connection_limit) apart from the requests shed by the handlers.
func shedByRoute(metricsAddr string) map[string]float64 {
	out := map[string]float64{}
	req, _ := http.NewRequest(http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "identity")
	res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return out
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "herald_http_requests_total{") || !strings.Contains(line, `status="503"`) {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		_, route, _ := strings.Cut(labels, `route="`)
		route, _, _ = strings.Cut(route, `"`)
		v, _ := strconv.ParseFloat(value, 64)
		out[route] += v
	}
	return out
}

// shedDiff prints after − before by route.
func shedDiff(before, after map[string]float64) string {
	var parts []string
	for route, v := range after {
		if d := v - before[route]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", route, d))
		}
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
