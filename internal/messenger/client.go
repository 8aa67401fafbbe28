package messenger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultCallTimeout bounds one call when the caller's context has no earlier deadline. Long polls get their
// poll timeout on top.
const DefaultCallTimeout = 10 * time.Second

// maxResponseBytes bounds how much of an answer is read; a getUpdates batch of 100 updates fits easily.
const maxResponseBytes = 8 << 20

// Client calls the Bot API. It is safe for concurrent use; one Client per process is enough (connections
// are pooled and reused).
type Client struct {
	base    string // {baseURL}/bot{token}/
	token   string
	http    *http.Client
	timeout time.Duration
}

// New returns a client for the Bot API at baseURL (e.g. https://api.telegram.org) with the bot's token.
// httpClient may be nil: the default one keeps many idle connections per host, because a worker sends
// about a thousand messages per second to a single host and a new TLS handshake per send would dominate.
// Deadlines come from the per-call context (DefaultCallTimeout when it has none), not from
// http.Client.Timeout, so that long polls can outlive ordinary calls.
func New(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{Transport: NewTransport()}
	}
	return &Client{
		base:    strings.TrimRight(baseURL, "/") + "/bot" + token + "/",
		token:   token,
		http:    httpClient,
		timeout: DefaultCallTimeout,
	}
}

// NewTransport is the default transport: tuned for many concurrent calls to one host.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	t.IdleConnTimeout = 90 * time.Second
	t.ResponseHeaderTimeout = 0 // long polls legitimately wait; the call context bounds the wait
	return t
}

// WithTimeout returns a copy of c whose calls default to timeout when the context has no earlier deadline
// (0: no default, the context alone decides).
func (c *Client) WithTimeout(timeout time.Duration) *Client {
	cc := *c
	cc.timeout = timeout
	return &cc
}

// GetMe returns the bot's own user; a cheap check that the token is valid.
func (c *Client) GetMe(ctx context.Context) (User, error) {
	var u User
	err := c.call(ctx, "getMe", nil, &u, 0)
	return u, err
}

// SendMessage sends a text message and returns the platform's message_id.
func (c *Client) SendMessage(ctx context.Context, req SendMessageRequest) (int64, error) {
	var m struct {
		MessageID int64 `json:"message_id"`
	}
	if err := c.call(ctx, "sendMessage", req, &m, 0); err != nil {
		return 0, err
	}
	return m.MessageID, nil
}

// SetWebhook makes the platform POST updates to url, with the header X-Telegram-Bot-Api-Secret-Token: secret.
// allowedUpdates limits the kinds delivered (nil keeps the previous setting).
func (c *Client) SetWebhook(ctx context.Context, url, secret string, allowedUpdates []string) error {
	return c.SetWebhookWith(ctx, SetWebhookRequest{URL: url, SecretToken: secret, AllowedUpdates: allowedUpdates})
}

// SetWebhookWith is SetWebhook with every parameter, e.g. DropPendingUpdates.
func (c *Client) SetWebhookWith(ctx context.Context, req SetWebhookRequest) error {
	var ok bool
	return c.call(ctx, "setWebhook", req, &ok, 0)
}

// DeleteWebhook removes the webhook so that updates can be fetched with GetUpdates; pending updates are kept.
func (c *Client) DeleteWebhook(ctx context.Context) error {
	var ok bool
	return c.call(ctx, "deleteWebhook", DeleteWebhookRequest{}, &ok, 0)
}

// GetWebhookInfo reports the current webhook.
func (c *Client) GetWebhookInfo(ctx context.Context) (WebhookInfo, error) {
	var info WebhookInfo
	err := c.call(ctx, "getWebhookInfo", nil, &info, 0)
	return info, err
}

// GetUpdates long-polls for updates with update_id >= offset, waiting up to timeoutSeconds for the first one.
// Passing offset = last update_id + 1 confirms everything before it. allowedUpdates as for SetWebhook.
func (c *Client) GetUpdates(ctx context.Context, offset int64, timeoutSeconds int, allowedUpdates []string) ([]Update, error) {
	var updates []Update
	req := GetUpdatesRequest{Offset: offset, Timeout: timeoutSeconds, AllowedUpdates: allowedUpdates}
	err := c.call(ctx, "getUpdates", req, &updates, time.Duration(timeoutSeconds)*time.Second)
	return updates, err
}

// call POSTs params as JSON to method and decodes the result into out. extra lengthens the default deadline
// (for long polls).
func (c *Client) call(ctx context.Context, method string, params, out any, extra time.Duration) error {
	body := []byte("{}")
	if params != nil {
		var err error
		if body, err = json.Marshal(params); err != nil {
			return fmt.Errorf("messenger %s: encoding the request: %w", method, err)
		}
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout+extra)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+method, bytes.NewReader(body))
	if err != nil {
		return &TransportError{Method: method, Code: CodeNetwork, Err: c.scrub(err)}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(ctx, method, 0, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return c.transportError(ctx, method, resp.StatusCode, err)
	}
	// Drain anything past the limit so the connection goes back to the pool.
	_, _ = io.Copy(io.Discard, resp.Body)
	return decodeAnswer(method, resp.StatusCode, data, out)
}

// decodeAnswer reads the platform's answer to method (HTTP status, body) into out: nil, an *APIError, or a
// *TransportError with CodeBadResponse. The body is the other end's to choose: anything may arrive.
func decodeAnswer(method string, status int, data []byte, out any) error {
	var r Response
	if err := json.Unmarshal(data, &r); err != nil {
		return &TransportError{Method: method, Code: CodeBadResponse, HTTPStatus: status,
			Err: fmt.Errorf("decoding the answer: %w", err)}
	}
	if !r.OK {
		if r.ErrorCode == 0 {
			// Not a Bot API error envelope (e.g. "{}" from a proxy): nothing to classify by.
			return &TransportError{Method: method, Code: CodeBadResponse, HTTPStatus: status,
				Err: errors.New(`answer has neither "ok": true nor an error_code`)}
		}
		apiErr := &APIError{Method: method, Code: r.ErrorCode, Description: r.Description}
		if p := r.Parameters; p != nil {
			apiErr.RetryAfter = retryAfter(int64(p.RetryAfter))
			apiErr.MigrateToChatID = p.MigrateToChatID
		}
		return apiErr
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			return &TransportError{Method: method, Code: CodeBadResponse, HTTPStatus: status,
				Err: fmt.Errorf("decoding the result: %w", err)}
		}
	}
	return nil
}

// transportError classifies a failed round trip. The context decides between our own deadline, our own
// cancellation and the network, because the error of http.Client.Do says "context deadline exceeded" in
// several shapes.
func (c *Client) transportError(ctx context.Context, method string, status int, err error) error {
	code := CodeNetwork
	var netErr net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		code = CodeTimeout
	case errors.Is(ctx.Err(), context.Canceled):
		code = CodeCanceled
	case errors.As(err, &netErr) && netErr.Timeout():
		code = CodeTimeout
	}
	return &TransportError{Method: method, Code: code, HTTPStatus: status, Err: c.scrub(err)}
}

// scrub removes the bot token from an error: a *url.Error prints the request URL, which contains it.
func (c *Client) scrub(err error) error {
	if c.token == "" {
		return err
	}
	var uErr *url.Error
	if errors.As(err, &uErr) {
		// Rebuilt rather than flattened, so errors.Is still sees the cause (e.g. context.DeadlineExceeded).
		err = &url.Error{Op: uErr.Op, URL: c.redact(uErr.URL), Err: uErr.Err}
	}
	if strings.Contains(err.Error(), c.token) {
		return errors.New(c.redact(err.Error()))
	}
	return err
}

func (c *Client) redact(s string) string {
	return strings.ReplaceAll(s, c.token, "<token>")
}
