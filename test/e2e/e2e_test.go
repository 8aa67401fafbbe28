// Package e2e installs Herald with its Helm chart on a real one-node Kubernetes cluster and uses it as a
// platform team would: the chart with the migration hook, a Tenant and an ApiKey, a user linked and verified
// through the messenger simulator, a message delivered; then an upgrade under load (nothing accepted may be
// lost), a rollback and an uninstall.
//
// The cluster, PostgreSQL and the Kafka-protocol broker come from hack/e2e/up.sh; `make test-e2e` runs it
// all (hack/e2e/run.sh). Without HERALD_E2E_ENV (the file up.sh writes) the test skips, so `go test ./...`
// does not run it.
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/testing/wait"
)

const (
	namespace   = "herald"
	release     = "herald"
	botToken    = "7000001:e2e-bot-token"
	botUsername = "herald_e2e_bot"
	tenantID    = "acme"
	keyLabel    = "Acme Shop"
)

// The messenger platform: `herald sim` as a Deployment, its Service on a fixed ClusterIP (no cluster DNS).
const simManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: messenger
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sim
  namespace: messenger
spec:
  replicas: 1
  selector:
    matchLabels: {app: sim}
  template:
    metadata:
      labels: {app: sim}
    spec:
      enableServiceLinks: false
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
        - name: sim
          image: ${IMAGE}
          imagePullPolicy: IfNotPresent
          args: [sim]
          env:
            - {name: HERALD_HTTP_ADDR, value: ":8080"}
            - {name: HERALD_MESSENGER_BOT_TOKEN, value: "${TOKEN}"}
            - {name: HERALD_MESSENGER_BOT_USERNAME, value: "${USERNAME}"}
            - {name: HERALD_MESSENGER_RATE_LIMIT, value: "100"}
            - {name: HERALD_SIM_PER_CHAT_RATE, value: "20"}
            # HERALD_PUBLIC_URL is https, and this cluster has no certificates: the simulator posts to it over
            # plain http, as the load balancer in front of the webhook component would once it ended TLS.
            - {name: HERALD_SIM_WEBHOOK_PLAIN_HTTP, value: "true"}
            - {name: HERALD_LOG_FORMAT, value: "json"}
          ports:
            - {name: http, containerPort: 8080}
          readinessProbe:
            httpGet: {path: /sim, port: http}
            periodSeconds: 2
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
---
apiVersion: v1
kind: Service
metadata:
  name: sim
  namespace: messenger
spec:
  clusterIP: ${SIM_IP}
  selector: {app: sim}
  ports:
    - {name: http, port: 80, targetPort: http}
`

const tenantManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: ${TENANT}
---
apiVersion: notify.herald.dev/v1alpha1
kind: Tenant
metadata:
  name: ${TENANT}
spec:
  displayName: Acme Inc.
  apiKeyNamespaces: [${TENANT}]
---
apiVersion: notify.herald.dev/v1alpha1
kind: ApiKey
metadata:
  name: backend
  namespace: ${TENANT}
spec:
  tenant: ${TENANT}
  label: ${LABEL}
`

// A tenant with its own bot (spec v1-extensions §11), its token in a Secret in acme's namespace, and the
// public address its bot posts updates to (HERALD_PUBLIC_URL): a Service of the platform team's in front of
// the webhook component, on a fixed ClusterIP (no cluster DNS).
const ownBotManifest = `apiVersion: v1
kind: Service
metadata:
  name: public
  namespace: ${NAMESPACE}
spec:
  clusterIP: ${PUBLIC_IP}
  selector: {app.kubernetes.io/instance: ${RELEASE}, app.kubernetes.io/component: webhook}
  ports:
    - {name: http, port: 80, targetPort: http}
---
apiVersion: v1
kind: Secret
metadata:
  name: shop-bot
  namespace: ${TENANT_NS}
stringData:
  token: "${TOKEN}"
---
apiVersion: notify.herald.dev/v1alpha1
kind: Tenant
metadata:
  name: shop
spec:
  displayName: E2E Shop
  apiKeyNamespaces: [${TENANT_NS}]
  bot:
    tokenSecretRef: {namespace: ${TENANT_NS}, name: shop-bot, key: token}
    rateLimit: 50
---
apiVersion: notify.herald.dev/v1alpha1
kind: ApiKey
metadata:
  name: shop-backend
  namespace: ${TENANT_NS}
spec:
  tenant: shop
  label: ${LABEL}
`

const (
	shopBotID       = 7000002
	shopBotToken    = "7000002:e2e-shop-bot-token"
	shopBotUsername = "e2e_shop_bot"
	shopLabel       = "E2E Shop"
)

// cluster is the state the steps of TestHerald pass on.
type cluster struct {
	e       *env
	images  []string // tags: the first is installed, the second is the upgrade
	tmp     string   // a directory for the whole test
	values  string   // the values file of helm install
	sim     *api     // the simulator's Bot API and control API
	herald  *api     // the tenant API through the ingress Service
	users   []user
	nextUID int64
}

type user struct {
	id       string // the tenant's user id
	chatID   int64  // the messenger user (and private chat) id
	phone    string
	messages int // messages expected in the chat so far
	tenant   tenantAPI
}

// tenantAPI is a tenant as its users meet it: its API with its key, the bot its messages come from (the
// simulator's ?bot=, empty for the shared bot) and the label that brands them.
type tenantAPI struct {
	api   *api
	bot   string
	label string
}

// acme is the tenant of tenantManifest, on the shared bot.
func (c *cluster) acme() tenantAPI { return tenantAPI{api: c.herald, label: keyLabel} }

// botQuery is the simulator's ?bot= for the user's bot.
func (u *user) botQuery() string {
	if u.tenant.bot == "" {
		return ""
	}
	return "?bot=" + u.tenant.bot
}

func TestHerald(t *testing.T) {
	e := loadEnv(t)
	c := &cluster{e: e, images: strings.Fields(e.get("HERALD_E2E_IMAGE_TAGS")), tmp: t.TempDir(), nextUID: 1001}
	if len(c.images) < 2 {
		t.Fatalf("HERALD_E2E_IMAGE_TAGS: want two tags, got %q", c.images)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpDiagnostics(t)
		}
	})
	steps := []struct {
		name string
		f    func(*testing.T)
	}{
		{"Simulator", c.deploySimulator},
		{"HelmInstall", c.helmInstall},
		{"TenantAndApiKey", c.tenantAndKey},
		{"RegisterWebhook", c.registerWebhook},
		{"FirstMessage", c.firstMessage},
		{"OwnBot", c.ownBot},
		{"SteadyLoad", c.steadyLoad},
		{"UpgradeUnderLoad", c.upgradeUnderLoad},
		{"Rollback", c.rollback},
		{"Uninstall", c.uninstall},
	}
	for _, s := range steps {
		began := time.Now()
		ok := t.Run(s.name, s.f)
		t.Logf("step %s: %s", s.name, time.Since(began).Round(100*time.Millisecond))
		if !ok {
			t.FailNow()
		}
	}
}

// extraHelmArgs are added to helm install and upgrade: HERALD_E2E_HELM_ARGS, for experiments such as
// "--set ingress.shutdownDelay=0s --set webhook.shutdownDelay=0s".
func extraHelmArgs() []string { return strings.Fields(os.Getenv("HERALD_E2E_HELM_ARGS")) }

func (c *cluster) image(tag string) string { return c.e.get("HERALD_E2E_IMAGE_REPOSITORY") + ":" + tag }

func (c *cluster) deploySimulator(t *testing.T) {
	c.e.kubectlApply(t, strings.NewReplacer("${IMAGE}", c.image(c.images[0]), "${TOKEN}", botToken,
		"${USERNAME}", botUsername, "${SIM_IP}", c.e.get("HERALD_E2E_SIM_SERVICE_IP")).Replace(simManifest))
	c.e.kubectl(t, "-n", "messenger", "rollout", "status", "deploy/sim", "--timeout=3m")
	c.sim = newAPI("http://"+c.e.get("HERALD_E2E_SIM_SERVICE_IP"), "")
	// From the host through kube-proxy, as the pods will; a new connection each time, in case one was
	// opened before kube-proxy had the Service's rules.
	probe := newAPI(c.sim.base, "")
	probe.client = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	wait.ForEvery(t, time.Minute, time.Second, "the simulator answers on its Service", func() error {
		_, err := probe.call("GET", "/sim", nil, nil)
		return err
	})
}

func (c *cluster) helmInstall(t *testing.T) {
	c.values = filepath.Join(c.tmp, "values.yaml")
	values := fmt.Sprintf(`image:
  repository: %s
  tag: %s
secrets:
  databaseURL: {value: %q}
  kafkaBrokers: {value: %q}
  botToken: {value: %q}
messenger:
  apiURL: http://%s
  botUsername: %s
  publicURL: https://%s
  rateLimit: 100
  perChatInterval: 100ms
operator:
  # The operator may write key Secrets only where the platform team grants it.
  apiKeyNamespaces: [%s]
`, c.e.get("HERALD_E2E_IMAGE_REPOSITORY"), c.images[0], c.e.get("HERALD_E2E_DATABASE_URL"),
		c.e.get("HERALD_E2E_KAFKA_BROKERS"), botToken, c.e.get("HERALD_E2E_SIM_SERVICE_IP"), botUsername,
		c.e.get("HERALD_E2E_PUBLIC_SERVICE_IP"), tenantID)
	if err := os.WriteFile(c.values, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	// As docs/install.md says: the tenant's namespace (operator.apiKeyNamespaces) before the install.
	c.e.kubectl(t, "create", "namespace", tenantID)
	began := time.Now()
	c.e.helm(t, append([]string{"install", release, c.e.get("HERALD_E2E_CHART"), "--namespace", namespace, "--create-namespace",
		"--values", c.values, "--wait", "--timeout", "6m"}, extraHelmArgs()...)...)
	t.Logf("helm install --wait: %s", time.Since(began).Round(100*time.Millisecond))

	// The migration hook ran (and was deleted once it succeeded, as its hook-delete-policy says).
	var version int64
	c.queryRow(t, "SELECT max(version_id) FROM goose_db_version", &version)
	if version < 1 {
		t.Errorf("goose_db_version: max version %d after the migration hook", version)
	}
	if out, err := c.e.try(time.Minute, c.e.get("HERALD_E2E_KUBECTL"), "-n", namespace, "get", "job", release+"-migrate"); err == nil {
		t.Errorf("the migration Job is still there after it succeeded:\n%s", out)
	}
	t.Logf("schema at migration %d", version)
	// Every component available, at the HPA minimum where an HPA owns the replicas (no metrics server
	// here: the HPA still raises a Deployment to minReplicas).
	c.waitAvailable(t, c.images[0], replicas)
}

// waitAvailable waits until each component's Deployment has the given number of updated, available
// replicas running image tag, and no others.
func (c *cluster) waitAvailable(t *testing.T, tag string, want map[string]int) {
	t.Helper()
	wait.ForEvery(t, 4*time.Minute, 2*time.Second, "every Deployment available on "+tag, func() error {
		for comp, n := range want {
			var d struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct{ Image string }
						}
					}
				}
				Status struct {
					Replicas, UpdatedReplicas, AvailableReplicas, ReadyReplicas int
				}
			}
			out, err := c.e.try(time.Minute, c.e.get("HERALD_E2E_KUBECTL"), "-n", namespace, "get", "deploy", release+"-"+comp, "-o", "json")
			if err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				return err
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != c.image(tag) {
				return fmt.Errorf("%s runs %s", comp, img)
			}
			s := d.Status
			if s.Replicas != n || s.UpdatedReplicas != n || s.AvailableReplicas != n {
				return fmt.Errorf("%s: %d replicas, %d updated, %d available; want %d", comp, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, n)
			}
		}
		return nil
	})
}

func (c *cluster) tenantAndKey(t *testing.T) {
	c.e.kubectlApply(t, strings.NewReplacer("${TENANT}", tenantID, "${LABEL}", keyLabel).Replace(tenantManifest))
	c.e.kubectl(t, "wait", "--for=condition=Ready", "tenant/"+tenantID, "--timeout=2m")
	c.e.kubectl(t, "-n", tenantID, "wait", "--for=condition=Ready", "apikey/backend", "--timeout=2m")
	var secret struct{ Data map[string][]byte }
	c.e.getJSON(t, &secret, "-n", tenantID, "secret", "backend")
	key := string(secret.Data["apiKey"])
	if !strings.HasPrefix(key, "hk_") || string(secret.Data["tenant"]) != tenantID {
		t.Fatalf("the key Secret holds key %.6q… for tenant %q", key, secret.Data["tenant"])
	}
	c.herald = newAPI("http://"+c.serviceIP(t, namespace, release+"-ingress"), key)
	t.Logf("tenants:\n%s", c.e.kubectl(t, "get", "tenants,apikeys", "-A"))
}

func (c *cluster) serviceIP(t *testing.T, ns, name string) string {
	t.Helper()
	ip := strings.TrimSpace(c.e.kubectl(t, "-n", ns, "get", "svc", name, "-o", "jsonpath={.spec.clusterIP}"))
	if net.ParseIP(ip) == nil {
		t.Fatalf("service %s/%s has no ClusterIP (%q)", ns, name, ip)
	}
	return ip
}

// registerWebhook does what docs/install.md step 5 says: herald webhook set-url in a webhook pod, with the
// webhook Service's address (no DNS here) as the URL.
func (c *cluster) registerWebhook(t *testing.T) {
	url := "http://" + c.serviceIP(t, namespace, release+"-webhook") + "/messenger/webhook"
	out := c.e.kubectl(t, "-n", namespace, "exec", "deploy/"+release+"-webhook", "--", "/herald", "webhook", "set-url", url)
	t.Logf("%s", strings.TrimSpace(out))
	var info struct {
		URL string `json:"url"`
	}
	c.sim.must(t, 200, "GET", "/sim/webhook", nil, &info)
	if info.URL != url {
		t.Fatalf("the simulator's webhook is %q, want %q", info.URL, url)
	}
}

// linkUser takes a new user of acme through the deep link and phone verification.
func (c *cluster) linkUser(t *testing.T) *user {
	t.Helper()
	u := c.linkUserOf(t, c.acme())
	c.users = append(c.users, *u)
	return &c.users[len(c.users)-1]
}

// linkUserOf takes a new user of tenant through the deep link (to the tenant's bot) and phone verification.
func (c *cluster) linkUserOf(t *testing.T, tenant tenantAPI) *user {
	t.Helper()
	u := user{id: fmt.Sprintf("e2e-user-%d", c.nextUID), chatID: c.nextUID, phone: fmt.Sprintf("+1555000%04d", c.nextUID), tenant: tenant}
	c.nextUID++
	var link struct {
		Token    string `json:"token"`
		DeepLink string `json:"deep_link"`
	}
	tenant.api.must(t, 201, "POST", "/v1/link-token", map[string]string{"user_id": u.id}, &link)
	c.sim.must(t, 200, "POST", "/sim/users", map[string]any{"id": u.chatID, "first_name": "E2E", "phone_number": u.phone}, nil)
	c.sim.must(t, 200, "POST", fmt.Sprintf("/sim/users/%d/open-link", u.chatID), map[string]string{"url": link.DeepLink}, nil)
	// The webhook links the chat when the /start update arrives: until then the user has no link (404).
	wait.ForEvery(t, time.Minute, 300*time.Millisecond, u.id+" linked", func() error {
		_, err := tenant.api.call("POST", "/v1/phone-verification/start", map[string]string{"user_id": u.id}, nil)
		return err
	})
	// The prompt, then the contact shared from it.
	c.waitMessages(t, &u, 1, "")
	c.sim.must(t, 200, "POST", fmt.Sprintf("/sim/users/%d/share-contact%s", u.chatID, u.botQuery()), map[string]string{"phone_number": u.phone}, nil)
	wait.ForEvery(t, time.Minute, 300*time.Millisecond, u.id+" verified", func() error {
		var v struct {
			Status     string `json:"status"`
			PhoneLast4 string `json:"phone_last4"`
		}
		if _, err := tenant.api.call("GET", "/v1/phone-verification/status/"+u.id, nil, &v); err != nil {
			return err
		}
		if v.Status != "verified" || v.PhoneLast4 != u.phone[len(u.phone)-4:] {
			return fmt.Errorf("status %q, last4 %q", v.Status, v.PhoneLast4)
		}
		return nil
	})
	// Whatever the webhook answered to the contact (a confirmation) is not counted on.
	u.messages = len(c.chat(t, &u))
	return &u
}

type simMessage struct {
	MessageID int64  `json:"message_id"`
	Text      string `json:"text"`
}

// chat is the user's private chat with the bot of its tenant.
func (c *cluster) chat(t *testing.T, u *user) []simMessage {
	t.Helper()
	var got struct {
		Messages []simMessage `json:"messages"`
	}
	c.sim.must(t, 200, "GET", fmt.Sprintf("/sim/chats/%d/messages%s", u.chatID, u.botQuery()), nil, &got)
	return got.Messages
}

// waitMessages waits until the user's chat has n more messages; the last must contain text.
func (c *cluster) waitMessages(t *testing.T, u *user, n int, text string) {
	t.Helper()
	wait.ForEvery(t, time.Minute, 300*time.Millisecond, fmt.Sprintf("%d new message(s) in chat %d", n, u.chatID), func() error {
		msgs := c.chat(t, u)
		if len(msgs) < u.messages+n {
			return fmt.Errorf("%d messages", len(msgs))
		}
		if last := msgs[len(msgs)-1].Text; !strings.Contains(last, text) {
			return fmt.Errorf("last message %q", last)
		}
		return nil
	})
	u.messages += n
}

type notification struct {
	TrackingID         string  `json:"tracking_id"`
	Status             string  `json:"status"`
	Attempts           int     `json:"attempts"`
	MessengerMessageID *string `json:"messenger_message_id"`
}

// sendAndDeliver sends one message and waits until the status says delivered and the chat has it.
func (c *cluster) sendAndDeliver(t *testing.T, u *user, text string) {
	t.Helper()
	var sent notification
	u.tenant.api.must(t, 202, "POST", "/v1/send", map[string]any{"user_id": u.id, "message": text, "priority": 7}, &sent)
	wait.ForEvery(t, time.Minute, 300*time.Millisecond, "delivery of "+sent.TrackingID, func() error {
		var n notification
		if _, err := u.tenant.api.call("GET", "/v1/status/"+sent.TrackingID, nil, &n); err != nil {
			return err
		}
		if n.Status != "delivered" || n.MessengerMessageID == nil {
			return fmt.Errorf("status %q after %d attempts", n.Status, n.Attempts)
		}
		return nil
	})
	c.waitMessages(t, u, 1, "A message from "+u.tenant.label+"\n"+text)
}

func (c *cluster) firstMessage(t *testing.T) {
	u := c.linkUser(t)
	c.sendAndDeliver(t, u, "Your order has shipped.")
}

// ownBot applies a Tenant whose bot token is in a Secret: the operator registers the bot (getMe, then
// setWebhook at HERALD_PUBLIC_URL/messenger/webhook/{bot_id}) and says BotReady; a user links through that
// bot's deep link, verifies and gets a message from it.
func (c *cluster) ownBot(t *testing.T) {
	c.sim.must(t, 200, "POST", "/sim/bots", map[string]any{"token": shopBotToken, "username": shopBotUsername, "first_name": shopLabel}, nil)
	publicIP := c.e.get("HERALD_E2E_PUBLIC_SERVICE_IP")
	c.e.kubectlApply(t, strings.NewReplacer("${NAMESPACE}", namespace, "${PUBLIC_IP}", publicIP, "${RELEASE}", release,
		"${TENANT_NS}", tenantID, "${TOKEN}", shopBotToken, "${LABEL}", shopLabel).Replace(ownBotManifest))
	c.e.kubectl(t, "wait", "--for=condition=BotReady", "tenant/shop", "--timeout=2m")
	var tenant struct {
		Status struct {
			Bot struct{ ID, Username string }
		}
	}
	c.e.getJSON(t, &tenant, "tenant", "shop")
	if b := tenant.Status.Bot; b.ID != fmt.Sprint(shopBotID) || b.Username != shopBotUsername {
		t.Errorf("status.bot = %+v, want id %d, username %s", b, shopBotID, shopBotUsername)
	}
	var info struct {
		URL string `json:"url"`
	}
	c.sim.must(t, 200, "GET", "/sim/webhook?bot="+shopBotUsername, nil, &info)
	if want := fmt.Sprintf("https://%s/messenger/webhook/%d", publicIP, shopBotID); info.URL != want {
		t.Fatalf("the shop bot's webhook is %q, want %q", info.URL, want)
	}
	if out := c.e.kubectl(t, "get", "tenant", "shop", "-o", "yaml"); strings.Contains(out, shopBotToken) {
		t.Errorf("the Tenant shows its bot's token:\n%s", out)
	}

	c.e.kubectl(t, "-n", tenantID, "wait", "--for=condition=Ready", "apikey/shop-backend", "--timeout=2m")
	var secret struct{ Data map[string][]byte }
	c.e.getJSON(t, &secret, "-n", tenantID, "secret", "shop-backend")
	shop := tenantAPI{api: newAPI(c.herald.base, string(secret.Data["apiKey"])), bot: shopBotUsername, label: shopLabel}
	var link struct {
		DeepLink string `json:"deep_link"`
	}
	shop.api.must(t, 201, "POST", "/v1/link-token", map[string]string{"user_id": "deep-link-check"}, &link)
	if !strings.Contains(link.DeepLink, "/"+shopBotUsername+"?start=") {
		t.Errorf("the shop's deep link %q does not open its bot", link.DeepLink)
	}
	u := c.linkUserOf(t, shop)
	c.sendAndDeliver(t, u, "Your table is booked.")
	var stats struct {
		Sends int `json:"sends"`
	}
	c.sim.must(t, 200, "GET", "/sim/stats?bot="+shopBotUsername, nil, &stats)
	if stats.Sends < 2 { // the verification prompt and the message, at least
		t.Errorf("the shop bot made %d sends, want the prompt and the message at least", stats.Sends)
	}
}

var replicas = map[string]int{"operator": 1, "ingress": 2, "webhook": 2, "worker": 2}

// steadyLoad is the control for the rollouts: the same load, nothing rolled.
func (c *cluster) steadyLoad(t *testing.T) {
	for len(c.users) < 5 {
		c.linkUser(t)
	}
	c.underLoad(t, "steady", func() { time.Sleep(10 * time.Second) })
}

// upgradeUnderLoad rolls every pod to the second image with helm upgrade while a tenant sends.
func (c *cluster) upgradeUnderLoad(t *testing.T) {
	c.underLoad(t, "upgrade", func() {
		c.e.helm(t, append([]string{"upgrade", release, c.e.get("HERALD_E2E_CHART"), "--namespace", namespace,
			"--values", c.values, "--set", "image.tag=" + c.images[1], "--wait", "--timeout", "6m"}, extraHelmArgs()...)...)
		c.waitAvailable(t, c.images[1], replicas)
	})
}

// underLoad sends at a steady rate while roll runs, and for a while after it (old pods finish terminating),
// then checks that every accepted notification is delivered, and reports the sends that failed.
func (c *cluster) underLoad(t *testing.T, label string, roll func()) {
	before := c.simStats(t)
	ld := newLoad(c.herald.base, c.herald.key, c.users, label)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	go func() { ld.run(ctx, 20); done <- struct{}{} }()
	ctl, ctlDone := c.startControl(t, ctx)
	go func() { ctlDone(); done <- struct{}{} }()
	workersBefore, ctlBefore := c.botStats(t, botUsername), c.botStats(t, controlBotUsername)
	// Webhook traffic too: users write to the bot (5 updates a second), the simulator posts each update to
	// the webhook Service, retrying a failed post a few times before it drops the update.
	var updates, updateErrors int
	go func() {
		defer func() { done <- struct{}{} }()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			u := c.users[i%len(c.users)]
			updates++
			// ?wait=0: the simulator takes the update and answers at once, not after the webhook's answer, so
			// the rate holds while a rollout slows the webhook down.
			if _, err := c.sim.call("POST", fmt.Sprintf("/sim/users/%d/message?wait=0", u.chatID), map[string]string{"text": "hello"}, nil); err != nil {
				updateErrors++
			}
		}
	}()
	stopped := false
	defer func() {
		if !stopped {
			stop()
			<-done
			<-done
			<-done
		}
	}()

	time.Sleep(5 * time.Second)
	ld.mark(label + " begins")
	began := time.Now()
	roll()
	t.Logf("%s: %s", label, time.Since(began).Round(100*time.Millisecond))
	ld.mark(label + " done")
	// Old pods terminate after the Deployments are available.
	time.Sleep(10 * time.Second)
	stop()
	<-done
	<-done
	<-done
	stopped = true
	ctlReport := ctl.report(c.botStats(t, botUsername), workersBefore, c.botStats(t, controlBotUsername), ctlBefore)
	if updateErrors > 0 {
		t.Errorf("%d of %d messages to the bot not taken by the simulator", updateErrors, updates)
	}
	wait.ForEvery(t, time.Minute, time.Second, "the simulator's pending updates delivered", func() error {
		if p := c.simStats(t).UpdatesPending; p > 0 {
			return fmt.Errorf("%d pending", p)
		}
		return nil
	})

	rep := ld.report() + ctlReport + "\n"
	t.Logf("load during the %s:\n%s", label, rep)
	if err := os.WriteFile(filepath.Join(c.e.get("HERALD_E2E_LOGS"), label+"-load.txt"), []byte(rep), 0o644); err != nil {
		t.Log(err)
	}
	// A client retries what failed with the same Idempotency-Key, as the API allows.
	ld.retryFailed(t)
	accepted := ld.accepted()
	if len(accepted) == 0 {
		t.Fatal("no send was accepted")
	}
	c.waitDelivered(t, accepted)
	// Each accepted notification reached its chat; a redelivery after a worker stopped mid-send would show
	// as a duplicate (at-least-once: reported, not failed).
	dups := 0
	for i := range c.users {
		u := &c.users[i]
		seen := map[string]int{}
		for _, m := range c.chat(t, u) {
			if strings.Contains(m.Text, ld.prefix) {
				seen[m.Text]++
			}
		}
		for _, id := range accepted {
			if ld.sends[id].user == u.id && seen["A message from "+keyLabel+"\n"+ld.sends[id].text] == 0 {
				t.Errorf("notification %s (%q) is delivered by its status but not in chat %d", id, ld.sends[id].text, u.chatID)
			}
		}
		for _, n := range seen {
			dups += n - 1
		}
		u.messages = len(c.chat(t, u))
	}
	after := c.simStats(t)
	// Herald's bots only: the control's calls and violations are reported beside them (ctlReport).
	ctlAfter := c.botStats(t, controlBotUsername)
	t.Logf("%d notifications accepted and delivered, %d duplicate deliveries; simulator (Herald's bots): %d sends, %d 429s, %d limit violations (%d per chat, %d global)\n%s",
		len(accepted), dups, after.Sends-before.Sends-(ctlAfter.Sends-ctlBefore.Sends),
		after.Answered429-before.Answered429-(ctlAfter.Answered429-ctlBefore.Answered429),
		after.LimitViolations-before.LimitViolations-(ctlAfter.LimitViolations-ctlBefore.LimitViolations),
		after.ChatLimitViolations-before.ChatLimitViolations,
		after.GlobalLimitViolations-before.GlobalLimitViolations-(ctlAfter.GlobalLimitViolations-ctlBefore.GlobalLimitViolations), ctlReport)
	webhookFailures := after.WebhookFailures - before.WebhookFailures
	t.Logf("webhook: %d updates, %d accepted, %d posts failed (retried), %d dropped",
		after.UpdatesGenerated-before.UpdatesGenerated, after.WebhookDeliveries-before.WebhookDeliveries,
		webhookFailures, after.WebhookDropped-before.WebhookDropped)
	if d := after.WebhookDropped - before.WebhookDropped; d > 0 {
		t.Errorf("the webhook lost %d updates during the %s", d, label)
	}
	// After SIGTERM the tenant API and the webhook keep serving (ingress/webhook.shutdownDelay) until
	// Services have stopped sending them new connections: a rollout fails no send. (A webhook post can still
	// meet a kept-alive connection the server closes as it stops; the platform retries it, so it is only
	// reported.) HERALD_E2E_ROLLOUT_FAILURES_OK=1 only reports failed sends too (a chart without the delay).
	if f := ld.firstAttemptFailures(); f > 0 && os.Getenv("HERALD_E2E_ROLLOUT_FAILURES_OK") == "" {
		t.Errorf("%d sends failed during the %s; want none", f, label)
	}
}

type simStats struct {
	Sends                 int64 `json:"sends"`
	Answered429           int64 `json:"answered_429"`
	LimitViolations       int64 `json:"limit_violations"`
	ChatLimitViolations   int64 `json:"chat_limit_violations"`
	GlobalLimitViolations int64 `json:"global_limit_violations"`
	UpdatesGenerated      int64 `json:"updates_generated"`
	UpdatesPending        int64 `json:"updates_pending"`
	WebhookDeliveries     int64 `json:"webhook_deliveries"`
	WebhookFailures       int64 `json:"webhook_failures"`
	WebhookDropped        int64 `json:"webhook_dropped"`
}

func (c *cluster) simStats(t *testing.T) simStats {
	t.Helper()
	var s simStats
	c.sim.must(t, 200, "GET", "/sim/stats", nil, &s)
	return s
}

// waitDelivered polls the status of every tracking id until all are delivered.
func (c *cluster) waitDelivered(t *testing.T, ids []string) {
	t.Helper()
	pending := append([]string(nil), ids...)
	deadline := time.Now().Add(3 * time.Minute)
	statuses := map[string]string{}
	for len(pending) > 0 {
		var mu sync.Mutex
		var next []string
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, id := range pending {
			wg.Add(1)
			sem <- struct{}{}
			go func(id string) {
				defer func() { <-sem; wg.Done() }()
				var n notification
				_, err := c.herald.call("GET", "/v1/status/"+id, nil, &n)
				mu.Lock()
				defer mu.Unlock()
				if err != nil || n.Status != "delivered" {
					next = append(next, id)
					statuses[id] = fmt.Sprintf("%s (attempts %d, err %v)", n.Status, n.Attempts, err)
				}
			}(id)
		}
		wg.Wait()
		pending = next
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sort.Strings(pending)
			for i, id := range pending {
				if i == 20 {
					t.Errorf("… and %d more", len(pending)-20)
					break
				}
				t.Errorf("notification %s not delivered: %s", id, statuses[id])
			}
			t.Fatalf("%d of %d accepted notifications not delivered within 3 minutes", len(pending), len(ids))
		}
		time.Sleep(time.Second)
	}
}

// rollback goes back to the first release, under load as well.
func (c *cluster) rollback(t *testing.T) {
	c.underLoad(t, "rollback", func() {
		c.e.helm(t, "rollback", release, "1", "--namespace", namespace, "--wait", "--timeout", "6m")
		c.waitAvailable(t, c.images[0], replicas)
	})
	history := c.e.helm(t, "history", release, "--namespace", namespace)
	t.Logf("helm history:\n%s", history)
	c.sendAndDeliver(t, &c.users[0], "Delivered after the rollback.")
}

// uninstall checks that helm uninstall leaves what docs/install.md says it leaves.
func (c *cluster) uninstall(t *testing.T) {
	// The test's own Service in front of the webhook (ownBotManifest) is not the chart's: it goes first.
	c.e.kubectl(t, "-n", namespace, "delete", "service", "public", "--ignore-not-found")
	c.e.helm(t, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
	wait.ForEvery(t, 2*time.Minute, time.Second, "the release's pods gone", func() error {
		out := strings.TrimSpace(c.e.kubectl(t, "-n", namespace, "get", "pods", "-o", "name"))
		if out != "" {
			return errors.New(out)
		}
		return nil
	})
	// Kept: the CRDs (crds.keep), the Tenant, the ApiKey and its key Secret.
	for _, crd := range []string{"tenants.notify.herald.dev", "apikeys.notify.herald.dev"} {
		c.e.kubectl(t, "get", "crd", crd)
	}
	c.e.kubectl(t, "get", "tenant", tenantID)
	c.e.kubectl(t, "-n", tenantID, "get", "apikey", "backend")
	c.e.kubectl(t, "-n", tenantID, "get", "secret", "backend")
	// Gone: everything the chart rendered. What is left in the release namespace, and cluster-wide?
	left := strings.TrimSpace(c.e.kubectl(t, "-n", namespace, "get",
		"all,secrets,configmaps,serviceaccounts,roles,rolebindings,leases,pdb,hpa,pvc,ingresses,networkpolicies", "-o", "name"))
	var unexpected []string
	for _, obj := range strings.Fields(left) {
		switch obj {
		case "configmap/kube-root-ca.crt", "serviceaccount/default":
			// Every namespace has these.
		default:
			unexpected = append(unexpected, obj)
		}
	}
	t.Logf("left in namespace %s after helm uninstall: %v", namespace, unexpected)
	for _, args := range [][]string{{"clusterrole"}, {"clusterrolebinding"}, {"-n", tenantID, "rolebinding"}} {
		args = append(append([]string{"get"}, args...), "-l", "app.kubernetes.io/instance="+release, "-o", "name")
		if out := strings.TrimSpace(c.e.kubectl(t, args...)); out != "" {
			t.Errorf("left after helm uninstall: %s", out)
		}
	}
	for _, obj := range unexpected {
		// The operator's leader-election Lease is made at run time, not by the chart: helm cannot remove it.
		if !strings.HasPrefix(obj, "lease.coordination.k8s.io/") {
			t.Errorf("left in namespace %s after helm uninstall: %s", namespace, obj)
		}
	}
	// The "remove everything" steps of docs/install.md: without the operator the finalizers stay, so they
	// are removed by hand as the guide says.
	for _, obj := range []struct{ ns, name string }{{tenantID, "apikey/backend"}, {tenantID, "apikey/shop-backend"},
		{"", "tenant/" + tenantID}, {"", "tenant/shop"}} {
		args := []string{"patch", obj.name, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`}
		if obj.ns != "" {
			args = append([]string{"-n", obj.ns}, args...)
		}
		c.e.kubectl(t, args...)
	}
	c.e.kubectl(t, "delete", "apikeys", "--all", "-A", "--timeout=1m")
	c.e.kubectl(t, "delete", "tenants", "--all", "--timeout=1m")
	c.e.kubectl(t, "delete", "crd", "tenants.notify.herald.dev", "apikeys.notify.herald.dev", "--timeout=1m")
}

func (c *cluster) queryRow(t *testing.T, query string, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.e.get("HERALD_E2E_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, query).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// dumpDiagnostics writes what explains a failure into the logs directory.
func (c *cluster) dumpDiagnostics(t *testing.T) {
	dir := filepath.Join(c.e.get("HERALD_E2E_LOGS"), "diagnostics")
	_ = os.MkdirAll(dir, 0o755)
	kubectl := c.e.get("HERALD_E2E_KUBECTL")
	save := func(name string, args ...string) {
		out, err := c.e.try(time.Minute, kubectl, args...)
		if err != nil {
			out += "\n" + err.Error()
		}
		_ = os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644)
	}
	save("pods.txt", "get", "pods", "-A", "-o", "wide")
	save("describe-pods.txt", "describe", "pods", "-A")
	save("events.txt", "get", "events", "-A", "--sort-by=.lastTimestamp")
	save("deployments.txt", "get", "deploy,rs,hpa,jobs", "-A", "-o", "wide")
	for _, ns := range []string{namespace, "messenger"} {
		pods, _ := c.e.try(time.Minute, kubectl, "-n", ns, "get", "pods", "-o", "name")
		for _, p := range strings.Fields(pods) {
			name := strings.TrimPrefix(p, "pod/")
			save("logs-"+ns+"-"+name+".txt", "-n", ns, "logs", p, "--all-containers", "--prefix")
			save("logs-previous-"+ns+"-"+name+".txt", "-n", ns, "logs", p, "--all-containers", "--previous")
		}
	}
	t.Logf("diagnostics in %s", dir)
}
