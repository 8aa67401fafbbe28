package chaos_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/heraldhq/herald/test/chaos"
)

// A send is one trace across processes: the ingress's server span for POST /v1/send and the worker's span
// for the platform call share a trace id only if the trace context crossed Kafka in the envelope's
// headers. The components are real herald processes configured as production is, by the standard
// OTEL_* variables, exporting over OTLP/HTTP to a receiver in the test — the path no in-process test
// covers, since those install a provider of their own.
func TestASendIsOneTraceFromTheIngressThroughTheWorker(t *testing.T) {
	rcv := newOTLPReceiver(t)
	e := chaos.Start(t, chaos.Config{Users: 1, Workers: 1, Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.srv.URL,
		// Export within 100 ms of a span's end instead of the default 5 s, so the test waits little.
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}})
	ctx := context.Background()

	for _, p := range append([]*chaos.Proc{e.Webhook, e.Ingresses[0]}, e.Workers...) {
		if n := p.CountLog("tracing is off"); n != 0 {
			t.Errorf("%s logged that tracing is off:\n%s", p.Name, p.Tail(20))
		}
	}

	u := e.Users[0]
	trackingID := send(t, e, u.ID, "traced "+e.Run)

	// The worker's delivery span names the tracking id; the spans that share its trace id are the trace.
	var spans []span
	err := chaos.Eventually(ctx, time.Minute, 100*time.Millisecond, "one trace from the ingress to the platform call", func(context.Context) error {
		all := rcv.spans()
		traceID := ""
		for _, s := range all {
			if s.service == "herald-worker" && s.name == "deliver" && s.attrs["herald.tracking_id"] == trackingID {
				traceID = s.traceID
			}
		}
		if traceID == "" {
			return fmt.Errorf("no deliver span of %s among %d spans received", trackingID, len(all))
		}
		spans = spans[:0]
		for _, s := range all {
			if s.traceID == traceID {
				spans = append(spans, s)
			}
		}
		var server, platform bool
		for _, s := range spans {
			server = server || (s.service == "herald-ingress" && s.name == "POST /v1/send" && s.kind == tracepb.Span_SPAN_KIND_SERVER)
			platform = platform || (s.service == "herald-worker" && s.name == "sendMessage" && s.kind == tracepb.Span_SPAN_KIND_CLIENT)
		}
		if !server || !platform {
			return fmt.Errorf("trace %s has the ingress's POST /v1/send span: %v, the worker's sendMessage span: %v; it has %v",
				traceID, server, platform, spans)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.err(); err != nil {
		t.Errorf("the receiver refused an export: %v", err)
	}
	t.Logf("trace: %v", spans)

	// Spans leave the installation for whoever runs the collector: they name routes by their pattern and
	// notifications by tracking id, never a user id, chat id, phone number or message text — in every span
	// received, setup's linking and verification requests included.
	message := "traced " + e.Run
	for _, s := range rcv.spans() {
		values := []string{s.name}
		for _, v := range s.attrs {
			values = append(values, v)
		}
		for _, v := range values {
			for _, secret := range []string{u.ID, strconv.FormatInt(u.ChatID, 10), u.Phone, message} {
				if strings.Contains(v, secret) {
					t.Errorf("span %v carries %q in %q", s, secret, v)
				}
			}
		}
	}
}

// send posts one message for user and returns its tracking id.
func send(t *testing.T, e *chaos.Env, user, message string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"user_id": user, "message": message})
	req, err := http.NewRequest(http.MethodPost, e.APIURL("/v1/send"), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.Key)
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out struct {
		TrackingID string `json:"tracking_id"`
	}
	if res.StatusCode != http.StatusAccepted || json.Unmarshal(b, &out) != nil || out.TrackingID == "" {
		t.Fatalf("POST /v1/send: status %d: %s, want 202 with a tracking id", res.StatusCode, b)
	}
	return out.TrackingID
}

// span is what the test looks at of an exported span.
type span struct {
	service, name, traceID string
	kind                   tracepb.Span_SpanKind
	attrs                  map[string]string // string attributes only
}

func (s span) String() string { return s.service + ":" + s.name }

// otlpReceiver is an OTLP/HTTP trace receiver: POST /v1/traces with a protobuf ExportTraceServiceRequest,
// as a collector accepts it.
type otlpReceiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	received []span
	failures []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.fail(w, http.StatusNotFound, fmt.Sprintf("%s %s", req.Method, req.URL.Path))
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.fail(w, http.StatusUnsupportedMediaType, "content type "+ct)
		return
	}
	if ce := req.Header.Get("Content-Encoding"); ce != "" {
		r.fail(w, http.StatusUnsupportedMediaType, "content encoding "+ce)
		return
	}
	body, err := io.ReadAll(req.Body)
	var export coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &export)
	}
	if err != nil {
		r.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	var got []span
	for _, rs := range export.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				attrs := map[string]string{}
				for _, kv := range s.Attributes {
					attrs[kv.Key] = kv.GetValue().GetStringValue()
				}
				got = append(got, span{service: service, name: s.Name, traceID: hex.EncodeToString(s.TraceId), kind: s.Kind, attrs: attrs})
			}
		}
	}
	r.mu.Lock()
	r.received = append(r.received, got...)
	r.mu.Unlock()
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func (r *otlpReceiver) fail(w http.ResponseWriter, status int, why string) {
	r.mu.Lock()
	r.failures = append(r.failures, why)
	r.mu.Unlock()
	http.Error(w, why, status)
}

func (r *otlpReceiver) spans() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]span(nil), r.received...)
}

func (r *otlpReceiver) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(r.failures, "; "))
}
