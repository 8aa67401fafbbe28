package delivery_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/testing/syncbuf"
)

// jsonLines parses a JSON slog handler's output, line by line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber() // a number reads as it was written, not as 7.3e+09
		if err := d.Decode(&m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// identifying names attributes that would identify an end user, whatever their value.
var identifying = regexp.MustCompile(`(?i)user|chat|messenger|phone|contact`)

// The logs of the tenant API, the webhook and the worker (and the outbox they share), captured at every
// level across a user's life — a link, a verification, a delivery, a failed one, the reads of the user and
// the erasure — name no user: no tenant user id, no messenger user or chat id, no messenger message id, no
// phone number, in any attribute at any level. (The simulator, a development tool, logs to its own logger.)
func TestLogsNameNoUserAcrossLinkVerificationAndDelivery(t *testing.T) {
	t.Parallel()
	var capture syncbuf.Buffer
	logger := slog.New(slog.NewJSONHandler(&capture, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEnvLogging(t, simOptions(slog.New(slog.DiscardHandler)), logger)
	e.webhook(logger)
	opts := e.fastOptions()
	opts.PerChatInterval = 10 * time.Millisecond
	e.start(opts)
	const user, account, phone = "u-q7w3e9r1", int64(7319462851), "+15557391846"

	e.linkThroughWebhook(user, account)
	e.verifyThroughWebhook(user, account, phone)
	delivered, _ := e.send(user, "hello", 5)
	e.waitStatus(delivered, "delivered", 20*time.Second)
	must(t, e.sim.Block(account))
	blocked, _ := e.send(user, "blocked", 5)
	e.waitStatus(blocked, "blocked", 20*time.Second)
	must(t, e.sim.Unblock(account))
	e.settle()
	for _, path := range []string{"/v1/users/" + url.PathEscape(user), "/v1/notifications?user_id=" + url.QueryEscape(user)} {
		if status, m := e.call("GET", path, nil); status != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, status, m)
		}
	}
	if status, m := e.call("DELETE", "/v1/users/"+url.PathEscape(user), nil); status != http.StatusNoContent {
		t.Fatalf("DELETE the user: %d %v", status, m)
	}

	// The values that identify the user. (The platform's message ids are small numbers that any count or
	// offset can equal: the attributes' names tell them.)
	values := regexp.MustCompile(fmt.Sprintf(`(^|\D)(%d|%s|%s)(\D|$)`, account, phone[1:], phone[len(phone)-4:]))
	lines := jsonLines(t, capture.String())
	seen := map[string]bool{}
	for _, line := range lines {
		seen[fmt.Sprint(line["msg"])] = true
		for k, v := range line {
			s := fmt.Sprint(v)
			switch {
			case k == "time" || k == "duration":
			case identifying.MatchString(k):
				t.Errorf("a %s line has the attribute %s=%s: %v", line["level"], k, s, line)
			case strings.Contains(s, user) || values.MatchString(s):
				t.Errorf("a %s line names the user in %s=%s: %v", line["level"], k, s, line)
			}
		}
	}
	// The lines of each component were there to be looked at.
	for _, msg := range []string{"account linked", "phone verified", "delivery attempt ended", "user erased", "request"} {
		if !seen[msg] {
			t.Errorf("no %q line among the %d captured", msg, len(lines))
		}
	}
}
