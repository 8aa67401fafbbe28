package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// userOf links a user of tenant to chat, verified, and makes the chat exist in the simulator.
func (e *env) userOf(tenant, user string, chat int64) {
	e.t.Helper()
	fixture.New(e.st).VerifiedUser(e.t, tenant, user, chat)
	if _, err := e.sim.EnsureUser(sim.User{ID: chat}); err != nil {
		e.t.Fatalf("sim user: %v", err)
	}
}

// sendAs posts /v1/send with a tenant's key and returns the tracking id.
func (e *env) sendAs(key, user, message string) string {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"user_id": user, "message": message})
	req, _ := http.NewRequest("POST", e.api.URL+"/v1/send", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST /v1/send: %v", err)
	}
	defer res.Body.Close()
	var out struct {
		TrackingID string `json:"tracking_id"`
	}
	if res.StatusCode != http.StatusAccepted || json.NewDecoder(res.Body).Decode(&out) != nil {
		e.t.Fatalf("POST /v1/send: %d", res.StatusCode)
	}
	return out.TrackingID
}

// At the bot's global rate of 30/s, a quiet tenant's fresh notification is delivered within a few seconds
// while a noisy tenant has thousands queued ahead of it: tenants are served in turn.
func TestQuietTenantIsNotHeldBackByANoisyBacklog(t *testing.T) {
	// Not parallel: the rate is the bot's and the assertion is about time.
	const rate, noisyUsers, perUser = 30, 300, 10
	e := newEnv(t, sim.Options{GlobalRate: rate})
	quietKey := e.tenant("globex", "Globex", "Globex")
	for i := range noisyUsers {
		e.userOf("acme", fmt.Sprintf("n%d", i), int64(50000+i))
	}
	e.userOf("globex", "q1", 59999)
	opts := e.fastOptions()
	opts.RateLimit = rate
	opts.PerChatInterval = time.Second
	e.start(opts)

	// The noisy tenant (whose limits at the door allow it) sends 3,000 notifications through the API: 100 s
	// of the bot's rate.
	noisyLimit := int32(100000)
	if err := e.st.SetTenantLimits(context.Background(), "acme", store.TenantLimits{SendsPerSecond: &noisyLimit, Burst: &noisyLimit}); err != nil {
		t.Fatal(err)
	}
	noisy := make([]string, noisyUsers*perUser)
	parallel(len(noisy), 16, func(i int) { noisy[i] = e.sendAs(e.key, fmt.Sprintf("n%d", i%noisyUsers), "noisy") })
	// Let the worker get into the backlog.
	deadline := time.Now().Add(30 * time.Second)
	for e.countStatus(noisy, "delivered") < 30 {
		if time.Now().After(deadline) {
			t.Fatal("the noisy backlog is not being delivered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	accepted := time.Now()
	id := e.sendAs(quietKey, "q1", "quiet")
	r := e.waitStatus(id, "delivered", 30*time.Second)
	if took := r.UpdatedAt.Sub(accepted); took > 3*time.Second {
		t.Errorf("the quiet tenant's notification took %v behind a noisy backlog; want within 3 s", took)
	}
	if left := len(noisy) - e.countStatus(noisy, "delivered"); left < 1000 {
		t.Errorf("only %d noisy notifications were still waiting when the quiet one was delivered; the test needs a backlog", left)
	}
	e.assertNoViolations()
}

// A hundred messages to one chat wait for that chat's interval without holding the worker: fifty messages
// to fifty other chats of the same tenant go out at the global rate meanwhile.
func TestOneBusyChatDoesNotHoldTheOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{GlobalRate: 100})
	e.user("busy", 61000, true)
	for i := range 50 {
		e.user(fmt.Sprintf("c%d", i), int64(61001+i), true)
	}
	opts := e.fastOptions()
	opts.RateLimit = 100
	opts.PerChatInterval = time.Second
	opts.Concurrency = 64
	opts.Buffer = 1000
	e.start(opts)
	for i := range 100 {
		e.enqueueRaw("busy", fmt.Sprintf("busy %d", i), 5)
	}
	start := time.Now()
	var others []string
	for i := range 50 {
		others = append(others, e.enqueueRaw(fmt.Sprintf("c%d", i), "other", 5))
	}
	e.waitAllTerminal(others, 60*time.Second)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("fifty messages to fifty chats took %v behind a hundred to one chat; at 100/s they need about half a second", took)
	}
	if n := len(e.sim.Messages(61000)); n > 20 {
		t.Errorf("the busy chat received %d messages meanwhile; its interval allows about one a second", n)
	}
	e.assertNoViolations()
}
