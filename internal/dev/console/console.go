// Package console is herald dev's web page, at / of its address: the simulated messenger users as chats
// on a phone, the demo tenant's notifications with live states, forms that call the tenant API, the
// simulator's fault switches, and a walkthrough that ticks itself off. Plain HTML, CSS and ES modules
// embedded in the binary: no build step, nothing fetched from the network. Only herald dev mounts it.
//
// The page calls the real /v1 API with the demo key and the simulator's control API (/sim/…). This
// package adds only what the page cannot read there:
//
//	GET /console/api/session  the tenant, its key and the bot, for the page's own calls
//	GET /console/api/events   server-sent events: the whole state ("state") whenever it changes
//
// The server reads PostgreSQL every Poll and wakes at once on any change of the simulator; the page only
// listens.
package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
)

//go:embed static
var static embed.FS

// coalesce is how long the stream waits after a change of the simulator for the rest of its burst.
const coalesce = 20 * time.Millisecond

// Options configure the console.
type Options struct {
	Store       *store.Store
	Sim         *sim.Server // nil when a real messenger stands in: no chats, no faults
	TenantID    string      // the tenant the page acts as
	APIKey      string      // its key, for the page's /v1 calls
	BotUsername string
	Logger      *slog.Logger
	// Poll is how often PostgreSQL is read while a page listens; default 250 ms.
	Poll time.Duration
}

// Console serves the page and its two routes. Close it when the server stops, or open streams would hold
// the server's shutdown until their clients leave.
type Console struct {
	opts      Options
	files     fs.FS
	assets    http.Handler
	done      chan struct{}
	closeOnce sync.Once
}

// New returns the console.
func New(o Options) *Console {
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory is part of the source
	}
	return &Console{opts: o, files: sub, assets: http.StripPrefix("/console/", http.FileServerFS(sub)), done: make(chan struct{})}
}

// Close ends the event streams.
func (c *Console) Close() { c.closeOnce.Do(func() { close(c.done) }) }

// Routes mounts the page at / and its files and API under /console/.
func (c *Console) Routes(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(server.LocalOnly, securityHeaders) // the page hands out the demo key
		r.Get("/", c.index)
		r.Get("/console/api/session", c.session)
		r.Get("/console/api/events", c.events)
		r.Get("/console/*", c.static)
	})
}

func (c *Console) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, c.files, "index.html")
}

func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	// A rebuilt binary brings new files: the browser asks every time.
	w.Header().Set("Cache-Control", "no-cache")
	c.assets.ServeHTTP(w, r)
}

type sessionResponse struct {
	Tenant      string `json:"tenant"`
	APIKey      string `json:"api_key"`
	BotUsername string `json:"bot_username"`
	Simulator   bool   `json:"simulator"`
	OpenAPI     string `json:"openapi"`
}

func (c *Console) session(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(sessionResponse{Tenant: c.opts.TenantID, APIKey: c.opts.APIKey, BotUsername: c.opts.BotUsername,
		Simulator: c.opts.Sim != nil, OpenAPI: "/v1/openapi.yaml"})
}

// events streams the state as server-sent events: one "state" event at once, then one whenever it has
// changed, and a comment now and then so that proxies keep the stream open.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	// The stream outlives the server's write timeout.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	poll := time.NewTicker(c.opts.Poll)
	defer poll.Stop()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	var last []byte
	var lastErr string
	for {
		var simChanged <-chan struct{}
		if c.opts.Sim != nil {
			simChanged = c.opts.Sim.Changed() // before reading, so that no change slips between
		}
		st, err := c.state(r.Context())
		switch {
		case r.Context().Err() != nil:
			return
		case err != nil:
			if err.Error() != lastErr { // once per problem, not once per poll
				c.opts.Logger.Warn("console: reading the state", "err", err)
			}
			lastErr = err.Error()
		default:
			lastErr = ""
			b, _ := json.Marshal(st)
			if !bytes.Equal(b, last) {
				last = b
				if _, err := w.Write(append(append([]byte("event: state\ndata: "), b...), '\n', '\n')); err != nil {
					return
				}
				if err := rc.Flush(); err != nil {
					return
				}
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case <-simChanged:
			// Changes come in bursts (an update queued, delivered, answered): read once for the burst.
			select {
			case <-time.After(coalesce):
			case <-r.Context().Done():
				return
			}
		case <-poll.C:
		case <-keepalive.C:
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}
}

// securityHeaders: the page runs its own files only, and is never framed.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}
