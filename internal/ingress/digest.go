package ingress

// The send option digest (spec v1-extensions §14). The join itself is the store's (Tx.JoinDigests, in the
// transaction that stores the item): this file only validates the option.

import (
	"encoding/json"
	"regexp"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/digest"
	"github.com/heraldhq/herald/internal/notification"
)

var digestKey = regexp.MustCompile(digest.KeyPattern)

// digestOption is the option as sent; its fields are raw so that a wrong type gets a message that says so.
type digestOption struct {
	Key      *string         `json:"key"`
	Window   json.RawMessage `json:"window"`
	MaxItems json.RawMessage `json:"max_items"`
}

// parseDigest reads the option: absent or null is none; otherwise an object {key, window, max_items}.
func parseDigest(raw json.RawMessage) (*notification.Digest, error) {
	if absent(raw) {
		return nil, nil
	}
	var o digestOption
	if err := decodeStrict(raw, &o, "digest"); err != nil {
		return nil, err
	}
	if o.Key == nil || !digestKey.MatchString(*o.Key) {
		return nil, apierror.InvalidRequest.With("digest.key must be 1-64 characters of A-Za-z0-9_.:-")
	}
	window, ok := intOption(o.Window)
	if !ok || window < digest.MinWindowSeconds || window > digest.MaxWindowSeconds {
		return nil, apierror.InvalidRequest.With("digest.window must be an integer %d-%d (seconds)", digest.MinWindowSeconds, digest.MaxWindowSeconds)
	}
	maxItems := digest.MaxItems
	if !absent(o.MaxItems) {
		if maxItems, ok = intOption(o.MaxItems); !ok || maxItems < digest.MinItems || maxItems > digest.MaxItems {
			return nil, apierror.InvalidRequest.With("digest.max_items must be an integer %d-%d", digest.MinItems, digest.MaxItems)
		}
	}
	return &notification.Digest{Key: *o.Key, Window: time.Duration(window) * time.Second, MaxItems: maxItems}, nil
}

// intOption reads a JSON integer (not 5.0, "5" or 5e0).
func intOption(raw json.RawMessage) (int, bool) {
	if absent(raw) || !integerLiteral.Match(raw) {
		return 0, false
	}
	var v int
	if json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	return v, true
}
