package ingress

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/outbox"
)

// DefaultPriority applies when a send names none.
const DefaultPriority = 5

// Limits of the send options (v1 extensions §1) and of a batch (§5).
const (
	MaxMetadataKeys        = 16
	MaxMetadataValueLength = 500 // code points
	MaxScheduleAhead       = 30 * 24 * time.Hour
	MaxBatchItems          = 100
	// MaxBatchBodyBytes lets every item of a full batch be as large as a single send may be.
	MaxBatchBodyBytes = MaxBatchItems * MaxBodyBytes
)

var (
	metadataKey = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`)
	// categoryName is the rule of a category (v1 extensions §9): of a send, and of an opt-out.
	categoryName = regexp.MustCompile(`^[a-z0-9_.-]{1,40}$`)
)

// sendRequest is the body of POST /v1/send and each item of POST /v1/send/batch. The options are raw so
// that null means "not given" (as for priority) and a wrong type gets a message that says what is wrong.
type sendRequest struct {
	UserID    *string         `json:"user_id"`
	Message   *string         `json:"message"`
	Priority  json.RawMessage `json:"priority"`
	Metadata  json.RawMessage `json:"metadata"`
	SendAt    json.RawMessage `json:"send_at"`
	ExpiresAt json.RawMessage `json:"expires_at"`
	Category  json.RawMessage `json:"category"`
	// QuietHours: "respect" or "ignore" the tenant's quiet hours (§14).
	QuietHours json.RawMessage `json:"quiet_hours"`
	// Digest: {"key", "window", "max_items"} (§14).
	Digest json.RawMessage `json:"digest"`
	// The rich options (§10).
	Format         json.RawMessage `json:"format"`
	Buttons        json.RawMessage `json:"buttons"`
	Silent         json.RawMessage `json:"silent"`
	ProtectContent json.RawMessage `json:"protect_content"`
	LinkPreview    json.RawMessage `json:"link_preview"`
	// ReplaceKey (§13): a status message that updates.
	ReplaceKey json.RawMessage `json:"replace_key"`
	// The template fields (§12), instead of message.
	Template        *string         `json:"template"`
	Data            json.RawMessage `json:"data"`
	TemplateVersion json.RawMessage `json:"template_version"`
	Locale          json.RawMessage `json:"locale"`
}

type sendResponse struct {
	TrackingID string `json:"tracking_id"`
	Status     string `json:"status"`
}

// validSend is a send that passed validation: the outbox item, and what its meaning for an
// Idempotency-Key is made of (computed only when the request carries one).
type validSend struct {
	item    outbox.Item
	message string // before branding: the tenant's text, or its markup
	rich    richOptions
	tmpl    *templated // a templated send (§12); nil: none
	quiet   string     // the quiet_hours option as given (§14); "": absent
}

func (v validSend) meaning() []byte {
	it := v.item
	if v.tmpl != nil {
		// As given (the template's name, version, locale and data), not as rendered: a retry after the
		// template changed still means its first try. The template decides format and buttons; the flags
		// are the send's.
		fields := sendFields(it.UserID, "", it.Priority, it.Metadata, it.SendAt, it.ExpiresAt, it.Category)
		fields = append(fields, v.tmpl.meaning()...)
		b, _ := json.Marshal(withReplaceKey(v.withQuiet(append(fields, v.rich.Silent, v.rich.ProtectContent, !v.rich.NoLinkPreview)), it.ReplaceKey))
		return b
	}
	fields := sendFields(it.UserID, v.message, it.Priority, it.Metadata, it.SendAt, it.ExpiresAt, it.Category)
	b, _ := json.Marshal(withReplaceKey(v.withQuiet(v.rich.meaning(fields)), it.ReplaceKey))
	return b
}

// withQuiet adds the quiet_hours option to a meaning only when it was given, so that keys recorded before
// it existed still match.
func (v validSend) withQuiet(fields []any) []any {
	if v.quiet != "" {
		fields = append(fields, "quiet_hours", v.quiet)
	}
	if d := v.item.Digest; d != nil {
		fields = append(fields, "digest", d.Key, int(d.Window.Seconds()), d.MaxItems)
	}
	return fields
}

// withReplaceKey appends a send's replace_key (§13) to its meaning, only when it has one: a key recorded
// before replace_key existed still matches its send.
func withReplaceKey(fields []any, key string) []any {
	if key == "" {
		return fields
	}
	return append(fields, map[string]string{"replace_key": key})
}

// withTemplate records on a validated send the template it was rendered from.
func (v validSend) withTemplate(t *templated) validSend {
	if t != nil {
		v.tmpl = t
		v.item.Template = &t.ref
	}
	return v
}

// validateSend checks one send (the body of POST /v1/send, or an item of a batch: the same code for both)
// and brands it with the key's label. Errors are catalogued (invalid_request, or
// message_too_long_after_branding).
func validateSend(req sendRequest, label string, now time.Time) (validSend, error) {
	userID, err := userIDField(req.UserID)
	if err != nil {
		return validSend{}, err
	}
	if req.Message == nil {
		return validSend{}, apierror.InvalidRequest.With("message is required")
	}
	rich, err := parseRichOptions(req)
	if err != nil {
		return validSend{}, err
	}
	html := rich.Format == notification.FormatHTML
	// Markup's own length is bounded by the body's; its visible text is checked once parsed (brandHTML).
	if n := brand.Length(*req.Message); !html && (n < 1 || n > brand.MaxMessageLength) {
		return validSend{}, apierror.InvalidRequest.With("message must be 1-%d characters (got %d)", brand.MaxMessageLength, n)
	}
	if blank(*req.Message) {
		return validSend{}, apierror.InvalidRequest.With("message must not be blank: it holds only white space")
	}
	if !storable(*req.Message) {
		return validSend{}, apierror.InvalidRequest.With("message %s", nulRule)
	}
	priority, err := parsePriority(req.Priority)
	if err != nil {
		return validSend{}, err
	}
	metadata, err := parseMetadata(req.Metadata)
	if err != nil {
		return validSend{}, err
	}
	sendAt, err := parseTimestamp("send_at", req.SendAt)
	if err != nil {
		return validSend{}, err
	}
	expiresAt, err := parseTimestamp("expires_at", req.ExpiresAt)
	if err != nil {
		return validSend{}, err
	}
	category, err := parseCategory(req.Category)
	if err != nil {
		return validSend{}, err
	}
	replaceKey, err := parseReplaceKey(req.ReplaceKey)
	if err != nil {
		return validSend{}, err
	}
	quietIgnore, quietGiven, err := parseQuietHours(req.QuietHours, priority)
	if err != nil {
		return validSend{}, err
	}
	dig, err := parseDigest(req.Digest)
	if err != nil {
		return validSend{}, err
	}
	if dig != nil && rich.buttons != nil {
		return validSend{}, apierror.InvalidRequest.With("buttons cannot go with digest: a digest's message carries no buttons")
	}
	if dig != nil && sendAt != nil {
		return validSend{}, apierror.InvalidRequest.With("send_at cannot go with digest: a digest's items are sent when its window ends")
	}
	if dig != nil && replaceKey != "" {
		return validSend{}, apierror.InvalidRequest.With("replace_key cannot go with digest: a digest's message is one of its own, not a key's")
	}
	if sendAt != nil && sendAt.Sub(now) > MaxScheduleAhead {
		return validSend{}, apierror.InvalidRequest.With("send_at must be at most 30 days ahead")
	}
	if expiresAt != nil {
		switch {
		case !expiresAt.After(now):
			return validSend{}, apierror.InvalidRequest.With("expires_at must be in the future")
		case sendAt != nil && !expiresAt.After(*sendAt):
			return validSend{}, apierror.InvalidRequest.With("expires_at must be later than send_at")
		case expiresAt.Sub(now) > MaxScheduleAhead:
			return validSend{}, apierror.InvalidRequest.With("expires_at must be at most 30 days ahead")
		}
	}
	var body string
	if html {
		// What was validated is what is sent: the parsed text and its entities are stored as the worker
		// sends them, not the markup, so no later parser (or change of it) can read a message otherwise.
		if body, rich.Entities, err = brandHTML(label, *req.Message); err != nil {
			return validSend{}, err
		}
	} else {
		body = brand.Render(label, *req.Message)
		if !brand.Fits(body) {
			return validSend{}, tooLongAfterBranding(brand.Length(body), brand.Length(*req.Message))
		}
	}
	return validSend{
		item: outbox.Item{UserID: userID, Priority: priority, Body: body, Metadata: metadata, SendAt: sendAt, ExpiresAt: expiresAt,
			Category: category, Rich: rich.Rich, ReplyMarkup: rich.buttons, ReplaceKey: replaceKey, QuietIgnore: quietIgnore, Digest: dig},
		message: *req.Message,
		rich:    rich,
		quiet:   quietGiven,
	}, nil
}

// send is POST /v1/send: validate and brand, then hand the notification to the outbox, which gates it on
// a verified phone and the user's opt-outs (409 user_opted_out), stores it and publishes it (or keeps it scheduled), so that a 202 means the
// notification is both stored and on Kafka, or stored and waiting for its send_at.
func (a *API) send(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r.Context())
	var req sendRequest
	if err := decodeObject(w, r, &req); err != nil {
		return err
	}
	tms, errs, err := a.resolveTemplates(r.Context(), p.TenantID, []*sendRequest{&req})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		return errs[0]
	}
	v, err := validateSend(req, p.Label, time.Now())
	if err != nil {
		return err
	}
	v = v.withTemplate(tms[0])
	idem, err := idempotency(r, v.meaning)
	if err != nil {
		return err
	}
	if err := a.admitSends(w, r, 1); err != nil {
		return err
	}
	items := []outbox.Item{v.item}
	if err := a.holdForQuietHours(r.Context(), p, items, time.Now()); err != nil {
		return err
	}
	results, _, err := a.outbox.Send(r.Context(), p.TenantID, items, idem)
	if err != nil {
		return a.outboxError(err)
	}
	res := results[0]
	if !res.Accepted() {
		if res.Code == apierror.QueueError.Code {
			a.log.Warn("send not queued: the broker did not acknowledge", "tenant_id", p.TenantID)
		}
		return apierror.ByCode(res.Code).With("%s", res.Message)
	}
	writeJSON(w, http.StatusAccepted, sendResponse{TrackingID: res.TrackingID, Status: res.Status})
	return nil
}

type batchRequest struct {
	Notifications *[]json.RawMessage `json:"notifications"`
}

type batchResponse struct {
	Results []outbox.Result `json:"results"`
}

// sendBatch is POST /v1/send/batch: each item is validated (by validateSend, as POST /v1/send does), gated
// and queued on its own, and answered in its place; the accepted ones go through the outbox as one
// request (one transaction, one produce) and an Idempotency-Key covers the whole batch. An invalid item
// becomes a refused outbox item, so that it keeps its place and a replay answers it the same way. Only a
// malformed envelope (not an object, no array, 0 or more than 100 items) fails the whole request. A batch
// without a valid item counts one request against the tenant's limits, not sends.
func (a *API) sendBatch(w http.ResponseWriter, r *http.Request) error {
	select {
	case a.batchSlots <- struct{}{}:
		defer func() { <-a.batchSlots }()
	default:
		// A batch may be 100 times the body of a send: their number in flight bounds the memory they hold.
		return apierror.Overloaded
	}
	p := principalOf(r.Context())
	var req batchRequest
	if err := decodeObjectMax(w, r, &req, MaxBatchBodyBytes); err != nil {
		return err
	}
	if req.Notifications == nil {
		return apierror.InvalidRequest.With("notifications must be an array of 1-%d send requests", MaxBatchItems)
	}
	raw := *req.Notifications
	if len(raw) == 0 || len(raw) > MaxBatchItems {
		return apierror.InvalidRequest.With("notifications must hold 1-%d items (got %d)", MaxBatchItems, len(raw))
	}
	now := time.Now()
	items := make([]outbox.Item, len(raw))
	valids := make([]*validSend, len(raw))
	valid := 0
	// Decode every item, then resolve the templated ones together (one read of their users' locales).
	srs := make([]*sendRequest, len(raw))
	decodeErrs := make([]error, len(raw))
	for i, b := range raw {
		var sr sendRequest
		if decodeErrs[i] = decodeStrict(b, &sr, "each item"); decodeErrs[i] == nil {
			srs[i] = &sr
		}
	}
	tms, templateErrs, err := a.resolveTemplates(r.Context(), p.TenantID, srs)
	if err != nil {
		return err
	}
	for i := range raw {
		err := cmp.Or(decodeErrs[i], templateErrs[i])
		var v validSend
		if err == nil {
			v, err = validateSend(*srs[i], p.Label, now)
			v = v.withTemplate(tms[i])
		}
		if err != nil {
			e, _ := apierror.From(err)
			items[i] = outbox.Item{Refused: &outbox.Result{Code: e.Code, Message: e.Message}}
			continue
		}
		items[i], valids[i] = v.item, &v
		valid++
	}
	idem, err := idempotency(r, func() []byte {
		meanings := make([]json.RawMessage, len(raw))
		for i, v := range valids {
			if v == nil {
				meanings[i] = compact(raw[i]) // an invalid item means what it says, byte for byte
			} else {
				meanings[i] = v.meaning()
			}
		}
		m, _ := json.Marshal(meanings)
		return m
	})
	if err != nil {
		return err
	}
	if valid == 0 {
		// Nothing to store, so nothing to ask the database (an Idempotency-Key keeps nothing either, as for
		// any request that stored nothing). It costs one request, as every route that is not a send does.
		if err := a.takeRequest(r.Context(), w); err != nil {
			return err
		}
		results := make([]outbox.Result, len(items))
		for i, it := range items {
			results[i] = *it.Refused
		}
		writeJSON(w, http.StatusOK, batchResponse{Results: results})
		return nil
	}
	if err := a.admitSends(w, r, valid); err != nil {
		return err
	}
	if err := a.holdForQuietHours(r.Context(), p, items, now); err != nil {
		return err
	}
	results, _, err := a.outbox.Send(r.Context(), p.TenantID, items, idem)
	if err != nil {
		return a.outboxError(err)
	}
	failed := 0
	for _, res := range results {
		if res.Code == apierror.QueueError.Code {
			failed++
		}
	}
	if failed > 0 {
		a.log.Warn("batch items not queued: the broker did not acknowledge", "tenant_id", p.TenantID, "items", failed)
	}
	writeJSON(w, http.StatusOK, batchResponse{Results: results})
	return nil
}

// admitSends spends the tenant's send rate (v1 extensions §8) before anything is stored: a send counts 1, a
// batch the number of its valid items, one by one. A batch with more valid items than the tenant's burst
// could never pass; it is refused saying so rather than told to retry.
func (a *API) admitSends(w http.ResponseWriter, r *http.Request, n int) error {
	if lim, _ := a.limitsOf(principalOf(r.Context())); n > lim.Burst {
		return apierror.RateLimited.With("the batch has %d valid items and the tenant's burst allows at most %d at once: send it in smaller batches", n, lim.Burst).After(time.Second)
	}
	return a.takeSends(r.Context(), w, n)
}

// idempotency reads the Idempotency-Key header, if any, for a request whose meaning is given (computed
// only when there is a key).
func idempotency(r *http.Request, meaning func() []byte) (*outbox.Idempotency, error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return nil, nil
	}
	if !validIdempotencyKey(key) {
		return nil, apierror.InvalidRequest.With("Idempotency-Key must be 1-255 printable ASCII characters")
	}
	return &outbox.Idempotency{Key: key, RequestHash: sha256.Sum256(meaning())}, nil
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
	if absent(raw) {
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

// parseMetadata accepts an absent or null metadata, or an object of at most 16 string values under keys
// of 1-40 of A-Za-z0-9_.-, each value at most 500 code points without a NUL (stored in jsonb). It returns
// nil for none.
func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	if absent(raw) {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &fields) != nil {
		return nil, apierror.InvalidRequest.With("metadata must be an object of string values")
	}
	if len(fields) > MaxMetadataKeys {
		return nil, apierror.InvalidRequest.With("metadata may hold at most %d keys (got %d)", MaxMetadataKeys, len(fields))
	}
	m := make(map[string]string, len(fields))
	for k, v := range fields {
		if !metadataKey.MatchString(k) {
			return nil, apierror.InvalidRequest.With("metadata key %q must be 1-40 characters of A-Za-z0-9_.-", k)
		}
		var s string
		if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
			return nil, apierror.InvalidRequest.With("metadata value of %q must be a string", k)
		}
		if n := brand.Length(s); n > MaxMetadataValueLength {
			return nil, apierror.InvalidRequest.With("metadata value of %q is %d characters; at most %d", k, n, MaxMetadataValueLength)
		}
		if !storable(s) {
			return nil, apierror.InvalidRequest.With("metadata value of %q %s", k, nulRule)
		}
		m[k] = s
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// parseTimestamp accepts an absent or null field, or an RFC 3339 timestamp string.
func parseTimestamp(field string, raw json.RawMessage) (*time.Time, error) {
	if absent(raw) {
		return nil, nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return nil, apierror.InvalidRequest.With("%s must be an RFC 3339 timestamp string", field)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, apierror.InvalidRequest.With("%s must be an RFC 3339 timestamp, like 2026-01-02T15:04:05Z", field)
	}
	return &t, nil
}

// parseCategory accepts an absent or null category (none: "") or a string of 1-40 of a-z0-9_.-.
func parseCategory(raw json.RawMessage) (string, error) {
	if absent(raw) {
		return "", nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil || !categoryName.MatchString(s) {
		return "", apierror.InvalidRequest.With("category must be a string of 1-40 characters of a-z0-9_.-")
	}
	return s, nil
}

// parseReplaceKey accepts an absent or null replace_key (none: "") or a string of 1-64 of A-Za-z0-9_.:-
// (§13: notification.ReplaceKeyPattern).
func parseReplaceKey(raw json.RawMessage) (string, error) {
	if absent(raw) {
		return "", nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil || !notification.ReplaceKeyPattern.MatchString(s) {
		return "", apierror.InvalidRequest.With("replace_key must be a string of 1-64 characters of A-Z, a-z, 0-9 and _.:-")
	}
	return s, nil
}

func absent(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

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

// sendMeaning identifies a send by its meaning, not its bytes: the same fields in another order or spacing
// are the same request. A send without the options means what it meant before they existed, so keys
// recorded then still match: the v1 options (metadata, send_at, expires_at) come only when one is given, the
// category only when it is, the rich options (§10) only when one of them is given (richOptions.meaning).
func sendMeaning(userID, message string, priority int, metadata map[string]string, sendAt, expiresAt *time.Time, category string) []byte {
	b, _ := json.Marshal(sendFields(userID, message, priority, metadata, sendAt, expiresAt, category))
	return b
}

// sendFields are the fields of sendMeaning, before the rich options.
func sendFields(userID, message string, priority int, metadata map[string]string, sendAt, expiresAt *time.Time, category string) []any {
	fields := []any{userID, message, priority}
	if metadata != nil || sendAt != nil || expiresAt != nil || category != "" {
		ts := func(t *time.Time) any {
			if t == nil {
				return nil
			}
			return t.UTC().Format(time.RFC3339Nano)
		}
		fields = append(fields, metadata, ts(sendAt), ts(expiresAt)) // json sorts map keys
	}
	if category != "" {
		fields = append(fields, category)
	}
	return fields
}

// compact returns b without insignificant whitespace (b is valid JSON: the envelope decoded).
func compact(b []byte) json.RawMessage {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}

// tooLongAfterBranding says what the caller can act on: how long a message may be with the tenant's label,
// not only that the branded one is over the platform's limit.
func tooLongAfterBranding(branded, message int) error {
	usable := brand.MaxLength - (branded - message)
	return apierror.MessageTooLong.With("the branded message is %d characters; the messaging platform allows %d, so with the label a message may hold at most %d characters (this one has %d)",
		branded, brand.MaxLength, usable, message)
}
