package send

// Digests at the claim (spec v1-extensions §14): a claimed notification of a digest takes the digest's
// other items with it (store.GatherDigest: the digest closes, its waiting items move to delivering under
// this claim's lease), and they go as one message (internal/digest.Compose), whose outcome each item
// records under its own attempt: the same delivery, or the same failure. Everything after the gather —
// the user's stop, quiet hours (which hold the whole digest), the bot's rate, the send — happens once, for
// the message. A worker that dies while the message goes out leaves the items delivering; their leases
// run out, the redrive publishes them again, and the next claim gathers them again: the message is sent
// at most once more, as any notification may be (at least once).

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhq/herald/internal/digest"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/richtext"
)

// gather takes d's digest and makes d the digest's message: its body and entities composed from every
// item, d.Digest the items to finish.
func (s *Sender) gather(d notification.Delivery) (notification.Delivery, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	items, err := s.opts.Store.GatherDigest(ctx, d, s.opts.Lease)
	if err != nil {
		return d, err
	}
	parts := make([]digest.Item, len(items))
	for i, it := range items {
		ents, err := richtext.DecodeEntities(it.Entities)
		if err != nil {
			return d, fmt.Errorf("the stored entities of %s: %w", it.TrackingID, err)
		}
		parts[i] = digest.Item{Body: it.Body, Entities: ents}
	}
	m := digest.Compose(parts)
	entities, err := richtext.EncodeEntities(m.Entities)
	if err != nil {
		return d, fmt.Errorf("the entities of a digest's message: %w", err)
	}
	d.Body, d.Entities, d.Digest = m.Text, entities, items
	return d, nil
}

// each runs f for every notification d stands for: the items of its digest (each under its own attempt),
// or d alone. It reports false when one of them reported false (the worker was killed).
func each(d notification.Delivery, f func(notification.Delivery) bool) bool {
	if len(d.Digest) == 0 {
		return f(d)
	}
	ok := true
	for _, it := range d.Digest {
		one := d
		one.TrackingID, one.Attempts, one.Digest = it.TrackingID, it.Attempts, nil
		ok = f(one) && ok
	}
	return ok
}
