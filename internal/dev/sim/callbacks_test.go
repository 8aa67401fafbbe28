package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/signing"
)

// postCallback POSTs body to the receiver signed with secrets (none: unsigned) at time at, and returns the
// status.
func postCallback(t *testing.T, e *env, body string, at time.Time, secrets ...signing.Secret) int {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/sim/callbacks", bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	if len(secrets) > 0 {
		signing.Sign("evt_1", at, []byte(body), secrets...).Set(req.Header)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// The receiver checks each callback's signature as a tenant's receiver should, with the secrets herald dev
// gives it or the ones registered by hand, and keeps what arrived.
func TestTheCallbackReceiverVerifiesAndKeepsWhatArrives(t *testing.T) {
	known, registered, stranger := signing.NewSecret(), signing.NewSecret(), signing.NewSecret()
	e := newEnv(t, sim.Options{CallbackSecrets: func(context.Context) ([]signing.Secret, error) { return []signing.Secret{known}, nil }})
	ping := `{"type":"ping","timestamp":"2025-05-01T10:00:00.000Z","data":{}}`
	now := time.Now()
	for _, c := range []struct {
		name    string
		at      time.Time
		secrets []signing.Secret
	}{
		{"signed with the endpoint's secret", now, []signing.Secret{known}},
		{"signed with another secret", now, []signing.Secret{stranger}},
		{"signed 10 minutes ago", now.Add(-10 * time.Minute), []signing.Secret{known}},
		{"signed with a new and an old secret", now, []signing.Secret{stranger, known}},
	} {
		if status := postCallback(t, e, ping, c.at, c.secrets...); status != http.StatusNoContent {
			t.Errorf("%s: answered %d", c.name, status)
		}
	}
	got := e.sim.Callbacks()
	if len(got) != 4 {
		t.Fatalf("%d callbacks kept", len(got))
	}
	for i, want := range []bool{true, false, false, true} {
		if got[i].Verified == nil || *got[i].Verified != want || got[i].Type != "ping" {
			t.Errorf("callback %d: verified %v (%s), type %q; want verified %v", i, got[i].Verified, got[i].VerificationError, got[i].Type, want)
		}
	}
	if got[3].Signatures != 2 || got[3].WebhookID != "evt_1" {
		t.Errorf("callback 4: %+v", got[3])
	}

	// A secret registered by hand verifies too.
	res, err := http.Post(e.srv.URL+"/sim/callbacks/secrets", "application/json", bytes.NewReader([]byte(`{"secret":"`+registered.Reveal()+`"}`)))
	if err != nil {
		t.Fatalf("registering a secret: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("registering a secret: %v", res.Status)
	}
	postCallback(t, e, ping, now, registered)
	// Failures on demand, still kept.
	res, _ = http.Post(e.srv.URL+"/sim/callbacks/fail", "application/json", bytes.NewReader([]byte(`{"count":2,"status":503}`)))
	res.Body.Close()
	for _, want := range []int{503, 503, 204} {
		if status := postCallback(t, e, ping, now, known); status != want {
			t.Errorf("answered %d, want %d", status, want)
		}
	}
	res, _ = http.Get(e.srv.URL + "/sim/callbacks")
	var listed struct {
		Callbacks []sim.ReceivedCallback `json:"callbacks"`
	}
	_ = json.NewDecoder(res.Body).Decode(&listed)
	res.Body.Close()
	if n := len(listed.Callbacks); n != 8 || !*listed.Callbacks[4].Verified || listed.Callbacks[5].Answered != 503 {
		t.Errorf("GET /sim/callbacks: %d callbacks, %+v", n, listed.Callbacks)
	}
	if status := e.control(t, "DELETE", "/sim/callbacks", nil, nil); status != 200 || len(e.sim.Callbacks()) != 0 {
		t.Errorf("DELETE /sim/callbacks: %d, %d left", status, len(e.sim.Callbacks()))
	}
}

func TestAReceiverWithoutSecretsSaysSoAndTakesAnyBody(t *testing.T) {
	e := newEnv(t, sim.Options{})
	if status := postCallback(t, e, "not json", time.Now()); status != http.StatusNoContent {
		t.Fatalf("answered %d", status)
	}
	got := e.sim.Callbacks()
	if len(got) != 1 || got[0].Verified != nil || string(got[0].Payload) != `"not json"` {
		t.Errorf("kept %+v", got)
	}
}
