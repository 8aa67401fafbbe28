package chaos_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/heraldhq/herald/internal/testing/otlptest"
	"github.com/heraldhq/herald/test/chaos"
)

// A send is one trace across processes: the ingress's server span for POST /v1/send and the worker's span
// for the platform call share a trace id only if the trace context crossed Kafka in the envelope's
// headers. The components are real herald processes configured as production is, by the standard
// OTEL_* variables, exporting over OTLP/HTTP to a receiver in the test — the path no in-process test
// covers, since those install a provider of their own.
func TestASendIsOneTraceFromTheIngressThroughTheWorker(t *testing.T) {
	rcv := otlptest.New(t)
	e := chaos.Start(t, chaos.Config{Users: 1, Workers: 1, Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL,
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
	trackingID, err := e.Send(ctx, u.ID, "traced "+e.Run)
	must(t, err)

	// The worker's delivery span names the tracking id; the spans that share its trace id are the trace.
	var spans []otlptest.Span
	err = chaos.Eventually(ctx, time.Minute, 100*time.Millisecond, "one trace from the ingress to the platform call", func(context.Context) error {
		all := rcv.Spans()
		traceID := ""
		for _, s := range all {
			if s.Service == "herald-worker" && s.Name == "deliver" && s.Attrs["herald.tracking_id"] == trackingID {
				traceID = s.TraceID
			}
		}
		if traceID == "" {
			return fmt.Errorf("no deliver span of %s among %d spans received", trackingID, len(all))
		}
		spans = spans[:0]
		for _, s := range all {
			if s.TraceID == traceID {
				spans = append(spans, s)
			}
		}
		var server, platform bool
		for _, s := range spans {
			server = server || (s.Service == "herald-ingress" && s.Name == "POST /v1/send" && s.Kind == tracepb.Span_SPAN_KIND_SERVER)
			platform = platform || (s.Service == "herald-worker" && s.Name == "sendMessage" && s.Kind == tracepb.Span_SPAN_KIND_CLIENT)
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
	if err := rcv.Err(); err != nil {
		t.Errorf("the receiver refused an export: %v", err)
	}
	t.Logf("trace: %v", spans)

	// Spans leave the installation for whoever runs the collector: they name routes by their pattern and
	// notifications by tracking id, never a user id, chat id, phone number or message text — in every span
	// received, setup's linking and verification requests included.
	message := "traced " + e.Run
	for _, s := range rcv.Spans() {
		values := []string{s.Name}
		for _, v := range s.Attrs {
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
