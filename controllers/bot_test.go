package controllers_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/rbactest"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// platform is the messaging platform the operator registers bots with: Herald's simulator, which plays every
// token as a bot, behind a thin proxy that counts the Bot API calls and can refuse one bot's setWebhook or
// make the whole platform unreachable (the simulator itself injects faults into sendMessage only).
type platform struct {
	sim *sim.Server
	api *httptest.Server
	// hooks stands for the webhook component at HERALD_PUBLIC_URL: it records what the platform posts.
	hooks *receiver
	key   *signing.Key
	calls atomic.Int64

	mu            sync.Mutex
	refuseWebhook map[int64]bool
	down          bool
	// hold: the answer to the first setWebhook of bot hold.id waits until a second setWebhook of that bot
	// was answered, or holdFor passed: two registrations of one bot that overlap then end in the order
	// that loses the first's secret, unless the operator makes them one after the other.
	hold struct {
		id              int64
		first, answered chan struct{}
		setWebhooks     atomic.Int64
	}
}

const holdFor = 3 * time.Second

func newPlatform(t *testing.T) *platform {
	t.Helper()
	key, err := signing.ParseKey(signing.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	p := &platform{sim: sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler)}), key: key, refuseWebhook: map[int64]bool{}}
	p.api = httptest.NewServer(http.HandlerFunc(p.serve))
	p.hooks = newReceiver(t)
	t.Cleanup(func() {
		p.api.Close()
		_ = p.sim.Close()
	})
	return p
}

func (p *platform) serve(w http.ResponseWriter, r *http.Request) {
	p.calls.Add(1)
	rest, _ := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, _ := strings.Cut(rest, "/")
	head, _, _ := strings.Cut(token, ":")
	id, _ := strconv.ParseInt(head, 10, 64)
	p.mu.Lock()
	down, refuse := p.down, p.refuseWebhook[id]
	p.mu.Unlock()
	switch {
	case down:
		http.Error(w, "upstream unavailable", http.StatusBadGateway)
	case refuse && strings.EqualFold(method, "setWebhook"):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"ok":false,"error_code":400,"description":"Bad Request: bad webhook: Failed to resolve host: Name or service not known"}`))
	case id != 0 && id == p.hold.id && strings.EqualFold(method, "setWebhook"):
		p.serveHeld(w, r)
	default:
		p.sim.ServeHTTP(w, r)
	}
}

// holdWebhooks makes the first setWebhook of bot id wait for a second one (see platform.hold). Call it
// before the operator runs.
func (p *platform) holdWebhooks(id int64) {
	p.hold.id, p.hold.first, p.hold.answered = id, make(chan struct{}), make(chan struct{})
}

func (p *platform) serveHeld(w http.ResponseWriter, r *http.Request) {
	if p.hold.setWebhooks.Add(1) != 1 {
		p.sim.ServeHTTP(w, r)
		if p.hold.setWebhooks.Load() == 2 {
			close(p.hold.answered)
		}
		return
	}
	// The platform takes the first webhook (and its secret) now, and answers it late.
	rec := httptest.NewRecorder()
	p.sim.ServeHTTP(rec, r)
	select {
	case <-p.hold.answered:
	case <-time.After(holdFor):
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (p *platform) set(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// options configure the operator to register bots with this platform.
func (p *platform) options() operator.Options {
	return operator.Options{MessengerAPIURL: p.api.URL, PublicURL: p.hooks.URL, BotTokenKey: p.key}
}

// bot creates a bot on the platform and returns its token.
func (p *platform) bot(t *testing.T, id int64, username string) string {
	t.Helper()
	token := strconv.FormatInt(id, 10) + ":AAH" + strings.Repeat(username[:3], 4) + "-Zq8Lk2Vx9Rt4Wm7Np3Hs6Jd1"
	if _, err := p.sim.CreateBot(sim.BotConfig{Token: token, Username: username}); err != nil {
		t.Fatal(err)
	}
	return token
}

// newToken revokes a bot's token on the platform, as @BotFather does, and returns its new one.
func (p *platform) newToken(t *testing.T, id int64) string {
	t.Helper()
	info, err := p.sim.RevokeToken(strconv.FormatInt(id, 10), "")
	if err != nil {
		t.Fatal(err)
	}
	return info.Token
}

func (p *platform) handle(t *testing.T, id int64) *sim.BotHandle {
	t.Helper()
	h, ok := p.sim.BotHandle(strconv.FormatInt(id, 10))
	if !ok {
		t.Fatalf("the platform has no bot %d", id)
	}
	return h
}

// webhookSecret makes a user write to the bot and returns the secret the platform posted the update with,
// to the path it posted it to.
func (p *platform) webhookSecret(t *testing.T, id int64) (path, secret string) {
	t.Helper()
	h := p.handle(t, id)
	if _, err := p.sim.EnsureUser(sim.User{ID: 7, FirstName: "Ann"}); err != nil {
		t.Fatal(err)
	}
	update, err := h.SendText(7, "hello")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if out := h.WaitWebhook(ctx, update); out.State != sim.WebhookAnswered {
		t.Fatalf("the update was not delivered to the webhook: %+v", out)
	}
	calls := p.hooks.received()
	last := calls[len(calls)-1]
	return last.path, last.secret
}

// receiver stands for Herald's webhook component: it records the path and the secret of every update the
// platform posts.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	calls []hookCall
}

type hookCall struct{ path, secret string }

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.calls = append(rc.calls, hookCall{r.URL.Path, r.Header.Get("X-Telegram-Bot-Api-Secret-Token")})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []hookCall {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.calls)
}

// tokenSecret writes a Secret of the test namespace holding data (created, or replaced).
func (h *harness) tokenSecret(name string, data map[string]string) {
	h.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	wait.For(h.t, 10*time.Second, "write Secret "+name, func() error {
		err := k8s.Get(h.ctx, client.ObjectKeyFromObject(s), s)
		if isNotFound(err) {
			s.StringData = data
			return k8s.Create(h.ctx, s)
		}
		if err != nil {
			return err
		}
		s.Data, s.StringData = nil, data
		return k8s.Update(h.ctx, s)
	})
}

// withBot gives a Tenant spec.bot, its token in key "token" of Secret secret of the test namespace.
func withBot(h *harness, secret string, mutate ...func(*notifyv1alpha1.TenantBot)) func(*notifyv1alpha1.Tenant) {
	return func(tn *notifyv1alpha1.Tenant) {
		tn.Spec.Bot = &notifyv1alpha1.TenantBot{TokenSecretRef: notifyv1alpha1.BotTokenSecretReference{Namespace: h.ns, Name: secret, Key: "token"}}
		for _, m := range mutate {
			m(tn.Spec.Bot)
		}
	}
}

// waitBot waits until the Tenant's BotReady condition has status and reason for its current generation,
// with a message containing text, and returns the Tenant.
func (h *harness) waitBot(name string, status metav1.ConditionStatus, reason, text string) *notifyv1alpha1.Tenant {
	h.t.Helper()
	var got *notifyv1alpha1.Tenant
	wait.For(h.t, 15*time.Second, "Tenant "+name+" BotReady="+string(status)+"/"+reason, func() error {
		got = &notifyv1alpha1.Tenant{}
		if err := k8s.Get(h.ctx, client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		if err := condition(got.Status.Conditions, got.Generation, notifyv1alpha1.ConditionBotReady, status, reason); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, notifyv1alpha1.ConditionBotReady); !strings.Contains(c.Message, text) {
			return fmt.Errorf("BotReady's message %q does not say %q", c.Message, text)
		}
		return nil
	})
	return got
}

// botRow is a row of bots, as a test reads it.
type botRow struct {
	Username      string
	TokenSealed   []byte
	TokenDigest   []byte
	WebhookURL    *string
	SecretDigest  []byte
	RateLimit     *int
	PaidBroadcast bool
	State         string
	Xmin          string
}

func (h *harness) botRow(id int64) (botRow, error) {
	var r botRow
	err := h.st.Pool().QueryRow(h.ctx, `SELECT username, token_sealed, token_digest, webhook_url, webhook_secret_digest, rate_limit,
		paid_broadcast, state, xmin::text FROM bots WHERE id = $1`, id).
		Scan(&r.Username, &r.TokenSealed, &r.TokenDigest, &r.WebhookURL, &r.SecretDigest, &r.RateLimit, &r.PaidBroadcast, &r.State, &r.Xmin)
	return r, err
}

// tenantBot is the bot the tenant sends through in the store, 0 for the shared bot.
func (h *harness) tenantBot(tenant string) int64 {
	h.t.Helper()
	tn, err := h.st.GetTenant(h.ctx, tenant)
	if err != nil {
		h.t.Fatalf("reading the bot of tenant %s: %v", tenant, err)
	}
	return int64(tn.BotID)
}

// linkThrough makes user a verified user of tenant linked to chat through bot id.
func (h *harness) linkThrough(tenant, user string, id, chat int64) {
	h.t.Helper()
	h.fx.VerifiedUser(h.t, tenant, user, chat)
	h.fx.User(h.t, tenant, user, fixture.LinkedTo(chat), fixture.LinkedThrough(notification.BotID(id)))
}

func (h *harness) links(tenant string) int {
	h.t.Helper()
	n := 0
	for _, l := range h.fx.Links(h.t) {
		if l.TenantID == tenant {
			n++
		}
	}
	return n
}

// noSecrets checks that none of secrets is in the Tenant's status, in an event about it, or in the
// operator's log.
func (h *harness) noSecrets(tn *notifyv1alpha1.Tenant, secrets ...string) {
	h.t.Helper()
	status, err := json.Marshal(h.getTenant(tn.Name).Status)
	if err != nil {
		h.t.Fatal(err)
	}
	var notes []string
	for _, e := range h.events(tn) {
		notes = append(notes, e.Note)
	}
	for i, s := range secrets {
		switch {
		case strings.Contains(string(status), s):
			h.t.Errorf("secret %d is in the Tenant's status: %s", i, status)
		case strings.Contains(strings.Join(notes, "\n"), s):
			h.t.Errorf("secret %d is in an event: %q", i, notes)
		case strings.Contains(h.logs.String(), s):
			h.t.Errorf("secret %d is in the operator's log", i)
		}
	}
}

// A Tenant with spec.bot: the operator checks the token, registers the bot's webhook at
// HERALD_PUBLIC_URL/messenger/webhook/{id} with a secret of its own, records the bot (token sealed) and makes
// the tenant send through it; status.bot names it, BotReady is True. The platform then posts the bot's
// updates there with the secret whose digest is recorded. Neither the token nor the secret is in the
// status, an event or the log. A Tenant without spec.bot shows nothing of bots.
func TestATenantsOwnBotIsRegisteredAndItsWebhookSet(t *testing.T) {
	p := newPlatform(t)
	h := start(t, p.options())
	token := p.bot(t, 5001, "acme_bot")
	h.tokenSecret("acme-bot", map[string]string{"token": token + "\n"}) // as `kubectl create secret --from-file` leaves it
	tn := h.tenant("acme", withBot(h, "acme-bot", func(b *notifyv1alpha1.TenantBot) { b.RateLimit, b.PaidBroadcast = ptr.To(int32(50)), true }))
	plain := h.tenant("plain")

	got := h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot (bot 5001) is registered")
	if got.Status.Bot == nil || *got.Status.Bot != (notifyv1alpha1.TenantBotStatus{ID: "5001", Username: "acme_bot"}) {
		t.Errorf("status.bot = %+v", got.Status.Bot)
	}
	if err := condition(got.Status.Conditions, got.Generation, notifyv1alpha1.ConditionReady, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced); err != nil {
		t.Error(err)
	}
	hook := p.hooks.URL + "/messenger/webhook/5001"
	row, err := h.botRow(5001)
	digest := sha256.Sum256([]byte(token))
	if err != nil || row.Username != "acme_bot" || ptr.Deref(row.RateLimit, 0) != 50 || !row.PaidBroadcast || row.State != "ready" ||
		ptr.Deref(row.WebhookURL, "") != hook || string(row.TokenDigest) != string(digest[:]) || len(row.SecretDigest) != 32 {
		t.Fatalf("the bot's row: %+v (%v)", row, err)
	}
	if opened, err := bot.OpenToken(p.key, 5001, row.TokenSealed); err != nil || opened != token {
		t.Errorf("the sealed token does not open to the token: %v", err)
	}
	if id := h.tenantBot(tn.Name); id != 5001 {
		t.Errorf("the tenant sends through bot %d, want 5001", id)
	}
	info := p.handle(t, 5001).WebhookInfo()
	if info.URL != hook || !slices.Equal(info.AllowedUpdates, bot.AllowedUpdates) {
		t.Errorf("the platform's webhook of the bot: %+v", info)
	}
	path, secret := p.webhookSecret(t, 5001)
	if sum := sha256.Sum256([]byte(secret)); path != "/messenger/webhook/5001" || len(secret) < 32 || string(sum[:]) != string(row.SecretDigest) {
		t.Errorf("the platform posted to %s with a secret (%d characters) whose digest is not the recorded one", path, len(secret))
	}
	h.waitEvent(got, corev1.EventTypeNormal, "BotRegistered", "registered @acme_bot (bot 5001): its updates go to "+hook)
	h.waitEvent(got, corev1.EventTypeNormal, "BotChanged", "the tenant sends through @acme_bot (bot 5001) instead of the shared bot")
	h.noSecrets(got, token, strings.TrimPrefix(token, "5001:"), secret)

	other := h.waitTenant(plain.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	if other.Status.Bot != nil || meta.FindStatusCondition(other.Status.Conditions, notifyv1alpha1.ConditionBotReady) != nil || h.tenantBot(plain.Name) != 0 {
		t.Errorf("a Tenant without spec.bot: status.bot %+v, conditions %+v", other.Status.Bot, other.Status.Conditions)
	}
}

// A token the platform refuses (getMe: 401) makes BotReady False, reason TokenInvalid, with a Warning event;
// nothing is recorded and the tenant stays on the shared bot. A value that is no bot token at all is
// refused without asking the platform. Neither value is in the status, an event or the log. The right token
// put into the Secret registers the bot: the Secret is watched (the resync is an hour away).
func TestABotTokenThePlatformRefusesIsReported(t *testing.T) {
	p := newPlatform(t)
	opts := p.options()
	opts.ResyncPeriod = time.Hour
	h := start(t, opts)
	right := p.bot(t, 5002, "acme_bot")
	wrong := "5002:AAHthis-is-not-the-tokenXYZ"
	h.tokenSecret("acme-bot", map[string]string{"token": wrong})
	tn := h.tenant("acme", withBot(h, "acme-bot"))

	got := h.waitBot(tn.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonTokenInvalid, "getMe answered 401")
	h.waitEvent(got, corev1.EventTypeWarning, notifyv1alpha1.ReasonTokenInvalid, `the token in key "token" of Secret `+h.ns+"/acme-bot")
	if _, err := h.botRow(5002); !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("a bot row for a refused token (%v)", err)
	}
	if got.Status.Bot != nil || h.tenantBot(tn.Name) != 0 {
		t.Errorf("the tenant left the shared bot for a refused token: %+v", got.Status.Bot)
	}

	// A reconcile already queued (the Secret's watch starting, the status write) asks getMe again with the
	// refused token: let it pass before counting.
	waitIdle(t)
	calls := p.calls.Load()
	h.tokenSecret("acme-bot", map[string]string{"token": "hunter2 is my password"})
	got = h.waitBot(tn.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonTokenInvalid, "does not hold a bot token")
	if n := p.calls.Load() - calls; n != 0 {
		t.Errorf("%d Bot API calls for a value that is no token", n)
	}
	h.noSecrets(got, wrong, "this-is-not-the-token", "hunter2")

	h.tokenSecret("acme-bot", map[string]string{"token": right})
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	if id := h.tenantBot(tn.Name); id != 5002 {
		t.Errorf("the tenant sends through bot %d, want 5002", id)
	}
}

// setWebhook refused: BotReady False, reason WebhookFailed, naming the bot and the URL, with a Warning
// event; nothing recorded. Once the platform accepts it, the next resync registers the bot.
func TestARefusedWebhookIsReported(t *testing.T) {
	p := newPlatform(t)
	h := start(t, p.options())
	token := p.bot(t, 5003, "acme_bot")
	p.set(func() { p.refuseWebhook[5003] = true })
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	tn := h.tenant("acme", withBot(h, "acme-bot"))

	got := h.waitBot(tn.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonWebhookFailed,
		"@acme_bot (bot 5003): the messaging platform refused the bot's webhook: setWebhook answered 400 Bad Request: bad webhook")
	h.waitEvent(got, corev1.EventTypeWarning, notifyv1alpha1.ReasonWebhookFailed, p.hooks.URL+"/messenger/webhook/5003")
	if _, err := h.botRow(5003); !errors.Is(err, pgx.ErrNoRows) || h.tenantBot(tn.Name) != 0 {
		t.Errorf("a bot recorded, or the tenant moved to it, though its webhook was refused (%v)", err)
	}
	h.noSecrets(got, token)

	p.set(func() { p.refuseWebhook[5003] = false })
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
}

// A Secret that does not exist, or lacks the key: BotReady False, reason SecretNotFound, with a Warning
// event. The Secret's namespace is watched: creating the Secret, then adding the key, wakes the Tenant at
// once (the resync is an hour away).
func TestAMissingSecretOrKeyIsReportedAndWatched(t *testing.T) {
	p := newPlatform(t)
	opts := p.options()
	opts.ResyncPeriod = time.Hour
	h := start(t, opts)
	token := p.bot(t, 5004, "acme_bot")
	tn := h.tenant("acme", withBot(h, "acme-bot"))

	got := h.waitBot(tn.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonSecretNotFound, "Secret "+h.ns+"/acme-bot does not exist")
	h.waitEvent(got, corev1.EventTypeWarning, notifyv1alpha1.ReasonSecretNotFound, "does not exist")
	h.tokenSecret("acme-bot", map[string]string{"other": token})
	h.waitBot(tn.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonSecretNotFound, `Secret `+h.ns+`/acme-bot has no key "token"`)
	h.tokenSecret("acme-bot", map[string]string{"other": token, "token": token})
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
}

// Without HERALD_BOT_TOKEN_KEY and HERALD_PUBLIC_URL the operator registers no bot: BotReady False, reason
// NotConfigured, naming the settings, with a Warning event. The tenant itself is in the key store.
func TestBotsNeedTheOperatorConfigured(t *testing.T) {
	h := start(t, operator.Options{})
	h.tokenSecret("acme-bot", map[string]string{"token": "5005:AAHtoken-of-a-bot"})
	tn := h.tenant("acme", withBot(h, "acme-bot"))
	got := h.waitBot(tn.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonNotConfigured, "set HERALD_BOT_TOKEN_KEY and HERALD_PUBLIC_URL")
	h.waitEvent(got, corev1.EventTypeWarning, notifyv1alpha1.ReasonNotConfigured, "the operator cannot register bots")
	h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
}

// A new token for the same bot (revoked with @BotFather, the new one put into the Secret): the bot is
// registered again, its row has the new token and a new webhook secret, and the tenant keeps its links.
func TestANewTokenForTheSameBotKeepsTheLinks(t *testing.T) {
	p := newPlatform(t)
	h := start(t, p.options())
	token := p.bot(t, 5001, "acme_bot")
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	tn := h.tenant("acme", withBot(h, "acme-bot"))
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	h.linkThrough(tn.Name, "ann", 5001, 7)
	before, err := h.botRow(5001)
	if err != nil {
		t.Fatal(err)
	}

	renewed := p.newToken(t, 5001)
	h.tokenSecret("acme-bot", map[string]string{"token": renewed})
	digest := sha256.Sum256([]byte(renewed))
	wait.For(t, 15*time.Second, "the bot recorded with its new token", func() error {
		row, err := h.botRow(5001)
		if err != nil || string(row.TokenDigest) != string(digest[:]) || string(row.SecretDigest) == string(before.SecretDigest) || row.State != "ready" {
			return fmt.Errorf("row %+v (%v)", row, err)
		}
		return nil
	})
	if n := h.links(tn.Name); n != 1 || h.tenantBot(tn.Name) != 5001 {
		t.Errorf("%d links after a new token for the same bot, want 1; the tenant's bot %d", n, h.tenantBot(tn.Name))
	}
	got := h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	h.noSecrets(got, token, renewed)
}

// The token of another bot in the Secret: the tenant sends through the new bot; the links made through the
// old one end, with the notifications waiting for those users (unlinked, code 1103), and a Warning event
// says so; the old bot, which no tenant sends through any more, loses its webhook.
func TestATokenOfAnotherBotEndsTheOldBotsLinks(t *testing.T) {
	p := newPlatform(t)
	h := start(t, p.options())
	first := p.bot(t, 5001, "acme_bot")
	second := p.bot(t, 5006, "acme_news_bot")
	h.tokenSecret("acme-bot", map[string]string{"token": first})
	tn := h.tenant("acme", withBot(h, "acme-bot"))
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	h.linkThrough(tn.Name, "ann", 5001, 7)
	waiting := h.fx.Notification(t, fixture.For(tn.Name, "ann"))
	h.exec(`UPDATE notifications SET bot_id = 5001 WHERE tracking_id = $1`, waiting)

	h.tokenSecret("acme-bot", map[string]string{"token": second})
	got := h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_news_bot (bot 5006)")
	if got.Status.Bot == nil || got.Status.Bot.ID != "5006" || h.tenantBot(tn.Name) != 5006 {
		t.Errorf("status.bot %+v, the tenant's bot %d; want 5006", got.Status.Bot, h.tenantBot(tn.Name))
	}
	if n := h.links(tn.Name); n != 0 {
		t.Errorf("%d links made through the old bot remain", n)
	}
	if r := h.fx.NotificationRow(t, waiting); r.Status != string(notification.Unlinked) || r.ErrCode != notification.CodeBotChanged {
		t.Errorf("the waiting notification is %s/%d, want unlinked/%d", r.Status, r.ErrCode, notification.CodeBotChanged)
	}
	h.waitEvent(got, corev1.EventTypeWarning, "BotChanged",
		"the tenant sends through @acme_news_bot (bot 5006) instead of bot 5001: 1 link(s) made through the previous bot ended, and 1 notification(s)")
	wait.For(t, 10*time.Second, "the old bot's webhook deleted", func() error {
		if u := p.handle(t, 5001).WebhookInfo().URL; u != "" {
			return fmt.Errorf("its webhook is %s", u)
		}
		return nil
	})
}

// Removing spec.bot takes the tenant back to the shared bot: the links made through its bot end, status.bot
// and BotReady go. Two tenants may share a bot: its webhook stays while one of them sends through it, and
// goes with the last.
func TestRemovingTheBotTakesTheTenantBackToTheSharedBot(t *testing.T) {
	p := newPlatform(t)
	h := start(t, p.options())
	token := p.bot(t, 5001, "acme_bot")
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	acme := h.tenant("acme", withBot(h, "acme-bot"))
	beta := h.tenant("beta", withBot(h, "acme-bot"))
	h.waitBot(acme.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	h.waitBot(beta.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	h.linkThrough(acme.Name, "ann", 5001, 7)
	hook := p.handle(t, 5001).WebhookInfo().URL

	update(h, h.getTenant(acme.Name), func(tn *notifyv1alpha1.Tenant) { tn.Spec.Bot = nil })
	wait.For(t, 10*time.Second, "acme back on the shared bot", func() error {
		got := h.getTenant(acme.Name)
		if got.Status.ObservedGeneration != got.Generation || got.Status.Bot != nil ||
			meta.FindStatusCondition(got.Status.Conditions, notifyv1alpha1.ConditionBotReady) != nil || h.tenantBot(acme.Name) != 0 {
			return fmt.Errorf("status.bot %+v, conditions %+v, the tenant's bot %d", got.Status.Bot, got.Status.Conditions, h.tenantBot(acme.Name))
		}
		return nil
	})
	if n := h.links(acme.Name); n != 0 {
		t.Errorf("%d links made through the removed bot remain", n)
	}
	h.waitEvent(h.getTenant(acme.Name), corev1.EventTypeWarning, "BotChanged", "the tenant sends through the shared bot instead of bot 5001: 1 link(s)")
	if u := p.handle(t, 5001).WebhookInfo().URL; u != hook {
		t.Errorf("the bot's webhook is %q while beta still sends through it, want %s", u, hook)
	}

	update(h, h.getTenant(beta.Name), func(tn *notifyv1alpha1.Tenant) { tn.Spec.Bot = nil })
	wait.For(t, 10*time.Second, "the bot's webhook deleted with its last tenant", func() error {
		if u := p.handle(t, 5001).WebhookInfo().URL; u != "" || h.tenantBot(beta.Name) != 0 {
			return fmt.Errorf("its webhook is %q; beta's bot %d", u, h.tenantBot(beta.Name))
		}
		return nil
	})

	// Taken up again with the same token: its webhook is registered anew.
	update(h, h.getTenant(beta.Name), withBot(h, "acme-bot"))
	h.waitBot(beta.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	if u := p.handle(t, 5001).WebhookInfo().URL; u != hook {
		t.Errorf("the bot taken up again has the webhook %q, want %s", u, hook)
	}
}

// Two Tenants naming the same token, reconciled at once, share its bot: the operator registers it for one
// of them and the other finds it registered, so the secret the platform posts the bot's updates with is
// the one recorded (two overlapping registrations would each give the platform a secret of their own, and
// the store could keep the one the platform no longer has: every update refused).
func TestTwoTenantsNamingOneTokenRegisterItOnce(t *testing.T) {
	p := newPlatform(t)
	p.holdWebhooks(5001)
	h := start(t, p.options())
	token := p.bot(t, 5001, "acme_bot")
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	acme := h.tenant("acme", withBot(h, "acme-bot"))
	beta := h.tenant("beta", withBot(h, "acme-bot"))
	h.waitBot(acme.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	h.waitBot(beta.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")

	if n := p.hold.setWebhooks.Load(); n != 1 {
		t.Errorf("%d setWebhook calls for one bot, want 1", n)
	}
	row, err := h.botRow(5001)
	if err != nil {
		t.Fatal(err)
	}
	_, secret := p.webhookSecret(t, 5001)
	if sum := sha256.Sum256([]byte(secret)); string(sum[:]) != string(row.SecretDigest) {
		t.Error("the platform posts the bot's updates with a secret whose digest is not the recorded one")
	}
	if a, b := h.tenantBot(acme.Name), h.tenantBot(beta.Name); a != 5001 || b != 5001 {
		t.Errorf("the tenants send through bots %d and %d, want 5001", a, b)
	}
}

// A bot's settings belong to the bot (issue 35): two Tenants naming one token with different rateLimit or
// paidBroadcast used to register it again at every reconcile, each with its own settings (a new webhook
// secret each time, the paid flag flipping). Now the second is reported — BotReady False, reason
// ConflictingSettings, a Warning event — and stays where it was; nothing is registered again and the
// bot keeps the settings it has. Once they agree it takes the bot up without a call. A change of settings
// every Tenant of the bot agrees on is recorded without a call to the platform: only a new token or
// URL registers the bot.
func TestConflictingBotSettingsAreReportedAndNeverRegisterTheBotAgain(t *testing.T) {
	const resync = time.Second
	p := newPlatform(t)
	opts := p.options()
	opts.ResyncPeriod = resync
	h := start(t, opts)
	token := p.bot(t, 5001, "acme_bot")
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	rate := func(n int32, paid bool) func(*notifyv1alpha1.TenantBot) {
		return func(b *notifyv1alpha1.TenantBot) { b.RateLimit, b.PaidBroadcast = ptr.To(n), paid }
	}
	acme := h.tenant("acme", withBot(h, "acme-bot", rate(30, false)))
	h.waitBot(acme.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	registered, err := h.botRow(5001)
	if err != nil {
		t.Fatal(err)
	}
	calls := p.calls.Load()

	beta := h.tenant("beta", withBot(h, "acme-bot", rate(50, true)))
	got := h.waitBot(beta.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonConflictingSettings, acme.Name)
	h.waitEvent(got, corev1.EventTypeWarning, notifyv1alpha1.ReasonConflictingSettings, "rateLimit 30")
	time.Sleep(4 * resync) // reconciles of both, again and again
	if n := p.calls.Load() - calls; n != 0 {
		t.Errorf("%d Bot API calls for a bot registered already, whose Tenants disagree on its settings; want none", n)
	}
	row, err := h.botRow(5001)
	if err != nil {
		t.Fatal(err)
	}
	if string(row.SecretDigest) != string(registered.SecretDigest) || *row.RateLimit != 30 || row.PaidBroadcast {
		t.Errorf("the bot's row changed: rate %v paid %v, secret changed %v; want rate 30, unpaid, the first secret",
			*row.RateLimit, row.PaidBroadcast, string(row.SecretDigest) != string(registered.SecretDigest))
	}
	if b := h.tenantBot(beta.Name); b != 0 {
		t.Errorf("the conflicting tenant sends through bot %d, want the shared bot it had", b)
	}
	h.waitBot(acme.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")

	// beta agrees: it takes the bot up, without a call.
	update(h, got, func(tn *notifyv1alpha1.Tenant) { rate(30, false)(tn.Spec.Bot) })
	h.waitBot(beta.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	if b := h.tenantBot(beta.Name); b != 5001 {
		t.Errorf("beta sends through bot %d, want 5001", b)
	}

	// Both move to 40: the first to change is in conflict with the other until it changes too; then the
	// bot's row says 40, and nothing was registered again.
	update(h, h.getTenant(acme.Name), func(tn *notifyv1alpha1.Tenant) { rate(40, false)(tn.Spec.Bot) })
	h.waitBot(acme.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonConflictingSettings, beta.Name)
	update(h, h.getTenant(beta.Name), func(tn *notifyv1alpha1.Tenant) { rate(40, false)(tn.Spec.Bot) })
	h.waitBot(beta.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	h.waitBot(acme.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	if row, err = h.botRow(5001); err != nil || row.RateLimit == nil || *row.RateLimit != 40 || string(row.SecretDigest) != string(registered.SecretDigest) {
		t.Errorf("the bot's row %+v (%v), want rate 40 and the first secret", row, err)
	}
	if n := p.calls.Load() - calls; n != 0 {
		t.Errorf("%d Bot API calls for changes of settings alone; want none", n)
	}
}

// A new token must be registered whichever Tenant brings it; while the Tenants on the bot disagree on its
// settings, the registration keeps the bot's (issue 35: it wrote the registering Tenant's once, flipping
// the paid flag) and the Tenant that disagrees is still reported.
func TestANewTokenFromAConflictingTenantKeepsTheBotsSettings(t *testing.T) {
	p := newPlatform(t)
	h := start(t, p.options())
	token := p.bot(t, 5001, "acme_bot")
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	h.tokenSecret("beta-bot", map[string]string{"token": token})
	rate := func(n int32, paid bool) func(*notifyv1alpha1.TenantBot) {
		return func(b *notifyv1alpha1.TenantBot) { b.RateLimit, b.PaidBroadcast = ptr.To(n), paid }
	}
	acme := h.tenant("acme", withBot(h, "acme-bot", rate(30, false)))
	h.waitBot(acme.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	beta := h.tenant("beta", withBot(h, "beta-bot", rate(50, true)))
	h.waitBot(beta.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonConflictingSettings, acme.Name)

	// The new token reaches beta's Secret first: beta registers it, with the bot's settings.
	renewed := p.newToken(t, 5001)
	h.tokenSecret("beta-bot", map[string]string{"token": renewed})
	digest := sha256.Sum256([]byte(renewed))
	wait.For(t, 15*time.Second, "the bot recorded with its new token", func() error {
		row, err := h.botRow(5001)
		if err != nil || string(row.TokenDigest) != string(digest[:]) {
			return fmt.Errorf("row %+v (%v)", row, err)
		}
		return nil
	})
	if row, err := h.botRow(5001); err != nil || row.RateLimit == nil || *row.RateLimit != 30 || row.PaidBroadcast {
		t.Errorf("the bot registered with the new token: %+v (%v); want the bot's rate 30, unpaid", row, err)
	}
	h.waitBot(beta.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonConflictingSettings, acme.Name)
	if b := h.tenantBot(beta.Name); b != 0 {
		t.Errorf("the conflicting tenant sends through bot %d, want the shared bot it had", b)
	}
	h.tokenSecret("acme-bot", map[string]string{"token": renewed})
	h.waitBot(acme.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	if row, err := h.botRow(5001); err != nil || row.RateLimit == nil || *row.RateLimit != 30 || row.PaidBroadcast {
		t.Errorf("the bot's settings after both Secrets hold the new token: %+v (%v); want rate 30, unpaid", row, err)
	}
}

// A worker whose send met the platform's 401 marks the bot's token refused in the store: the Tenant shows
// BotReady False, reason TokenInvalid, within seconds (the resync is an hour away), without registering the
// token again. A new token registers the bot again.
func TestAWorkersRefusedTokenMarkIsReported(t *testing.T) {
	p := newPlatform(t)
	opts := p.options()
	opts.ResyncPeriod = time.Hour
	h := start(t, opts)
	token := p.bot(t, 5001, "acme_bot")
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	tn := h.tenant("acme", withBot(h, "acme-bot"))
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")

	calls := p.calls.Load()
	if _, err := h.st.SetBotState(h.ctx, 5001, botstate.TokenInvalid, "sendMessage answered 401 Unauthorized"); err != nil {
		t.Fatal(err)
	}
	got := h.waitBot(tn.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonTokenInvalid,
		`the messaging platform refused the token of @acme_bot (bot 5001) in key "token" of Secret `+h.ns+`/acme-bot (sendMessage answered 401 Unauthorized): put a new token there`)
	h.waitEvent(got, corev1.EventTypeWarning, notifyv1alpha1.ReasonTokenInvalid, "put a new token there")
	if n := p.calls.Load() - calls; n != 0 {
		t.Errorf("%d Bot API calls for a token the workers found refused", n)
	}
	if got.Status.Bot == nil || got.Status.Bot.ID != "5001" {
		t.Errorf("status.bot %+v, want the bot the tenant still sends through", got.Status.Bot)
	}

	h.tokenSecret("acme-bot", map[string]string{"token": p.newToken(t, 5001)})
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	if row, err := h.botRow(5001); err != nil || row.State != "ready" {
		t.Errorf("the bot's state after a new token: %+v (%v)", row, err)
	}
}

// A platform that cannot be reached is transient: BotReady Unknown, and the reconcile is retried with
// backoff until the platform answers (the resync is an hour away).
func TestAnUnreachablePlatformIsRetried(t *testing.T) {
	p := newPlatform(t)
	opts := p.options()
	opts.ResyncPeriod = time.Hour
	h := start(t, opts)
	token := p.bot(t, 5001, "acme_bot")
	p.set(func() { p.down = true })
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	tn := h.tenant("acme", withBot(h, "acme-bot"))
	got := h.waitBot(tn.Name, metav1.ConditionUnknown, notifyv1alpha1.ReasonPlatformUnavailable, "the messaging platform could not be reached")
	h.noSecrets(got, token)
	p.set(func() { p.down = false })
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
	if !strings.Contains(h.logs.String(), "could not be reached") {
		t.Error("the retried error is not in the log")
	}
	h.noSecrets(got, token)
}

// A registered bot, reconciled again and again (every second), calls the platform no more and writes
// nothing: no Bot API call, no row changed, no status, Secret or event written.
func TestABotsSteadyStateMakesNoCallsAndNoWrites(t *testing.T) {
	const resync = time.Second
	p := newPlatform(t)
	opts := p.options()
	opts.ResyncPeriod = resync
	h := start(t, opts)
	token := p.bot(t, 5001, "acme_bot")
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	tn := h.tenant("acme", withBot(h, "acme-bot", func(b *notifyv1alpha1.TenantBot) { b.RateLimit = ptr.To(int32(100)) }))
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")

	type snapshot struct {
		tenantRV, secretRV, rows string
		events                   int
		calls                    int64
	}
	take := func() snapshot {
		s := snapshot{tenantRV: h.getTenant(tn.Name).ResourceVersion, calls: p.calls.Load(), events: len(h.events(h.getTenant(tn.Name)))}
		secret := &corev1.Secret{}
		if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "acme-bot"}, secret); err != nil {
			t.Fatal(err)
		}
		s.secretRV = secret.ResourceVersion
		// xmin changes with every row version: it proves no UPDATE happened, even one writing equal values.
		if err := h.st.Pool().QueryRow(h.ctx, `SELECT
			(SELECT string_agg(xmin::text || ':' || updated_at::text, ',') FROM tenants) || '/' ||
			(SELECT string_agg(xmin::text || ':' || updated_at::text, ',') FROM bots)`).Scan(&s.rows); err != nil {
			t.Fatal(err)
		}
		return s
	}
	time.Sleep(2 * resync) // let the last status writes' own reconciles pass
	before := take()
	reconciles := reconcileCount(t)
	time.Sleep(4 * resync)
	after := take()
	if n := reconcileCount(t) - reconciles; n < 3 {
		t.Fatalf("only %.0f reconciles in %s: the resync is not running, the test proves nothing", n, 4*resync)
	}
	if before != after {
		t.Errorf("a steady state changed something:\n before %+v\n after  %+v", before, after)
	}
}

// As its ServiceAccount, with the RBAC of config/rbac, the operator reads a bot's token, and watches its
// Secret, in a namespace where it is granted Secrets; elsewhere BotReady says which RoleBinding is missing.
func TestTheOperatorReadsABotTokenOnlyWhereGranted(t *testing.T) {
	p := newPlatform(t)
	id := rbactest.Install(t, k8s, restConfig, "herald-op-"+randomSuffix())
	opts := p.options()
	opts.RestConfig, opts.ResyncPeriod = id.Config, time.Hour
	h := start(t, opts)
	id.GrantSecrets(h.ns)
	denied := "denied-" + h.suffix
	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: denied}})
	t.Cleanup(func() { _ = k8s.Delete(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: denied}}) })
	token := p.bot(t, 5001, "acme_bot")
	if err := k8s.Create(h.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: denied, Name: "acme-bot"}, StringData: map[string]string{"token": token}}); err != nil {
		t.Fatal(err)
	}

	refused := h.tenant("refused", func(tn *notifyv1alpha1.Tenant) {
		tn.Spec.ApiKeyNamespaces = []string{h.ns, denied}
		tn.Spec.Bot = &notifyv1alpha1.TenantBot{TokenSecretRef: notifyv1alpha1.BotTokenSecretReference{Namespace: denied, Name: "acme-bot", Key: "token"}}
	})
	got := h.waitBot(refused.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonSecretAccessDenied, "bind the ClusterRole herald-operator-secrets")
	h.waitEvent(got, corev1.EventTypeWarning, notifyv1alpha1.ReasonSecretAccessDenied, `namespace "`+denied+`"`)

	// In the granted namespace, the Secret is read and its namespace watched, as the ServiceAccount: the key
	// added to the Secret registers the bot (the resync is an hour away).
	h.tokenSecret("acme-bot", map[string]string{"other": token})
	tn := h.tenant("acme", withBot(h, "acme-bot"))
	h.waitBot(tn.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonSecretNotFound, `has no key "token"`)
	waitIdle(t)
	h.tokenSecret("acme-bot", map[string]string{"token": token})
	h.waitBot(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonRegistered, "@acme_bot")
}
