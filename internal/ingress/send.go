package ingress

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/outbox"
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

// send is POST /v1/send: validate and brand, then hand the notification to the outbox, which gates it on
// a verified phone, stores it and publishes it, so that a 202 means the notification is both stored and
// on Kafka.
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
	var idem *outbox.Idempotency
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if !validIdempotencyKey(key) {
			return apierror.InvalidRequest.With("Idempotency-Key must be 1-255 printable ASCII characters")
		}
		idem = &outbox.Idempotency{Key: key, RequestHash: requestHash(userID, *req.Message, priority)}
	}
	if err := a.takeSends(r.Context(), w, 1); err != nil {
		return err
	}
	results, _, err := a.outbox.Send(r.Context(), p.TenantID, []outbox.Item{{UserID: userID, Priority: priority, Body: body}}, idem)
	if err != nil {
		return a.outboxError(err)
	}
	res := results[0]
	if !res.Accepted() {
		if res.Code == outbox.CodeQueueError {
			a.log.Warn("send not queued: the broker did not acknowledge", "tenant_id", p.TenantID)
		}
		return apierror.ByCode(res.Code).With("%s", res.Message)
	}
	writeJSON(w, http.StatusAccepted, sendResponse{TrackingID: res.TrackingID, Status: res.Status})
	return nil
}

// outboxError maps what the outbox reports about a whole request to the catalogue; anything else is the
// store's (PostgreSQL: handle turns an unavailable database into 503).
func (a *API) outboxError(err error) error {
	switch {
	case errors.Is(err, outbox.ErrIdempotencyConflict):
		return apierror.IdempotencyConflict
	case errors.Is(err, outbox.ErrOverloaded), errors.Is(err, outbox.ErrClosed):
		return apierror.Overloaded
	}
	return err
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
