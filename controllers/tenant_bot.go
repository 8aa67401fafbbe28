package controllers

// A Tenant's own bot (spec v1-extensions §11): spec.bot names a Secret key holding the bot's token; the
// operator registers the bot with the platform (internal/bot: getMe, setWebhook with a secret of its own),
// records it in the store and makes the tenant send through it (store.SetTenantBot, which ends the links
// made through the tenant's previous bot). The token is read live from the Secret at each reconcile and
// kept nowhere but sealed in the store; it, and the webhook's secret, never reach a log, the status, an
// event or an error.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/store"
)

// botCallTimeout bounds a registration (getMe and setWebhook) or a deleteWebhook: a platform that does
// not answer must not hold a reconcile forever.
const botCallTimeout = 30 * time.Second

// syncBot brings the bot the tenant sends through to spec.bot, and reports it in status.bot and the
// BotReady condition. The platform is called only when the bot must be registered (again): a new token
// (its digest differs from the recorded one), or another HERALD_PUBLIC_URL; other settings are recorded
// without a call, unless another Tenant on the bot asks for others (ConflictingSettings); a token a
// worker found refused is reported until the token changes. A problem the user can fix is a False
// condition with a Warning event; what is transient (the store, the platform unreachable) is returned, so
// that controller-runtime retries with backoff. requeue, when not 0, is when to look again.
func (r *TenantReconciler) syncBot(ctx context.Context, tenant *notifyv1alpha1.Tenant) (requeue time.Duration, err error) {
	row, err := r.Store.GetTenant(ctx, tenant.Name)
	if err != nil {
		return 0, fmt.Errorf("while reading the bot of tenant %s: %w", tenant.Name, err)
	}
	current := row.BotID
	spec := tenant.Spec.Bot
	if spec == nil {
		if current != bot.Shared {
			if err := r.leaveBot(ctx, tenant); err != nil {
				return 0, err
			}
		}
		tenant.ClearBot()
		return 0, nil
	}
	prevReason := tenant.BotReadyReason()
	if r.Bots == nil {
		r.botNotReady(tenant, prevReason, notifyv1alpha1.ReasonNotConfigured, "the operator cannot register bots: "+r.BotsNotConfigured.Error())
		return 0, r.showBot(ctx, tenant, current)
	}

	ref := spec.TokenSecretRef
	where := fmt.Sprintf("key %q of Secret %s/%s", ref.Key, ref.Namespace, ref.Name)
	secret := &corev1.Secret{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret)
	switch {
	case apierrors.IsForbidden(err):
		r.botNotReady(tenant, prevReason, notifyv1alpha1.ReasonSecretAccessDenied, fmt.Sprintf(
			"the operator may not read Secrets in namespace %q: bind the ClusterRole herald-operator-secrets "+
				"(<release>-operator-secrets with the Helm chart) to its ServiceAccount there with a RoleBinding (%v)", ref.Namespace, err))
		return min(accessWait, r.ResyncPeriod), r.showBot(ctx, tenant, current)
	case apierrors.IsNotFound(err):
		r.Secrets.WatchAll(ref.Namespace) // its creation wakes the Tenant
		r.botNotReady(tenant, prevReason, notifyv1alpha1.ReasonSecretNotFound, fmt.Sprintf("Secret %s/%s does not exist", ref.Namespace, ref.Name))
		return 0, r.showBot(ctx, tenant, current)
	case err != nil:
		return 0, fmt.Errorf("while reading Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	r.Secrets.WatchAll(ref.Namespace)
	value, ok := secret.Data[ref.Key]
	if !ok || len(value) == 0 {
		r.botNotReady(tenant, prevReason, notifyv1alpha1.ReasonSecretNotFound, fmt.Sprintf("Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.Key))
		return 0, r.showBot(ctx, tenant, current)
	}
	// As `herald tenant update --bot-token-file` reads it: a Secret made from a file often ends in a newline.
	token := strings.TrimSpace(string(value))
	if err := bot.CheckToken(token); err != nil {
		r.botNotReady(tenant, prevReason, notifyv1alpha1.ReasonTokenInvalid, fmt.Sprintf("%s does not hold a bot token: %v", where, err))
		return 0, r.showBot(ctx, tenant, current)
	}

	previous, err := r.useBot(ctx, tenant, prevReason, current, token, where)
	if err != nil || previous == bot.Shared {
		return 0, err
	}
	r.releaseBot(ctx, previous) // outside useBot's lock: one bot's lock at a time
	return 0, nil
}

// useBot registers the bot of token when needed, and moves the tenant onto it, under the bot's lock
// (botLock). It returns the own bot the tenant left, if it left one.
func (r *TenantReconciler) useBot(ctx context.Context, tenant *notifyv1alpha1.Tenant, prevReason string, current bot.ID,
	token, where string) (previous bot.ID, err error) {
	// A token starts with its bot's id (CheckToken): what is recorded of that bot says whether the token,
	// the settings and the webhook's URL are those of spec.bot already.
	id := tokenBot(token)
	lock := r.botLock(id)
	lock.Lock()
	defer lock.Unlock()
	settings := bot.Settings{RateLimit: tenant.BotRateLimit(), PaidBroadcast: tenant.Spec.Bot.PaidBroadcast}
	known, err := r.Store.GetBot(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return bot.Shared, fmt.Errorf("while reading bot %d: %w", id, err)
	}
	sameToken := err == nil && known.TokenDigest == bot.TokenDigest(token)
	// Registered with this token at this URL: nothing the platform holds needs changing. The settings are
	// Herald's own (the workers' rate and paid flag), recorded without a call.
	registered := sameToken && known.State == botstate.Ready && known.WebhookURL == r.Bots.PublicURL+bot.WebhookPath(id)
	var b store.Bot
	switch {
	case sameToken && known.State == botstate.TokenInvalid:
		// A worker's send met the platform's 401 with this very token: registering it again would fail
		// the same way, or (the platform briefly confused) undo the mark the workers rely on.
		r.botNotReady(tenant, prevReason, notifyv1alpha1.ReasonTokenInvalid, redact(fmt.Sprintf(
			"the messaging platform refused the token of @%s (bot %d) in %s (%s): put a new token there",
			known.Username, known.ID, where, known.StateMessage), token))
		return bot.Shared, r.showBot(ctx, tenant, current)
	case registered && known.RateLimit == settings.RateLimit && known.PaidBroadcast == settings.PaidBroadcast:
		b = known // registered as spec.bot says: no call to the platform
	case registered:
		// Other settings for a bot registered already. A bot's settings belong to the bot, which every
		// Tenant naming its token shares: while another Tenant on it asks for others, this one is reported
		// and changes nothing (registering again for each Tenant's settings gave the platform a new
		// webhook secret at every reconcile, refusing the updates in flight, and flipped the paid flag).
		others, err := r.disagreeing(ctx, tenant, id, settings)
		if err != nil {
			return bot.Shared, err
		}
		if len(others) > 0 {
			r.conflicting(tenant, prevReason, known, others, settings)
			return bot.Shared, r.showBot(ctx, tenant, current)
		}
		if err := r.Store.SetBotSettings(ctx, id, settings.RateLimit, settings.PaidBroadcast); err != nil {
			return bot.Shared, fmt.Errorf("while recording the settings of bot %d: %w", id, err)
		}
		log.FromContext(ctx).Info("bot settings changed", "bot", id, "rateLimit", settings.RateLimit, "paidBroadcast", settings.PaidBroadcast)
		r.Recorder.Eventf(tenant, nil, corev1.EventTypeNormal, "BotSettingsChanged", "RegisterBot",
			"@%s (bot %d) now has %s (no call to the platform)", known.Username, known.ID, describeSettings(settings.RateLimit, settings.PaidBroadcast))
		b = known
		b.RateLimit, b.PaidBroadcast = settings.RateLimit, settings.PaidBroadcast
	default:
		// A new token (or URL) must be registered whoever asks; but while another Tenant on the bot asks for
		// other settings, the registration keeps the bot's (it would flip the paid flag once otherwise) and
		// this Tenant is reported as in the registered case.
		var others []string
		if known.ID == id && (known.RateLimit != settings.RateLimit || known.PaidBroadcast != settings.PaidBroadcast) {
			if others, err = r.disagreeing(ctx, tenant, id, settings); err != nil {
				return bot.Shared, err
			}
		}
		asked := settings
		if len(others) > 0 {
			settings = bot.Settings{RateLimit: known.RateLimit, PaidBroadcast: known.PaidBroadcast}
		}
		if b, err = r.register(ctx, tenant, prevReason, token, where, settings, sameToken); err != nil || b.ID == bot.Shared {
			return bot.Shared, errors.Join(err, r.showBot(ctx, tenant, current))
		}
		if len(others) > 0 {
			r.conflicting(tenant, prevReason, known, others, asked)
			return bot.Shared, r.showBot(ctx, tenant, current)
		}
	}
	if current != b.ID {
		if previous, err = r.changeBot(ctx, tenant, b.ID, b.Username); err != nil {
			return bot.Shared, err
		}
	}
	tenant.SetBotReady(int64(b.ID), b.Username)
	return previous, nil
}

// conflicting reports that other Tenants on bot known ask for other settings than this one's (asked).
func (r *TenantReconciler) conflicting(tenant *notifyv1alpha1.Tenant, prevReason string, known store.Bot, others []string, asked bot.Settings) {
	r.botNotReady(tenant, prevReason, notifyv1alpha1.ReasonConflictingSettings, fmt.Sprintf(
		"@%s (bot %d) is shared with Tenant %s, which asks for other settings; a bot's settings are the bot's: "+
			"give every Tenant naming its token the same rateLimit and paidBroadcast. The bot keeps %s; this Tenant asks for %s",
		known.Username, known.ID, strings.Join(others, ", "), describeSettings(known.RateLimit, known.PaidBroadcast),
		describeSettings(asked.RateLimit, asked.PaidBroadcast)))
}

// disagreeing names the other Tenants that send through bot id (in the store) and ask for other settings
// than these (in their spec.bot). A Tenant being deleted, or without spec.bot, is leaving the bot and
// does not count.
func (r *TenantReconciler) disagreeing(ctx context.Context, tenant *notifyv1alpha1.Tenant, id bot.ID, settings bot.Settings) ([]string, error) {
	tenants, err := r.Store.ListTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("while listing the tenants of bot %d: %w", id, err)
	}
	var out []string
	for _, t := range tenants {
		if t.BotID != id || t.ID == tenant.Name {
			continue
		}
		other := &notifyv1alpha1.Tenant{}
		switch err := r.Client.Get(ctx, client.ObjectKey{Name: t.ID}, other); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("while reading Tenant %s, which shares bot %d: %w", t.ID, id, err)
		}
		if other.DeletionTimestamp != nil || other.Spec.Bot == nil {
			continue
		}
		if other.BotRateLimit() != settings.RateLimit || other.Spec.Bot.PaidBroadcast != settings.PaidBroadcast {
			out = append(out, other.Name)
		}
	}
	return out, nil
}

// describeSettings is a bot's settings as a Tenant's spec.bot names them.
func describeSettings(rateLimit int, paidBroadcast bool) string {
	rate := "the default rateLimit"
	if rateLimit > 0 {
		rate = "rateLimit " + strconv.Itoa(rateLimit)
	}
	return fmt.Sprintf("%s and paidBroadcast %t", rate, paidBroadcast)
}

// tokenBot is the id a token (checked with bot.CheckToken) starts with: its bot's.
func tokenBot(token string) bot.ID {
	head, _, _ := strings.Cut(token, ":")
	id, _ := bot.ParseID(head)
	return id
}

// botLock serialises, within the operator, what concerns one bot: two Tenants naming the same token
// register it one after the other (each registration gives the platform a new webhook secret, and the
// store must record the last one given), and a bot's webhook is not deleted as its last tenant leaves
// while another Tenant takes it up. Bots share a few locks: a lock is held for one bot at a time, and a
// registration is bounded by botCallTimeout.
func (r *TenantReconciler) botLock(id bot.ID) *sync.Mutex {
	return &r.botLocks[uint64(id)%uint64(len(r.botLocks))]
}

// register registers the bot of token with the platform and records it. A failure the user can fix is
// reported in the BotReady condition, and returns the zero Bot; a transient one is returned.
// recorded: the store's row of the bot holds this token.
func (r *TenantReconciler) register(ctx context.Context, tenant *notifyv1alpha1.Tenant, prevReason, token, where string,
	settings bot.Settings, recorded bool) (store.Bot, error) {
	callCtx, cancel := context.WithTimeout(ctx, botCallTimeout)
	defer cancel()
	b, err := r.Bots.Register(callCtx, token, settings)
	if err != nil {
		msg := redact(err.Error(), token)
		switch {
		case errors.Is(err, bot.ErrTokenInvalid):
			if recorded {
				// The token the workers send with is refused: they fail its notifications at once from now.
				id := tokenBot(token)
				if _, err := r.Store.SetBotState(ctx, id, botstate.TokenInvalid, msg); err != nil {
					return store.Bot{}, fmt.Errorf("while recording that bot %d's token is refused: %w", id, err)
				}
			}
			r.botNotReady(tenant, prevReason, notifyv1alpha1.ReasonTokenInvalid, fmt.Sprintf("the token in %s: %s", where, msg))
			return store.Bot{}, nil
		case errors.Is(err, bot.ErrWebhookFailed):
			r.botNotReady(tenant, prevReason, notifyv1alpha1.ReasonWebhookFailed, fmt.Sprintf(
				"@%s (bot %d): %s at %s (is HERALD_PUBLIC_URL a URL the platform accepts?)", b.Username, b.ID, msg, r.Bots.PublicURL+bot.WebhookPath(b.ID)))
			return store.Bot{}, nil
		}
		tenant.SetBotNotReady(notifyv1alpha1.ReasonPlatformUnavailable, msg+" (retrying)")
		return store.Bot{}, fmt.Errorf("while registering the bot of tenant %s: %s", tenant.Name, msg)
	}
	if err := r.Store.UpsertBot(ctx, b); err != nil {
		return store.Bot{}, fmt.Errorf("while recording bot %d: %w", b.ID, err)
	}
	log.FromContext(ctx).Info("bot registered", "bot", b.ID, "username", b.Username, "webhook", b.WebhookURL,
		"rateLimit", b.RateLimit, "paidBroadcast", b.PaidBroadcast)
	r.Recorder.Eventf(tenant, nil, corev1.EventTypeNormal, "BotRegistered", "RegisterBot",
		"registered @%s (bot %d): its updates go to %s", b.Username, b.ID, b.WebhookURL)
	return b, nil
}

// changeBot makes the tenant send through bot to (bot.Shared: the shared bot): the links made through the
// previous bot end (store.SetTenantBot). It returns the own bot the tenant left, if it left one, for the
// caller to release (releaseBot) once it holds no bot's lock.
func (r *TenantReconciler) changeBot(ctx context.Context, tenant *notifyv1alpha1.Tenant, to bot.ID, username string) (bot.ID, error) {
	change, err := r.Store.SetTenantBot(ctx, tenant.Name, to)
	if err != nil {
		return bot.Shared, fmt.Errorf("while changing the bot of tenant %s: %w", tenant.Name, err)
	}
	if !change.Changed {
		return bot.Shared, nil
	}
	now, before := describeBot(to, username), describeBot(change.Previous, "")
	log.FromContext(ctx).Info("the tenant's bot changed", "from", change.Previous, "to", to, "linksEnded", change.LinksEnded,
		"unlinked", change.Unlinked)
	if change.LinksEnded > 0 || change.Unlinked > 0 {
		r.Recorder.Eventf(tenant, nil, corev1.EventTypeWarning, "BotChanged", "ChangeBot",
			"the tenant sends through %s instead of %s: %d link(s) made through the previous bot ended, and %d notification(s) "+
				"waiting for those users ended unlinked; the users must link again", now, before, change.LinksEnded, change.Unlinked)
	} else {
		r.Recorder.Eventf(tenant, nil, corev1.EventTypeNormal, "BotChanged", "ChangeBot", "the tenant sends through %s instead of %s", now, before)
	}
	return change.Previous, nil
}

// leaveBot takes the tenant back to the shared bot, and releases the bot it left.
func (r *TenantReconciler) leaveBot(ctx context.Context, tenant *notifyv1alpha1.Tenant) error {
	previous, err := r.changeBot(ctx, tenant, bot.Shared, "")
	if err == nil && previous != bot.Shared {
		r.releaseBot(ctx, previous)
	}
	return err
}

func describeBot(id bot.ID, username string) string {
	switch {
	case id == bot.Shared:
		return "the shared bot"
	case username == "":
		return "bot " + strconv.FormatInt(int64(id), 10)
	}
	return "@" + username + " (bot " + strconv.FormatInt(int64(id), 10) + ")"
}

// releaseBot deletes the webhook of a bot no tenant sends through any more, so that the platform stops
// posting its updates to Herald, and marks the bot's row BotWebhookFailed so that a Tenant taking the bot
// up again registers its webhook anew. Best effort: without it the updates of an unused bot are refused
// or ignored, which harms nobody.
func (r *TenantReconciler) releaseBot(ctx context.Context, id bot.ID) {
	logger := log.FromContext(ctx).WithValues("bot", id)
	lock := r.botLock(id)
	lock.Lock()
	defer lock.Unlock()
	tenants, err := r.Store.ListTenants(ctx)
	if err != nil {
		logger.Info("the bot's webhook is left as it is: the tenants could not be listed", "error", err.Error())
		return
	}
	for _, t := range tenants {
		if t.BotID == id {
			return // another tenant sends through it
		}
	}
	if r.Bots == nil {
		logger.Info("the bot's webhook is left as it is: the operator has no HERALD_BOT_TOKEN_KEY to open its token")
		return
	}
	b, err := r.Store.GetBot(ctx, id)
	if err != nil {
		logger.Info("the bot's webhook is left as it is: its row could not be read", "error", err.Error())
		return
	}
	token, err := bot.OpenToken(r.Bots.Key, id, b.TokenSealed)
	if err != nil {
		logger.Info("the bot's webhook is left as it is", "error", err.Error())
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, botCallTimeout)
	defer cancel()
	if err := r.Bots.NewClient(token).DeleteWebhook(callCtx); err != nil {
		logger.Info("could not delete the webhook of a bot no tenant sends through", "error", redact(err.Error(), token))
		return
	}
	if _, err := r.Store.SetBotState(ctx, id, botstate.WebhookFailed, "no tenant sends through the bot: its webhook was deleted"); err != nil {
		logger.Info("could not record that the bot's webhook was deleted", "error", err.Error())
	}
	logger.Info("deleted the webhook of a bot no tenant sends through", "username", b.Username)
}

// showBot sets status.bot to the own bot the tenant sends through now (none for the shared bot), when
// spec.bot is not (yet) that bot.
func (r *TenantReconciler) showBot(ctx context.Context, tenant *notifyv1alpha1.Tenant, id bot.ID) error {
	if id == bot.Shared {
		tenant.SetBot(0, "")
		return nil
	}
	if s := tenant.Status.Bot; s != nil && s.ID == strconv.FormatInt(int64(id), 10) {
		return nil
	}
	b, err := r.Store.GetBot(ctx, id)
	if err != nil {
		return fmt.Errorf("while reading bot %d: %w", id, err)
	}
	tenant.SetBot(int64(b.ID), b.Username)
	return nil
}

// botNotReady records why spec.bot is not the tenant's working bot, with a Warning event when the reason
// is new (not at every reconcile: a steady state writes nothing).
func (r *TenantReconciler) botNotReady(tenant *notifyv1alpha1.Tenant, prevReason, reason, msg string) {
	tenant.SetBotNotReady(reason, msg)
	if prevReason != reason {
		r.Recorder.Eventf(tenant, nil, corev1.EventTypeWarning, reason, "RegisterBot", "%s", msg)
	}
}

// dropBot takes a deleted tenant off its own bot, as removing spec.bot does.
func (r *TenantReconciler) dropBot(ctx context.Context, tenant *notifyv1alpha1.Tenant) error {
	row, err := r.Store.GetTenant(ctx, tenant.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("while reading the bot of deleted tenant %s: %w", tenant.Name, err)
	case row.BotID == bot.Shared:
		return nil
	}
	return r.leaveBot(ctx, tenant)
}

// redact takes a bot token out of text bound for a status, an event, a log or an error: the Bot API's URLs
// hold it, and an error may quote one (internal/messenger scrubs its own; this holds for every path).
func redact(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, token, "<token>"), url.QueryEscape(token), "<token>")
}
