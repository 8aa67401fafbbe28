package messenger_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
)

const testToken = "123456:AAH-secret-token_xyz"

// recorded is one request as the fake platform saw it.
type recorded struct {
	method, path, contentType string
	body                      map[string]any
}

// fakePlatform answers every call with answer(method) and records the requests.
func fakePlatform(t *testing.T, answer func(w http.ResponseWriter, method string)) (*httptest.Server, func() []recorded) {
	t.Helper()
	var mu sync.Mutex
	var reqs []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		reqs = append(reqs, recorded{r.Method, r.URL.Path, r.Header.Get("Content-Type"), body})
		mu.Unlock()
		method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		answer(w, method)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return append([]recorded(nil), reqs...)
	}
}

func ok(w http.ResponseWriter, result string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true,"result":`+result+`}`)
}

func TestSendMessagePostsJSONToTheMethodURL(t *testing.T) {
	srv, reqs := fakePlatform(t, func(w http.ResponseWriter, _ string) {
		ok(w, `{"message_id":77,"chat":{"id":42,"type":"private"},"date":1,"text":"hi"}`)
	})
	c := messenger.New(srv.URL+"/", testToken, nil)
	id, err := c.SendMessage(t.Context(), messenger.SendMessageRequest{
		ChatID: 42, Text: "hi", ReplyMarkup: messenger.ContactRequestKeyboard("Share"),
	})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	if id != 77 {
		t.Errorf("message id = %d, want 77", id)
	}
	r := reqs()[0]
	if r.method != http.MethodPost || r.path != "/bot"+testToken+"/sendMessage" || r.contentType != "application/json" {
		t.Errorf("request = %s %s (%s), want POST /bot<token>/sendMessage as JSON", r.method, r.path, r.contentType)
	}
	if r.body["chat_id"] != float64(42) || r.body["text"] != "hi" {
		t.Errorf("body = %v", r.body)
	}
	kb, _ := json.Marshal(r.body["reply_markup"])
	if !strings.Contains(string(kb), `"request_contact":true`) {
		t.Errorf("reply_markup = %s, want the request-contact keyboard", kb)
	}

	// Without a markup the field is omitted, not sent as null.
	if _, err := c.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 42, Text: "plain"}); err != nil {
		t.Fatal(err)
	}
	if _, present := reqs()[1].body["reply_markup"]; present {
		t.Errorf("reply_markup must be omitted when empty: %v", reqs()[1].body)
	}
}

// A send past the platform's free rate carries allow_paid_broadcast (a bot whose tenant allows paid
// broadcast); every other send leaves it out, as before.
func TestAPaidBroadcastSendSaysSo(t *testing.T) {
	srv, reqs := fakePlatform(t, func(w http.ResponseWriter, _ string) { ok(w, `{"message_id":1}`) })
	c := messenger.New(srv.URL, testToken, nil)
	for _, paid := range []bool{true, false} {
		if _, err := c.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1, Text: "x", AllowPaidBroadcast: paid}); err != nil {
			t.Fatal(err)
		}
	}
	if got := reqs()[0].body["allow_paid_broadcast"]; got != true {
		t.Errorf("a paid broadcast sent allow_paid_broadcast %v, want true", got)
	}
	if _, present := reqs()[1].body["allow_paid_broadcast"]; present {
		t.Errorf("an ordinary send carries allow_paid_broadcast: %v", reqs()[1].body)
	}
}

func TestOtherMethodsSendBotAPIParameters(t *testing.T) {
	srv, reqs := fakePlatform(t, func(w http.ResponseWriter, method string) {
		switch method {
		case "getMe":
			ok(w, `{"id":123456,"is_bot":true,"first_name":"Herald","username":"herald_bot"}`)
		case "getUpdates":
			ok(w, `[{"update_id":5,"message":{"message_id":1,"chat":{"id":9,"type":"private"},"date":1,"text":"/start x"}},{"update_id":6,"my_chat_member":{}}]`)
		default:
			ok(w, `true`)
		}
	})
	c := messenger.New(srv.URL, testToken, nil)
	ctx := t.Context()

	me, err := c.GetMe(ctx)
	if err != nil || me.ID != 123456 || !me.IsBot || me.Username != "herald_bot" {
		t.Fatalf("GetMe = %+v, %v", me, err)
	}
	if err := c.SetWebhook(ctx, "https://herald.example/messenger/webhook", "s3cret", []string{"message"}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteWebhook(ctx); err != nil {
		t.Fatal(err)
	}
	updates, err := c.GetUpdates(ctx, 5, 0, []string{"message"})
	if err != nil {
		t.Fatal(err)
	}
	if len(updates) != 2 || updates[0].UpdateID != 5 || updates[0].Message.Text != "/start x" || updates[1].Kind() != "my_chat_member" {
		t.Errorf("updates = %+v", updates)
	}

	got := reqs()
	wantPaths := []string{"getMe", "setWebhook", "deleteWebhook", "getUpdates"}
	for i, m := range wantPaths {
		if got[i].path != "/bot"+testToken+"/"+m {
			t.Errorf("call %d path = %s, want method %s", i, got[i].path, m)
		}
	}
	if b := got[1].body; b["url"] != "https://herald.example/messenger/webhook" || b["secret_token"] != "s3cret" || !equalJSON(b["allowed_updates"], []any{"message"}) {
		t.Errorf("setWebhook body = %v", b)
	}
	if b := got[3].body; b["offset"] != float64(5) || !equalJSON(b["allowed_updates"], []any{"message"}) {
		t.Errorf("getUpdates body = %v", b)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestPlatformErrorsBecomeAPIErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   messenger.APIError
	}{
		{"flood control", 429, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 5","parameters":{"retry_after":5}}`,
			messenger.APIError{Method: "sendMessage", Code: 429, Description: "Too Many Requests: retry after 5", RetryAfter: 5 * time.Second}},
		{"blocked", 403, `{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}`,
			messenger.APIError{Method: "sendMessage", Code: 403, Description: "Forbidden: bot was blocked by the user"}},
		{"migrated", 400, `{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-1001234567890}}`,
			messenger.APIError{Method: "sendMessage", Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateToChatID: -1001234567890}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := fakePlatform(t, func(w http.ResponseWriter, _ string) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			_, err := messenger.New(srv.URL, testToken, nil).SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1, Text: "x"})
			var got *messenger.APIError
			if !errors.As(err, &got) {
				t.Fatalf("error = %v, want *APIError", err)
			}
			if *got != tt.want {
				t.Errorf("APIError = %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestMalformedAnswersAreBadResponses(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"HTML from a proxy", 502, `<html><body>502 Bad Gateway</body></html>`},
		{"empty object", 200, `{}`},
		{"result of the wrong type", 200, `{"ok":true,"result":"not a message"}`},
		{"truncated", 200, `{"ok":true,"result":{"message_id":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := fakePlatform(t, func(w http.ResponseWriter, _ string) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			_, err := messenger.New(srv.URL, testToken, nil).SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1, Text: "x"})
			var tErr *messenger.TransportError
			if !errors.As(err, &tErr) || tErr.Code != messenger.CodeBadResponse || tErr.HTTPStatus != tt.status {
				t.Fatalf("error = %#v, want a TransportError with CodeBadResponse and HTTP %d", err, tt.status)
			}
			if !errors.Is(err, messenger.ErrBadResponse) || messenger.Classify(err) != messenger.Retry {
				t.Errorf("a malformed answer must match ErrBadResponse and be retried: %v", err)
			}
		})
	}
}

func TestTimeoutsAndNetworkErrorsNeverLeakTheToken(t *testing.T) {
	hang := make(chan struct{})
	slow, _ := fakePlatform(t, func(w http.ResponseWriter, _ string) { <-hang })
	defer close(hang)

	t.Run("deadline from the context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		_, err := messenger.New(slow.URL, testToken, nil).SendMessage(ctx, messenger.SendMessageRequest{ChatID: 1, Text: "x"})
		assertTransport(t, err, messenger.CodeTimeout, messenger.ErrTimeout)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a timeout must still match context.DeadlineExceeded: %v", err)
		}
	})
	t.Run("default call timeout", func(t *testing.T) {
		start := time.Now()
		_, err := messenger.New(slow.URL, testToken, nil).WithTimeout(80 * time.Millisecond).GetMe(context.Background())
		assertTransport(t, err, messenger.CodeTimeout, messenger.ErrTimeout)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the default timeout did not bound the call: took %v", d)
		}
	})
	t.Run("canceled by the caller", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(30*time.Millisecond, cancel)
		_, err := messenger.New(slow.URL, testToken, nil).GetMe(ctx)
		assertTransport(t, err, messenger.CodeCanceled, messenger.ErrCanceled)
	})
	t.Run("connection refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		_, err = messenger.New("http://"+addr, testToken, nil).SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1, Text: "x"})
		assertTransport(t, err, messenger.CodeNetwork, messenger.ErrNetwork)
		if !strings.Contains(err.Error(), "/bot<token>/sendMessage") {
			t.Errorf("the error should still name the redacted URL: %v", err)
		}
	})
	t.Run("invalid base URL", func(t *testing.T) {
		_, err := messenger.New("http://bad host\x7f", testToken, nil).GetMe(t.Context())
		assertTransport(t, err, messenger.CodeNetwork, messenger.ErrNetwork)
	})
}

func assertTransport(t *testing.T, err error, code int, sentinel error) {
	t.Helper()
	var tErr *messenger.TransportError
	if !errors.As(err, &tErr) || tErr.Code != code {
		t.Fatalf("error = %v, want a TransportError with code %d", err, code)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("error %v does not match %v", err, sentinel)
	}
	if messenger.Classify(err) != messenger.Retry {
		t.Errorf("Classify(%v) = %v, want retry", err, messenger.Classify(err))
	}
	for _, s := range []string{err.Error(), messenger.ErrorMessage(err)} {
		if strings.Contains(s, testToken) || strings.Contains(s, "secret-token") {
			t.Errorf("the bot token leaked into %q", s)
		}
	}
}

func TestLongPollGetsItsTimeoutOnTopOfTheCallTimeout(t *testing.T) {
	srv, _ := fakePlatform(t, func(w http.ResponseWriter, _ string) {
		time.Sleep(300 * time.Millisecond) // a long poll that ends with an answer
		ok(w, `[]`)
	})
	c := messenger.New(srv.URL, testToken, nil).WithTimeout(100 * time.Millisecond)
	if _, err := c.GetUpdates(context.Background(), 0, 1, nil); err != nil {
		t.Fatalf("a 1 s long poll answered after 300 ms must succeed: %v", err)
	}
	if _, err := c.GetMe(context.Background()); !errors.Is(err, messenger.ErrTimeout) {
		t.Fatalf("an ordinary call answered after 300 ms must time out at 100 ms: %v", err)
	}
}

func TestConnectionsAreReused(t *testing.T) {
	const parallel = 64
	var conns atomic.Int64
	// Each round's calls are all in the server at once before any is answered: the first round must open
	// a connection per call, and a later one finds them all idle. (Answering each call as it came let a
	// busy machine's first round finish on fewer connections, and a later, more concurrent round then
	// opened new ones: a flake, not a fault of the pool.)
	var mu sync.Mutex
	var arrived int
	gate := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		g := gate
		if arrived++; arrived == parallel {
			close(gate)
		}
		mu.Unlock()
		select {
		case <-g:
		case <-time.After(5 * time.Second): // a call that never came: the round's counts will say so
		}
		ok(w, `{"message_id":1,"chat":{"id":1,"type":"private"},"date":1}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	c := messenger.New(srv.URL, testToken, nil)
	round := func() {
		mu.Lock()
		arrived, gate = 0, make(chan struct{})
		mu.Unlock()
		var wg sync.WaitGroup
		for range parallel {
			wg.Go(func() {
				if _, err := c.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1, Text: "x"}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	round()
	afterFirst := conns.Load()
	for range 5 {
		round()
	}
	if afterFirst > parallel {
		t.Errorf("%d connections for %d concurrent calls", afterFirst, parallel)
	}
	// Idle connections are kept per host, so later rounds need (almost) no new ones.
	if extra := conns.Load() - afterFirst; extra > parallel/4 {
		t.Errorf("%d new connections after warm-up; idle connections are not being reused", extra)
	}
}
