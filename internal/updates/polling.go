package updates

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
)

// PollTimeout is how long one getUpdates call waits for updates (the platform allows up to 50 s).
const PollTimeout = 30

// Poll long-polls getUpdates and hands every update to rc.Handle, in order, until ctx is done. It is the
// local alternative to the webhook (no public URL needed); the platform refuses getUpdates while a webhook
// is set, so Poll removes the webhook first (pending updates are kept).
//
// Offsets: an update is confirmed (offset = its id + 1 on the next call) only after Handle returned without
// a transient error, so an update that could not be stored is fetched again. A non-transient failure is a
// bug that a retry would repeat: it is logged and the update skipped, as the platform eventually drops a
// webhook update that keeps failing.
func Poll(ctx context.Context, client *messenger.Client, rc *Receiver, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	if err := client.DeleteWebhook(ctx); err != nil {
		if ctx.Err() != nil {
			return nil //nolint:nilerr // stopped: ending is not an error
		}
		return fmt.Errorf("while removing the webhook before polling: %w", err)
	}
	logger.Info("polling for updates", "allowed_updates", AllowedUpdates)
	var offset int64
	backoff := newBackoff()
	for ctx.Err() == nil {
		batch, err := client.GetUpdates(ctx, offset, PollTimeout, AllowedUpdates)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			d := backoff.next()
			logger.Warn("getUpdates failed; retrying", "err", err, "retry_in", d)
			sleep(ctx, d)
			continue
		}
		backoff.reset()
		for _, u := range batch {
			for {
				hctx, cancel := context.WithTimeout(ctx, HandleTimeout)
				_, err := rc.Handle(hctx, u)
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
