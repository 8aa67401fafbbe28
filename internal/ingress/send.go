package ingress

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/enqueue"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
)

// DefaultPriority applies when a send names none.
const DefaultPriority = 5

type sendRequest struct {
	UserID   *string         `json:"user_id"`
	Message  *string         `json:"message"`
	Priority json.RawMessage `json:"priority"`
}

type sendResponse struct {
	TrackingID string `json:"tracking_id"`
	Status     string `json:"status"`
}

// send is POST /v1/send: validate, brand, gate on a verified phone, then insert and produce in one
// transaction so that a 202 means the notification is both stored and on Kafka.
func (a *API) send(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r.Context())
	var req sendRequest
	if err := decodeObject(w, r, &req); err != nil {
		return err
	}
	userID, err := userIDField(req.UserID)
	if err != nil {
		return err
	}
	if req.Message == nil {
		return apierror.InvalidRequest.With("message is required")
	}
	if n := brand.Length(*req.Message); n < 1 || n > brand.MaxMessageLength {
		return apierror.InvalidRequest.With("message must be 1-%d characters (got %d)", brand.MaxMessageLength, n)
	}
	priority, err := parsePriority(req.Priority)
	if err != nil {
		return err
	}
	body := brand.Render(p.Label, *req.Message)
	if !brand.Fits(body) {
		return apierror.MessageTooLong.With("the branded message is %d characters; the messaging platform allows %d", brand.Length(body), brand.MaxLength)
	}
	var idem *store.Idempotency
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if !validIdempotencyKey(key) {
			return apierror.InvalidRequest.With("Idempotency-Key must be 1-255 printable ASCII characters")
		}
		idem = &store.Idempotency{Key: key, RequestHash: requestHash(userID, *req.Message, priority)}
	}

	id, err := uuid.NewV7() // time-ordered: inserts stay at the right edge of the primary key index
	if err != nil {
		return err
	}
	n := store.NewNotification{TrackingID: id.String(), Kind: store.KindTenant, TenantID: p.TenantID, UserID: userID, Priority: priority, Body: body}
	trackingID := n.TrackingID
	produceFailed := false
	if idem == nil {
		err = a.enqueuer.Enqueue(r.Context(), n)
		produceFailed = errors.Is(err, enqueue.ErrQueue)
	} else {
		// Idempotent sends take their own transaction: the key's row lock is what makes a concurrent
		// duplicate wait for, and then replay, the first answer.
		var publishErr error
		trackingID, _, publishErr, err = a.store.EnqueueTenant(r.Context(), n, idem, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, a.opts.ProduceTimeout)
			defer cancel()
			return a.producer.Publish(ctx, priority, queue.UserKey(p.TenantID, userID), queue.Envelope{V: queue.EnvelopeVersion, TrackingID: n.TrackingID, TenantID: p.TenantID})
		})
		if publishErr != nil {
			produceFailed, err = true, publishErr
		}
	}
	switch {
	case errors.Is(err, store.ErrUnverified):
		return apierror.PhoneUnverified.With("user %q has no verified phone: link the user and complete phone verification first", userID)
	case errors.Is(err, store.ErrIdempotencyConflict):
		return apierror.IdempotencyConflict
	case produceFailed:
		a.log.Warn("enqueue failed", "err", err, "tenant_id", p.TenantID)
		return apierror.QueueError
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusAccepted, sendResponse{TrackingID: trackingID, Status: "queued"})
	return nil
}

// parsePriority accepts an absent or null priority (the default) or a JSON integer 0..9; 5.5, "5", true,
// 5.0 and 5e0 are not integers.
func parsePriority(raw json.RawMessage) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return DefaultPriority, nil
	}
	if !integerLiteral.Match(raw) {
		return 0, apierror.InvalidRequest.With("priority must be an integer 0-9")
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil || v < 0 || v > 9 {
		return 0, apierror.InvalidRequest.With("priority must be an integer 0-9")
	}
	return v, nil
}

func validIdempotencyKey(k string) bool {
	if len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// requestHash identifies a send by its meaning, not its bytes: the same fields in another order or spacing
// are the same request.
func requestHash(userID, message string, priority int) [32]byte {
	b, _ := json.Marshal([]any{userID, message, priority})
	return sha256.Sum256(b)
}
