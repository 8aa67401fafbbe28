package updates

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/messenger"
)

// PollTimeout is how long one getUpdates call waits for updates (the platform allows up to 50 s).
const PollTimeout = 30

// Poll long-polls the shared bot's getUpdates and hands every update to rc.Handle, in order, until ctx is
// done. It is the local alternative to the webhook (no public URL needed); the platform refuses getUpdates
// while a webhook is set, so Poll removes the webhook first (pending updates are kept).
//
// Offsets: an update is confirmed (offset = its id + 1 on the next call) only after Handle returned without
// a transient error, so an update that could not be stored is fetched again. A non-transient failure is a
// bug that a retry would repeat: it is logged and the update skipped, as the platform eventually drops a
// webhook update that keeps failing.
func Poll(ctx context.Context, client *messenger.Client, rc *Receiver, logger *slog.Logger) error {
	return poll(ctx, bot.Shared, client, AllowedUpdates, rc, logger)
}

// poll is Poll for bot through, whose client is client, asking for the update kinds allowed (the shared
// bot's AllowedUpdates, or bot.AllowedUpdates as a tenant's bot was registered with). Its offset is its own:
// update ids are per bot.
func poll(ctx context.Context, through bot.ID, client *messenger.Client, allowed []string, rc *Receiver, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	if err := client.DeleteWebhook(ctx); err != nil {
		if ctx.Err() != nil {
			return nil //nolint:nilerr // stopped: ending is not an error
		}
		return fmt.Errorf("while removing the webhook before polling: %w", err)
	}
	logger.Info("polling for updates", "bot_id", int64(through), "allowed_updates", allowed)
	var offset int64
	backoff := newBackoff()
	for ctx.Err() == nil {
		batch, err := client.GetUpdates(ctx, offset, PollTimeout, allowed)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var apiErr *messenger.APIError
			if errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict {
				// A webhook set again meanwhile (the bot registered anew) stops getUpdates: remove it again.
				if err := client.DeleteWebhook(ctx); err != nil && ctx.Err() == nil {
					logger.Warn("could not remove the webhook that stops polling", "bot_id", int64(through), "err", err)
				}
			}
			d := backoff.next()
			logger.Warn("getUpdates failed; retrying", "bot_id", int64(through), "err", err, "retry_in", d)
			sleep(ctx, d)
			continue
		}
		backoff.reset()
		for _, u := range batch {
			for {
				hctx, cancel := context.WithTimeout(ctx, HandleTimeout)
				_, err := rc.handleFrom(hctx, through, u)
				cancel()
				if err == nil || !IsTransient(err) || ctx.Err() != nil {
					break
				}
				sleep(ctx, backoff.next())
			}
			if ctx.Err() != nil {
				return nil //nolint:nilerr // stopped: ending is not an error
			}
			backoff.reset()
			offset = u.UpdateID + 1
		}
	}
	return nil //nolint:nilerr // the loop ends when ctx does: stopping is not an error
}

// PollBots long-polls the shared bot (shared, as Poll does) and every tenant's bot of reg, one loop each
// with its own offset, until ctx is done; reg nil: the shared bot alone. A bot's loop starts when the
// registry lists it, starts again with its new token when it gets one, and stops while its token was refused
// by the platform (botstate.TokenInvalid, until it is registered anew) or cannot be opened. The registry
// must be refreshing (Registry.Run) for new bots to be seen. A failure of the shared bot's loop ends PollBots
// (as Poll's does); a tenant's bot's loop that fails is tried again with backoff, without touching the others.
func PollBots(ctx context.Context, shared *messenger.Client, reg *bot.Registry, rc *Receiver, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return Poll(gctx, shared, rc, logger) })
	if reg != nil {
		g.Go(func() error {
			pollOwnBots(gctx, reg, rc, logger)
			return nil
		})
	}
	return g.Wait()
}

// botLoop is the polling loop of a tenant's bot, with the client it polls with.
type botLoop struct {
	client *messenger.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// pollOwnBots keeps one loop per pollable bot of reg, checking the registry every bot.RefreshInterval.
func pollOwnBots(ctx context.Context, reg *bot.Registry, rc *Receiver, logger *slog.Logger) {
	loops := map[bot.ID]*botLoop{}
	defer func() {
		for _, l := range loops {
			l.cancel()
			<-l.done
		}
	}()
	unpolled := map[bot.ID]string{} // bots not polled, and why: said once per reason
	tick := time.NewTicker(bot.RefreshInterval)
	defer tick.Stop()
	for {
		want := map[bot.ID]*messenger.Client{}
		for _, b := range reg.Bots() {
			why := ""
			client, err := reg.Client(ctx, b.ID)
			switch {
			case b.State == botstate.TokenInvalid:
				why = "the platform refused its token; it is polled again once registered anew"
			case err != nil:
				why = err.Error()
			default:
				want[b.ID] = client
			}
			if why != unpolled[b.ID] {
				if why != "" {
					logger.Warn("a bot's updates are not polled", "bot_id", int64(b.ID), "reason", why)
				}
				unpolled[b.ID] = why
			}
		}
		for id, l := range loops {
			if want[id] != l.client { // gone, or a new token
				l.cancel()
				<-l.done
				delete(loops, id)
			}
		}
		for id, client := range want {
			if loops[id] == nil {
				loops[id] = startBotLoop(ctx, id, client, rc, logger)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// startBotLoop polls bot id with client until its context is cancelled, starting again with backoff when
// polling fails (its webhook could not be removed).
func startBotLoop(ctx context.Context, id bot.ID, client *messenger.Client, rc *Receiver, logger *slog.Logger) *botLoop {
	lctx, cancel := context.WithCancel(ctx)
	l := &botLoop{client: client, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		backoff := newBackoff()
		for lctx.Err() == nil {
			err := poll(lctx, id, client, bot.AllowedUpdates, rc, logger)
			if err == nil {
				return
			}
			d := backoff.next()
			logger.Warn("polling a bot failed; trying again", "bot_id", int64(id), "err", err, "retry_in", d)
			sleep(lctx, d)
		}
	}()
	return l
}

// backoff doubles from 100 ms up to 30 s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{} }

func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = 100 * time.Millisecond
	} else if b.d < 30*time.Second {
		b.d = min(2*b.d, 30*time.Second)
	}
	return b.d
}

func (b *backoff) reset() { b.d = 0 }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// SetWebhookURL makes the platform POST updates to webhookURL with the secret header, for the update kinds
// Herald handles (AllowedUpdates). The URL must be absolute http(s); the real platform accepts only https.
func SetWebhookURL(ctx context.Context, client *messenger.Client, webhookURL, secret string) error {
	u, err := url.Parse(webhookURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("the webhook URL must be an absolute http(s) URL, like https://herald.example.com" + Path)
	}
	if err := client.SetWebhook(ctx, webhookURL, secret, AllowedUpdates); err != nil {
		return fmt.Errorf("while setting the webhook: %w", err)
	}
	return nil
}
