package devenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/devenv"
	"github.com/heraldhq/herald/internal/dev/pglocal"
	"github.com/heraldhq/herald/internal/egress"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/devtest"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/syncbuf"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// TestDevRunsThePrintedWalkthrough starts `herald dev` on embedded defaults (a private PostgreSQL from the
// local binaries, the embedded broker, the simulator) and runs the walkthrough it prints, as printed, in
// bash: every step pasted as soon as the previous one answered, to a delivered, branded message. Then
// the tools around it: a second herald dev on the same data directory is refused in one sentence,
// --print-env points at the running one, and a restart after a run that was killed (its PostgreSQL left
// running) keeps the demo key and the link.
func TestDevRunsThePrintedWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s (.ci/run installs it): %v", tool, err)
		}
	}
	dir := t.TempDir()
	dev := startDev(t, dir)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	script := "set -euo pipefail\n" + walkthroughOf(t, dev.out.String())
	out, err := exec.CommandContext(ctx, "bash", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("the printed walkthrough failed: %v\n%s\n--- the script:\n%s", err, out, script)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`"ok":\s*true,\s*"update_id":\s*\d+,\s*"webhook":\s*\{\s*"state":\s*"answered"`), // open-link and share-contact waited
		regexp.MustCompile(`"user_id":\s*"alice",\s*"status":\s*"verified"`),                                // read right after the share
		regexp.MustCompile(`"status":\s*"delivered"`),                                                       // the loop waited for the end
		regexp.MustCompile(`(?m)^A message from Demo App\nYour order has shipped$`),
		regexp.MustCompile(`(?m)^A message from Demo Shop\nYour table is booked$`), // step 7: through the shop's own bot
		regexp.MustCompile(`\{"type":"ping","verified":true,"webhook_id":"evt_`),   // step 6: a signed ping arrived
		// The last step: /stop took effect at once, the tenant's send was refused, /resume lifted it.
		regexp.MustCompile(`\{"opted_out":true,"opted_out_categories":\[\],"blocked":false\}`),
		regexp.MustCompile(`"error":\s*"user_opted_out"`),
		regexp.MustCompile(`\{"opted_out":false\}`),
		// The template step: rendered in the messenger's language, the data escaped, delivered as rendered.
		regexp.MustCompile(`\{"status":"delivered","template":\{"name":"order.shipped","version":1,"locale":"en"\}\}`),
		regexp.MustCompile(`(?m)^Order A-1001 has shipped, Alice & Bob$`),
	} {
		if !want.Match(out) {
			t.Errorf("the walkthrough's output has no %s:\n%s", want, out)
		}
	}
	if bytes.Contains(out, []byte("not_found")) {
		t.Errorf("a step answered not_found:\n%s", out)
	}
	// Step 6 again, as a developer who runs the walkthrough twice: the registration answers the endpoint
	// already there (no second endpoint: events would arrive twice, and after five the limit answered
	// 409 and CB=null), and its ping and send work.
	preamble, _, _ := strings.Cut(script, "# 1.")
	_, step6, _ := strings.Cut(script, "# 6.")
	step6, _, _ = strings.Cut(step6, "# 7.")
	again, err := exec.CommandContext(ctx, "bash", "-c", preamble+"# 6."+step6+
		`echo "CB=$CB"; curl -s "${auth[@]}" $HERALD/v1/callbacks | jq -r '"endpoints=\(.data | length) \(.data[0].id)"'`).CombinedOutput()
	if err != nil {
		t.Fatalf("step 6 run again failed: %v\n%s", err, again)
	}
	cb := regexp.MustCompile(`(?m)^CB=(\S+)$`).FindSubmatch(again)
	if len(cb) < 2 || !bytes.Contains(again, []byte("endpoints=1 "+string(cb[1])+"\n")) || bytes.Contains(again, []byte("not_found")) {
		t.Errorf("step 6 run again: want the one endpoint answered again and its ping working:\n%s", again)
	}
	// Step 7: the second tenant's deep link names its own bot; the user's /start and contact in that bot
	// were answered by its webhook; its notification was delivered.
	if !regexp.MustCompile(`(?m)^https://t\.me/demo_shop_bot\?start=[A-Za-z0-9_-]{43}$`).Match(out) {
		t.Errorf("the second tenant's deep link does not name its bot:\n%s", out)
	}
	answered := regexp.MustCompile(`"webhook":\s*\{\s*"state":\s*"answered",\s*"status":\s*200`)
	// Four before the last step, and its /stop and /resume.
	if n := len(answered.FindAll(out, -1)); n != 6 {
		t.Errorf("%d of the six user actions were answered by Herald's webhook:\n%s", n, out)
	}
	// The first send, the second tenant's, and the templated one of the last step — not the verification
	// prompt's status, which step 3 prints as queued or already delivered, as the worker's timing has it.
	sends := regexp.MustCompile(`"prompt":\s*\{[^}]*\}`).ReplaceAll(out, nil)
	if n := len(regexp.MustCompile(`"status":\s*"delivered"`).FindAll(sends, -1)); n != 3 {
		t.Errorf("%d of the three sends were delivered:\n%s", n, out)
	}

	// A second herald dev on the same data directory says why it cannot start, without PostgreSQL's log.
	err = devenv.Run(t.Context(), devenv.Options{HTTPAddr: "127.0.0.1:0", DataDir: dir, Logger: discard, Stdout: io.Discard})
	if !errors.Is(err, devenv.ErrAlreadyRunning) || strings.Contains(err.Error(), "LOG:") {
		t.Errorf("a second herald dev on the same data directory: %v", err)
	}
	// The retention purge runs in herald dev too.
	wait.Until(t, 30*time.Second, "a successful retention run in herald dev", func() bool {
		res, err := http.Get(dev.base + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return strings.Contains(string(b), `herald_retention_runs_total{result="ok"}`)
	})

	// --print-env: the database URL of the running instance (the admin CLI works with it), its API and key.
	var env strings.Builder
	if err := devenv.PrintEnv(&env, dir); err != nil {
		t.Fatal(err)
	}
	dbURL := regexp.MustCompile(`(?m)^export HERALD_DATABASE_URL='([^']+)'$`).FindStringSubmatch(env.String())
	if dbURL == nil || !strings.Contains(env.String(), "export HERALD='"+dev.base+"'") || !strings.Contains(env.String(), "export KEY='"+dev.key+"'") ||
		!regexp.MustCompile(`(?m)^export HERALD_BOT_TOKEN_KEY='[A-Za-z0-9+/=]{44}'$`).MatchString(env.String()) {
		t.Fatalf("--print-env printed:\n%s", env.String())
	}
	if !strings.Contains(dev.out.String(), dbURL[1]) {
		t.Errorf("the walkthrough does not show the database URL %s", dbURL[1])
	}
	st, err := store.Open(t.Context(), dbURL[1], 2)
	if err != nil {
		t.Fatalf("the printed database URL: %v", err)
	}
	if tenants, err := st.ListTenants(t.Context()); err != nil || len(tenants) != 2 || tenants[0].ID != "demo" || tenants[0].BotID != 0 ||
		tenants[1].ID != "shop" || tenants[1].BotID != shopBotID {
		t.Errorf("the printed database URL reaches %+v, %v; want the demo tenant, and shop with its bot %d", tenants, err, shopBotID)
	}
	if l, ok := fixture.New(st).LinkOf(t, "shop", "alice"); !ok || int64(l.Bot) != int64(shopBotID) {
		t.Errorf("shop's alice is linked through bot %d (linked: %v), want its own bot", l.Bot, ok)
	}
	st.Close()
	shopKey := shopKeyOf(t, dev.out.String())
	dev.stop()
	if err := devenv.PrintEnv(io.Discard, dir); err == nil || !strings.Contains(err.Error(), "no herald dev is running") {
		t.Errorf("--print-env without a running herald dev: %v", err)
	}

	// A run killed with SIGKILL leaves its PostgreSQL running: the next run takes over the directory.
	orphan, err := pglocal.Start(t.Context(), pglocal.Options{Dir: filepath.Join(dir, "postgres")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orphan.Stop() })
	dev2 := startDev(t, dir)
	defer dev2.stop()
	if dev2.key != dev.key {
		t.Errorf("the demo key changed across restarts")
	}
	if got := dev2.do(t, "GET", "/v1/phone-verification/status/alice", "")["status"]; got != "verified" {
		t.Errorf("after a restart alice reads %v", got)
	}
	// The second tenant keeps its key and its bot (the same id: the link made through it stands).
	if got := shopKeyOf(t, dev2.out.String()); got != shopKey {
		t.Errorf("the second tenant's key changed across restarts")
	}
	shop := *dev2
	shop.key = shopKey
	if got := shop.do(t, "GET", "/v1/phone-verification/status/alice", "")["status"]; got != "verified" {
		t.Errorf("after a restart the second tenant's alice reads %v", got)
	}
	if link := shop.do(t, "POST", "/v1/link-token", `{"user_id":"bob"}`)["deep_link"].(string); !strings.HasPrefix(link, "https://t.me/demo_shop_bot?start=") {
		t.Errorf("after a restart the second tenant deep-links to %s", link)
	}
	// Without the lock's knowledge, a running server is refused in one sentence, not with its log.
	if _, err := pglocal.Start(t.Context(), pglocal.Options{Dir: filepath.Join(dir, "postgres")}); !errors.Is(err, pglocal.ErrRunning) || strings.Contains(err.Error(), "LOG:") {
		t.Errorf("starting on a running server: %v", err)
	}
}

// shopBotID is the second demo tenant's bot in the simulator, kept across runs.
const shopBotID = 7_000_000_000

// shopKeyOf reads the second demo tenant's key from the printed walkthrough.
func shopKeyOf(t *testing.T, printed string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  export SHOP_KEY=(hk_[A-Za-z0-9_-]+)$`).FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("the walkthrough names no second tenant's key:\n%s", printed)
	}
	return m[1]
}

// walkthroughOf extracts the commands of the printed walkthrough: the indented lines from the export on.
func walkthroughOf(t *testing.T, printed string) string {
	t.Helper()
	_, rest, ok := strings.Cut(printed, "\n  export HERALD=")
	if !ok {
		t.Fatalf("no walkthrough in:\n%s", printed)
	}
	first, rest, _ := strings.Cut(rest, "\n")
	var b strings.Builder
	b.WriteString("export HERALD=" + first + "\n")
	for _, line := range strings.Split(rest, "\n") {
		if line != "" && !strings.HasPrefix(line, "  ") {
			break
		}
		b.WriteString(strings.TrimPrefix(line, "  ") + "\n")
	}
	return b.String()
}

var discard = slog.New(slog.DiscardHandler)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Restarting verification for a user who blocked the bot answers 202 as before (Herald cannot know before
// it tries), and the verification status says why the prompt never arrived.
func TestVerificationStatusShowsAPromptTheUserNeverGot(t *testing.T) {
	t.Parallel()
	d := startDevWith(t, devenv.Options{DataDir: t.TempDir(), DatabaseURL: pgtest.NewDatabase(t)})
	defer d.stop()
	sim := func(path, body string) {
		t.Helper()
		res, err := http.Post(d.base+path, "application/json", strings.NewReader(body))
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("POST %s: %v %v", path, res, err)
		}
		res.Body.Close()
	}
	link := d.do(t, "POST", "/v1/link-token", `{"user_id":"bob"}`)["deep_link"].(string)
	sim("/sim/users/2002/open-link", `{"url":"`+link+`"}`)
	d.do(t, "POST", "/v1/phone-verification/start", `{"user_id":"bob"}`)
	sim("/sim/users/2002/share-contact", `{"phone_number":"+15550002002"}`)
	if v := d.do(t, "GET", "/v1/phone-verification/status/bob", ""); v["status"] != "verified" || v["prompt"] == nil {
		t.Fatalf("after the share: %v", v)
	}

	sim("/sim/users/2002/block", "")
	if got := d.do(t, "POST", "/v1/phone-verification/start", `{"user_id":"bob"}`)["status"]; got != "pending" {
		t.Fatalf("the restart answered %v", got)
	}
	var v map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v = d.do(t, "GET", "/v1/phone-verification/status/bob", "")
		if p, _ := v["prompt"].(map[string]any); p != nil && p["status"] != "queued" && p["status"] != "delivering" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prompt's delivery never ended: %v", v)
		}
	}
	p := v["prompt"].(map[string]any)
	if v["status"] != "pending" || p["status"] != "blocked" || p["last_error_code"] != float64(403) ||
		!strings.Contains(fmt.Sprint(p["last_error_message"]), "blocked by the user") {
		t.Errorf("a prompt to a user who blocked the bot reads %v", v)
	}
}

// dev is a running herald dev.
type dev struct {
	key, base string
	out       *syncbuf.Buffer
	stop      func()
}

// do calls the API with the demo key and decodes a JSON object; any status over 299 fails the test.
func (d *dev) do(t *testing.T, method, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, d.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+d.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || res.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return m
}

func startDev(t *testing.T, dir string) *dev {
	t.Helper()
	return startDevWith(t, devenv.Options{DataDir: dir})
}

// startDevWith starts herald dev with o on a free loopback port (unless o names one), the embedded broker
// and the simulator.
func startDevWith(t *testing.T, o devenv.Options) *dev {
	t.Helper()
	o.TopicPrefix, o.DeepLinkBase, o.RateLimit, o.Logger = "herald", "https://t.me", 30, discard
	// As herald dev's configuration does: its callbacks go to the simulator's receiver on 127.0.0.1.
	o.CallbackPolicy = egress.Policy{AllowInsecure: true, AllowPrivate: true}
	d := devtest.Start(t, o, 40*time.Second)
	return &dev{key: d.Key, base: d.Base, out: d.Out, stop: d.Stop}
}

// Callbacks in herald dev: with the simulator's receiver registered first, every event of the tour arrives
// once, signed with the endpoint's secret; after a restart on the same data directory (and address: the
// endpoint's URL names it) the callback key was kept, so the endpoint's secret still opens and signs a ping.
func TestDevCallbacksArriveSignedAndSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir)
	sim := func(base, path, body string) map[string]any {
		t.Helper()
		var res *http.Response
		var err error
		if body == "" {
			res, err = http.Get(base + path)
		} else {
			res, err = http.Post(base+path, "application/json", strings.NewReader(body))
		}
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%s: %v %v", path, res, err)
		}
		defer res.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	endpoint := d.do(t, "POST", "/v1/callbacks", `{"url":"`+d.base+`/sim/callbacks"}`)["id"].(string)
	link := d.do(t, "POST", "/v1/link-token", `{"user_id":"alice"}`)["deep_link"].(string)
	sim(d.base, "/sim/users/1001/open-link", `{"url":"`+link+`"}`)
	d.do(t, "POST", "/v1/phone-verification/start", `{"user_id":"alice"}`)
	sim(d.base, "/sim/users/1001/share-contact", `{"phone_number":"15551234567"}`)
	id := d.do(t, "POST", "/v1/send", `{"user_id":"alice","message":"Your order has shipped"}`)["tracking_id"].(string)
	wait.Until(t, 15*time.Second, "delivery", func() bool { return d.do(t, "GET", "/v1/status/"+id, "")["status"] == "delivered" })
	callbacks := func(base string) map[string]int {
		verified := map[string]int{}
		for _, c := range sim(base, "/sim/callbacks", "")["callbacks"].([]any) {
			m := c.(map[string]any)
			if m["verified"] != true {
				t.Errorf("a callback did not verify: %v", m)
			}
			verified[m["type"].(string)]++
		}
		return verified
	}
	wait.Until(t, 15*time.Second, "the callbacks", func() bool { return len(callbacks(d.base)) == 3 })
	if got := callbacks(d.base); got["user.linked"] != 1 || got["user.verified"] != 1 || got["notification.delivered"] != 1 {
		t.Errorf("callbacks received: %v", got)
	}
	d.stop()

	d2 := startDevWith(t, devenv.Options{DataDir: dir, HTTPAddr: strings.TrimPrefix(d.base, "http://")})
	defer d2.stop()
	req, _ := http.NewRequest("POST", d2.base+"/v1/callbacks/"+endpoint+"/test", nil)
	req.Header.Set("Authorization", "Bearer "+d2.key)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("test ping: %v %v", res, err)
	}
	wait.Until(t, 15*time.Second, "the ping", func() bool { return callbacks(d2.base)["ping"] == 1 })
}
