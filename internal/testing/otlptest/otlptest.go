// Package otlptest is an OTLP/HTTP trace receiver for tests: what a collector accepts (POST /v1/traces, a
// protobuf ExportTraceServiceRequest, uncompressed), keeping what a test looks at of each span.
package otlptest

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is what a test looks at of an exported span.
type Span struct {
	Service string // the resource's service.name
	Name    string
	TraceID string // hex
	Kind    tracepb.Span_SpanKind
	Attrs   map[string]string // string attributes only
}

func (s Span) String() string { return s.Service + ":" + s.Name }

// Receiver is a running receiver; point OTEL_EXPORTER_OTLP_ENDPOINT at its URL.
type Receiver struct {
	URL string

	mu       sync.Mutex
	received []Span
	failures []string
}

// New starts a receiver, closed at the end of the test.
func New(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
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
	var got []Span
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
				got = append(got, Span{Service: service, Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), Kind: s.Kind, Attrs: attrs})
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

func (r *Receiver) fail(w http.ResponseWriter, status int, why string) {
	r.mu.Lock()
	r.failures = append(r.failures, why)
	r.mu.Unlock()
	http.Error(w, why, status)
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.received...)
}

// Err says why the receiver refused exports, if it did.
func (r *Receiver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) == 0 {
		return nil
	}
	return errors.New(strings.Join(r.failures, "; "))
}
