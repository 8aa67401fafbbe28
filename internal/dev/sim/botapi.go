package sim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/messenger"
)

// botError is a Bot API error answer.
type botError struct {
	code        int
	description string
	retryAfter  int
}

func (e *botError) Error() string { return e.description }

var (
	errUnauthorized   = &botError{code: 401, description: "Unauthorized"}
	errNotFound       = &botError{code: 404, description: "Not Found"}
	errMethodNotFound = &botError{code: 404, description: "Not Found: method not found"}
	errChatNotFound   = &botError{code: 400, description: "Bad Request: chat not found"}
	errCantInitiate   = &botError{code: 403, description: "Forbidden: bot can't initiate conversation with a user"}
	errBlocked        = &botError{code: 403, description: "Forbidden: bot was blocked by the user"}
	errDeactivated    = &botError{code: 403, description: "Forbidden: user is deactivated"}
	errEmptyText      = &botError{code: 400, description: "Bad Request: message text is empty"}
	errTooLong        = &botError{code: 400, description: "Bad Request: message is too long"}
	errEmptyChatID    = &botError{code: 400, description: "Bad Request: chat_id is empty"}
	errBadMarkup      = &botError{code: 400, description: "Bad Request: can't parse reply keyboard markup JSON object"}
	errInternal       = &botError{code: 500, description: "Internal Server Error"}
	errWebhookActive  = &botError{code: 409, description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
	errPollConflict   = &botError{code: 409, description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
	errBadSecret      = &botError{code: 400, description: "Bad Request: secret token contains unallowed characters"}
	errBadWebhookURL  = &botError{code: 400, description: "Bad Request: bad webhook: invalid URL"}
)

func tooManyRequests(retryAfter int) *botError {
	return &botError{code: 429, description: "Too Many Requests: retry after " + strconv.Itoa(retryAfter), retryAfter: retryAfter}
}

func badRequest(format string, args ...any) *botError {
	return &botError{code: 400, description: "Bad Request: " + fmt.Sprintf(format, args...)}
}

// maxTextLength is the platform's limit for a message text, counted here in code points.
const maxTextLength = 4096

var secretPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// serveBotAPI answers /bot{token}/{method}. Method names are case-insensitive, as on the platform.
func (s *Server) serveBotAPI(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	slash := strings.LastIndexByte(rest, '/')
	if !ok || slash < 0 {
		writeBot(w, nil, errNotFound)
		return
	}
	token, method := rest[:slash], strings.ToLower(rest[slash+1:])
	b := s.botForToken(token, r.Method == http.MethodPost)
	if b == nil {
		writeBot(w, nil, errUnauthorized)
		return
	}
	if r.Method != http.MethodPost && method != "getme" && method != "getwebhookinfo" {
		// A page's image or link sends a GET from any site, without the checks a POST gets (SameOriginJSON):
		// only what reads answers one. Herald's client POSTs every method.
		writeBot(w, nil, badRequest("%s changes state: POST it as JSON", rest[slash+1:]))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeBot(w, nil, badRequest("can't read the request"))
		return
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	var result any
	switch method {
	case "getme":
		s.mu.Lock()
		result = b.user()
		s.mu.Unlock()
	case "sendmessage":
		result, err = s.sendMessage(r, b, body)
	case "setwebhook":
		result, err = s.setWebhook(b, body)
	case "deletewebhook":
		result, err = s.deleteWebhook(b, body)
	case "getwebhookinfo":
		result = (&BotHandle{s: s, b: b}).WebhookInfo()
	case "getupdates":
		result, err = s.getUpdates(r, b, body)
	case "editmessagetext":
		result, err = s.editMessageText(r, b, body)
	case "deletemessage":
		result, err = s.deleteMessage(b, body)
	case "answercallbackquery":
		result, err = s.answerCallbackQuery(b, body)
	default:
		err = errMethodNotFound
	}
	if errors.Is(err, errHangUp) {
		return // the client gave up or the simulator is closing; nobody reads an answer
	}
	writeBot(w, result, err)
}

var errHangUp = errors.New("hung up")

// botNotFound answers a path that is no Bot API method, as the platform does.
func botNotFound(w http.ResponseWriter, _ *http.Request) { writeBot(w, nil, errNotFound) }

func writeBot(w http.ResponseWriter, result any, err error) {
	w.Header().Set("Content-Type", "application/json")
	var resp messenger.Response
	status := http.StatusOK
	if err != nil {
		var be *botError
		if !errors.As(err, &be) {
			be = badRequest("%v", err)
		}
		status = be.code
		resp = messenger.Response{ErrorCode: be.code, Description: be.description}
		if be.retryAfter > 0 {
			resp.Parameters = &messenger.ResponseParameters{RetryAfter: be.retryAfter}
		}
	} else {
		raw, mErr := apierror.EncodeJSON(result) // the platform does not escape HTML in its answers either
		if mErr != nil {
			status, resp = 500, messenger.Response{ErrorCode: 500, Description: "Internal Server Error"}
		} else {
			resp = messenger.Response{OK: true, Result: raw}
		}
	}
	w.WriteHeader(status)
	b, _ := apierror.EncodeJSON(resp)
	_, _ = w.Write(b)
}

// decodeParams decodes a JSON body into params; a malformed body is the client's error.
func decodeParams(body []byte, params any) error {
	if err := json.Unmarshal(body, params); err != nil {
		return badRequest("can't parse the request: %v", err)
	}
	return nil
}

// chatID accepts chat_id as a number or a numeric string, as the platform does.
type chatID struct {
	set bool
	id  int64
}

func (c *chatID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	c.set = true
	switch v := v.(type) {
	case float64:
		c.id = int64(v)
	case string:
		// "@channelusername" names no chat the simulator knows: it stays 0, "chat not found".
		c.id, _ = strconv.ParseInt(v, 10, 64)
	}
	return nil
}

type sendMessageParams struct {
	ChatID      chatID          `json:"chat_id"`
	Text        string          `json:"text"`
	Entities    json.RawMessage `json:"entities"`
	ReplyMarkup json.RawMessage `json:"reply_markup"`
	// AllowPaidBroadcast lets the send past the bot's rate (up to PaidBroadcastRate) when the bot is allowed
	// paid broadcasts; for a bot that is not, it changes nothing.
	AllowPaidBroadcast bool `json:"allow_paid_broadcast"`
	// Kept on the message (SentMessage), as the recipient's app would honour them.
	DisableNotification bool                          `json:"disable_notification"`
	ProtectContent      bool                          `json:"protect_content"`
	LinkPreviewOptions  *messenger.LinkPreviewOptions `json:"link_preview_options"`
}

// sendMessage answers like the platform: validation, then injected faults, then rate limits, then the
// state of the chat. Rate limits are checked on arrival and latency is added afterwards, as a real platform
// counts a request when it receives it.
func (s *Server) sendMessage(r *http.Request, b *bot, body []byte) (any, error) {
	var p sendMessageParams
	if err := decodeParams(body, &p); err != nil {
		return nil, err
	}
	markup, err := normalizeMarkup(p.ReplyMarkup)
	entities, entitiesErr := parseEntities(p.Entities)
	err = cmp.Or(err, entitiesErr)

	s.mu.Lock()
	s.count(b, func(st *Stats) { st.Sends++ })
	switch {
	case err != nil:
	case !p.ChatID.set:
		err = errEmptyChatID
	case strings.TrimSpace(p.Text) == "":
		err = errEmptyText
	case utf8.RuneCountInString(p.Text) > maxTextLength:
		err = errTooLong
	case entities != nil:
		err = validateEntities(p.Text, entities)
	}
	if err != nil {
		s.count(b, func(st *Stats) { st.Rejected++ })
		s.mu.Unlock()
		return nil, err
	}
	fault, retryAfter := s.rollFaultLocked(b)
	latency := s.latencyLocked(b)
	switch fault {
	case faultTimeout:
		s.count(b, func(st *Stats) { st.InjectedTimeouts++ })
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return nil, errHangUp
	case fault429:
		s.count(b, func(st *Stats) { st.Injected429++; st.Answered429++ })
		s.mu.Unlock()
		return s.afterLatency(latency, nil, tooManyRequests(retryAfter))
	case fault5xx:
		s.count(b, func(st *Stats) { st.Injected5xx++ })
		s.mu.Unlock()
		return s.afterLatency(latency, nil, errInternal)
	}

	now := s.now()
	c := b.chats[p.ChatID.id]
	if err := s.admitLocked(b, now, c, p.AllowPaidBroadcast); err != nil {
		s.mu.Unlock()
		return s.afterLatency(latency, nil, err)
	}
	var u *user
	if c != nil && c.typ == messenger.ChatPrivate {
		u = s.users[c.id]
	}
	switch {
	case c == nil && s.users[p.ChatID.id] != nil:
		err = errCantInitiate // a user who never started this bot
	case c == nil:
		err = errChatNotFound
	case u != nil && u.Deleted:
		err = errDeactivated
	case u != nil && u.blocked[b.id]:
		err = errBlocked
	}
	if err != nil {
		s.count(b, func(st *Stats) { st.Rejected++ })
		s.mu.Unlock()
		return s.afterLatency(latency, nil, err)
	}
	s.mu.Unlock()

	// The message reaches the chat after the latency even if the client stopped waiting: a timeout on the
	// client's side does not undo a delivery, which is how duplicates arise on the real platform too.
	s.sleep(latency)

	s.mu.Lock()
	defer s.mu.Unlock()
	c.nextMsgID++
	sent := SentMessage{MessageID: c.nextMsgID, ChatID: c.id, Text: p.Text, Entities: entities, ReplyMarkup: markup, Time: s.now(),
		DisableNotification: p.DisableNotification, ProtectContent: p.ProtectContent, LinkPreviewOptions: p.LinkPreviewOptions}
	c.messages = append(c.messages, sent)
	c.addLine(Line{From: "bot", MessageID: sent.MessageID, Text: sent.Text, HTML: lineHTML(sent.Text, sent.Entities), ReplyMarkup: sent.ReplyMarkup,
		Time: sent.Time})
	s.count(b, func(st *Stats) { st.Delivered++ })
	s.broadcastLocked()
	return s.wireLocked(b, c, sent), nil
}

// admitLocked applies the bot's global limit and the per-chat limit of (bot, chat) to one send at now; sends
// to unknown chats count against the global limit only. A send flagged allow_paid_broadcast from a bot
// allowed paid broadcasts ignores the bot's rate, for a fee, as the Bot API describes the flag: it is held
// to PaidBroadcastRate instead, takes nothing of the free rate, and is billed. It also keeps the
// sliding-second and per-chat interval counts (Stats). Callers hold s.mu.
func (s *Server) admitLocked(b *bot, now time.Time, c *chat, paidFlag bool) error {
	l := s.limits
	rate, burst := b.globalLimit(l)
	paid := paidFlag && b.paid
	s.watchLocked(b, now, c, paid, rate, l)

	var globalWait time.Duration
	if paid {
		globalWait = b.total.wait(now, PaidBroadcastRate, defaultBurst(PaidBroadcastRate), l.Tolerance)
	} else {
		globalWait = b.free.wait(now, rate, burst, l.Tolerance)
	}
	var chatWait time.Duration
	if c != nil {
		chatWait = c.bucket.wait(now, l.PerChatRate, l.PerChatBurst, l.Tolerance)
	}
	if globalWait > 0 || chatWait > 0 {
		s.count(b, func(st *Stats) {
			st.LimitViolations++
			st.Answered429++
			if globalWait > 0 {
				st.GlobalLimitViolations++
			}
			if chatWait > 0 {
				st.ChatLimitViolations++
			}
		})
		s.log.Warn("rate limit exceeded", "bot_id", b.id, "chat_id", chatIDOf(c), "global_wait", globalWait, "chat_wait", chatWait)
		return tooManyRequests(retryAfterSeconds(max(globalWait, chatWait)))
	}
	if paid {
		s.count(b, func(st *Stats) { st.PaidSends++ })
	} else {
		b.free.take(now, rate, l.Tolerance)
	}
	if b.paid {
		b.total.take(now, PaidBroadcastRate, l.Tolerance)
	}
	if c != nil {
		c.bucket.take(now, l.PerChatRate, l.Tolerance)
		c.lastSend = now
	}
	b.freeWin.add(now, !paid && rate > 0)
	b.totalWin.add(now, b.paid)
	sec := now.Unix()
	if sec != s.second {
		s.second, s.inSec = sec, 0
	}
	if sec != b.second {
		b.second, b.inSec = sec, 0
	}
	s.inSec++
	b.inSec++
	s.stats.PeakSendsPerSecond = max(s.stats.PeakSendsPerSecond, s.inSec)
	b.stats.PeakSendsPerSecond = max(b.stats.PeakSendsPerSecond, b.inSec)
	return nil
}

// watchLocked counts whether a send at now goes past the bot's rate in the second before it, or comes
// sooner than the per-chat interval after the chat's last send: stricter than the buckets, which let a
// burst through. Both are relaxed by the tolerance, as the buckets are. Callers hold s.mu.
func (s *Server) watchLocked(b *bot, now time.Time, c *chat, paid bool, rate float64, l Limits) {
	overSecond := false
	switch {
	case paid:
		overSecond = float64(b.totalWin.count(now)+1) > PaidBroadcastRate*(1+l.Tolerance)
	case rate > 0:
		overSecond = float64(b.freeWin.count(now)+1) > rate*(1+l.Tolerance)
	}
	tooSoon := c != nil && l.PerChatRate > 0 && !c.lastSend.IsZero() &&
		now.Sub(c.lastSend) < emissionInterval(l.PerChatRate, l.Tolerance)
	if overSecond || tooSoon {
		s.count(b, func(st *Stats) {
			if overSecond {
				st.SlidingSecondViolations++
			}
			if tooSoon {
				st.ChatIntervalViolations++
			}
		})
	}
}

func chatIDOf(c *chat) int64 {
	if c == nil {
		return 0
	}
	return c.id
}

func (s *Server) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.done:
	}
}

func (s *Server) afterLatency(d time.Duration, result any, err error) (any, error) {
	s.sleep(d)
	return result, err
}

// unquoteMarkup returns a reply_markup as a JSON object, nil for none. Form-style clients send it as a JSON
// string, so a string is decoded once more.
func unquoteMarkup(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return nil, errBadMarkup
		}
		raw = json.RawMessage(inner)
	}
	return raw, nil
}

// normalizeMarkup checks a reply_markup and returns it as a JSON object, an inline keyboard in the
// simulator's form (inline.go).
func normalizeMarkup(raw json.RawMessage) (json.RawMessage, error) {
	raw, err := unquoteMarkup(raw)
	if err != nil || raw == nil {
		return nil, err
	}
	var m struct {
		Keyboard       *[][]messenger.KeyboardButton `json:"keyboard"`
		RemoveKeyboard *bool                         `json:"remove_keyboard"`
		InlineKeyboard *json.RawMessage              `json:"inline_keyboard"`
		ForceReply     *bool                         `json:"force_reply"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errBadMarkup
	}
	switch {
	case m.Keyboard != nil:
		for _, row := range *m.Keyboard {
			for _, b := range row {
				if b.Text == "" {
					return nil, badRequest("keyboard button text is empty")
				}
			}
		}
	case m.RemoveKeyboard != nil:
		if !*m.RemoveKeyboard {
			return nil, badRequest("remove_keyboard must be true")
		}
	case m.InlineKeyboard != nil:
		return parseInlineKeyboard(raw)
	case m.ForceReply != nil:
	default:
		return nil, errBadMarkup
	}
	return raw, nil
}

func (s *Server) setWebhook(b *bot, body []byte) (any, error) {
	var p messenger.SetWebhookRequest
	if err := decodeParams(body, &p); err != nil {
		return nil, err
	}
	if p.URL != "" {
		if !strings.HasPrefix(p.URL, "http://") && !strings.HasPrefix(p.URL, "https://") {
			return nil, errBadWebhookURL
		}
	}
	if p.SecretToken != "" && !secretPattern.MatchString(p.SecretToken) {
		return nil, errBadSecret
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b.webhook = webhookConfig{url: p.URL, secret: p.SecretToken, gen: b.webhook.gen + 1}
	if p.AllowedUpdates != nil {
		b.allowed = p.AllowedUpdates
	}
	if p.DropPendingUpdates {
		b.pending = nil
	}
	b.pollSeq++ // a webhook ends any long poll
	b.wakeLocked()
	s.broadcastLocked()
	s.log.Info("webhook set", "bot_id", b.id, "url", p.URL, "allowed_updates", p.AllowedUpdates, "drop_pending_updates", p.DropPendingUpdates)
	return true, nil
}

func (s *Server) deleteWebhook(b *bot, body []byte) (any, error) {
	var p messenger.DeleteWebhookRequest
	if err := decodeParams(body, &p); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b.webhook = webhookConfig{gen: b.webhook.gen + 1}
	if p.DropPendingUpdates {
		b.pending = nil
	}
	b.wakeLocked()
	s.broadcastLocked()
	s.log.Info("webhook deleted", "bot_id", b.id, "drop_pending_updates", p.DropPendingUpdates)
	return true, nil
}

type getUpdatesParams struct {
	Offset         int64     `json:"offset"`
	Limit          int       `json:"limit"`
	Timeout        int       `json:"timeout"`
	AllowedUpdates *[]string `json:"allowed_updates"`
}

// getUpdates follows the platform: offset confirms every update before it, a negative offset keeps only the
// last -offset updates, timeout long-polls, and a newer call ends an older one with 409.
func (s *Server) getUpdates(r *http.Request, b *bot, body []byte) (any, error) {
	var p getUpdatesParams
	if err := decodeParams(body, &p); err != nil {
		return nil, err
	}
	if p.Limit <= 0 || p.Limit > 100 {
		p.Limit = 100
	}
	timeout := time.Duration(min(max(p.Timeout, 0), 50)) * time.Second
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()

	s.mu.Lock()
	if b.webhook.url != "" {
		s.mu.Unlock()
		return nil, errWebhookActive
	}
	b.pollSeq++
	mine := b.pollSeq
	if p.AllowedUpdates != nil {
		b.allowed = *p.AllowedUpdates
	}
	switch {
	case p.Offset > 0:
		i := 0
		for i < len(b.pending) && b.pending[i].id < p.Offset {
			i++
		}
		b.pending = b.pending[i:]
	case p.Offset < 0:
		if keep := int(-p.Offset); keep < len(b.pending) {
			b.pending = b.pending[len(b.pending)-keep:]
		}
	}
	s.broadcastLocked() // wakes an older long poll so that it notices it was superseded
	for {
		if b.pollSeq != mine {
			s.mu.Unlock()
			return nil, errPollConflict
		}
		if len(b.pending) > 0 || timeout == 0 {
			n := min(len(b.pending), p.Limit)
			out := make([]json.RawMessage, n)
			for i := range n {
				out[i] = b.pending[i].body
			}
			s.mu.Unlock()
			return out, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			timeout = 0
		case <-r.Context().Done():
			return nil, errHangUp
		case <-s.done:
			return nil, errHangUp
		}
		s.mu.Lock()
	}
}

// parseDeepLink extracts the bot username and start payload from https://t.me/<bot>?start=<payload> or
// tg://resolve?domain=<bot>&start=<payload>.
func parseDeepLink(link string) (bot, payload string, err error) {
	u, err := url.Parse(link)
	if err != nil {
		return "", "", fmt.Errorf("while parsing the deep link: %w", err)
	}
	q := u.Query()
	switch {
	case u.Scheme == "tg" && u.Host == "resolve":
		bot = q.Get("domain")
	case u.Scheme == "http" || u.Scheme == "https":
		// The last segment, so that a deep link base with a path (HERALD_DEEP_LINK_BASE) works too.
		bot = u.Path[strings.LastIndexByte(u.Path, '/')+1:]
	}
	if bot == "" {
		return "", "", fmt.Errorf("%q is not a deep link to a bot", link)
	}
	if !q.Has("start") {
		return "", "", fmt.Errorf("%q has no start parameter", link)
	}
	return bot, q.Get("start"), nil
}
