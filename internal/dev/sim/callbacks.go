package sim

// The callback receiver: a tenant's endpoint for status callbacks, so that a newcomer running herald dev
// can watch events arrive (docs/dev.md). POST /sim/callbacks takes a callback and checks its signature as a
// tenant's receiver should (internal/signing.Verify: a known secret, a timestamp within 5 minutes);
// GET /sim/callbacks lists what arrived, oldest first. The secrets come from Options.CallbackSecrets
// (herald dev reads the endpoints that point here) or from POST /sim/callbacks/secrets.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/signing"
)

// MaxReceivedCallbacks bounds the callbacks kept; the oldest go first.
const MaxReceivedCallbacks = 1000

// ReceivedCallback is one request that reached POST /sim/callbacks.
type ReceivedCallback struct {
	ReceivedAt time.Time `json:"received_at"`
	WebhookID  string    `json:"webhook_id"`
	Timestamp  string    `json:"webhook_timestamp"`
	Signatures int       `json:"signatures"` // v1 signatures in webhook-signature: 2 during a rotation's overlap
	// Verified says whether a signature matched a known secret within the replay window; null when the
	// receiver knows no secret.
	Verified          *bool           `json:"verified"`
	VerificationError string          `json:"verification_error,omitempty"`
	Answered          int             `json:"answered"` // the status the receiver answered
	Type              string          `json:"type"`
	Payload           json.RawMessage `json:"payload"`
}

// callbackState is the receiver's part of the simulator.
type callbackState struct {
	received []ReceivedCallback
	secrets  []signing.Secret // registered by hand
	fail     int              // answer the next fail callbacks with failWith
	failWith int
}

func (s *Server) handleListCallbacks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{"callbacks": s.Callbacks()})
}

func (s *Server) handleClearCallbacks(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.callbacks.received = nil
	s.mu.Unlock()
	writeJSON(w, 200, map[string]bool{"ok": true})
}

func (s *Server) handleAddCallbackSecret(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Secret string `json:"secret"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	sec, err := signing.ParseSecret(req.Secret)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	s.mu.Lock()
	s.callbacks.secrets = append(s.callbacks.secrets, sec)
	s.mu.Unlock()
	writeJSON(w, 200, map[string]bool{"ok": true})
}

func (s *Server) handleFailCallbacks(w http.ResponseWriter, r *http.Request) {
	req := struct {
		Count  int `json:"count"`
		Status int `json:"status"`
	}{Count: 1, Status: http.StatusServiceUnavailable}
	if !readJSON(w, r, &req) {
		return
	}
	if req.Status < 100 || req.Status > 599 || req.Count < 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "status must be an HTTP status and count at least 0")
		return
	}
	s.FailCallbacks(req.Count, req.Status)
	writeJSON(w, 200, map[string]bool{"ok": true})
}

// FailCallbacks makes the receiver answer the next n callbacks with status (they are still listed).
func (s *Server) FailCallbacks(n, status int) {
	s.mu.Lock()
	s.callbacks.fail, s.callbacks.failWith = n, status
	s.mu.Unlock()
}

// Callbacks returns what reached the receiver, oldest first.
func (s *Server) Callbacks() []ReceivedCallback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ReceivedCallback{}, s.callbacks.received...)
}

func (s *Server) handleCallback(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "could not read the body")
		return
	}
	s.mu.Lock()
	secrets := append([]signing.Secret{}, s.callbacks.secrets...)
	s.mu.Unlock()
	if s.opts.CallbackSecrets != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		more, err := s.opts.CallbackSecrets(ctx)
		cancel()
		if err != nil {
			s.log.Warn("could not read the callback secrets", "err", err)
		}
		secrets = append(secrets, more...)
	}
	rc := ReceivedCallback{
		ReceivedAt: s.now().UTC(),
		WebhookID:  r.Header.Get(signing.HeaderID),
		Timestamp:  r.Header.Get(signing.HeaderTimestamp),
		Signatures: len(strings.Fields(r.Header.Get(signing.HeaderSignature))),
		Answered:   http.StatusNoContent,
	}
	if len(secrets) > 0 {
		err := signing.Verify(r.Header, body, s.now(), signing.DefaultTolerance, secrets...)
		ok := err == nil
		rc.Verified = &ok
		if err != nil {
			rc.VerificationError = err.Error()
		}
	}
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &head) == nil && json.Valid(body) {
		rc.Type, rc.Payload = head.Type, body
	} else {
		rc.Payload, _ = json.Marshal(string(body))
	}
	s.mu.Lock()
	if s.callbacks.fail > 0 {
		s.callbacks.fail--
		rc.Answered = s.callbacks.failWith
	}
	s.callbacks.received = append(s.callbacks.received, rc)
	if over := len(s.callbacks.received) - MaxReceivedCallbacks; over > 0 {
		s.callbacks.received = append([]ReceivedCallback{}, s.callbacks.received[over:]...)
	}
	s.broadcastLocked()
	s.mu.Unlock()
	w.WriteHeader(rc.Answered)
}
