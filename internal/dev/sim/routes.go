package sim

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// routes is the simulator's route table: the control API under /sim (GET /sim lists it), the Bot API at
// /bot{token}/{method}. Its handlers are in control.go, callbacks.go and botapi.go.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(headAsGet)
	r.Route("/sim", func(r chi.Router) {
		// Anything else under /sim, a known path with another method too, is the control API's own 404.
		r.NotFound(controlNotFound)
		r.MethodNotAllowed(controlNotFound)
		r.Get("/", s.handleHelp)

		// Routes about one bot's world take ?bot=<id or username>; the default bot without it.
		r.Get("/bots", s.handleListBots)
		r.Post("/bots", s.handleCreateBot)
		r.Get("/bots/{bot}", s.handleGetBot)
		r.Post("/bots/{bot}/revoke", s.handleRevokeToken)

		r.Get("/users", s.handleListUsers)
		r.Post("/users", s.handleEnsureUser)
		r.Get("/users/{id}", s.handleGetUser)
		// A user's actions wait for the webhook's answer to the update they produce (?wait=).
		r.Post("/users/{id}/start", s.acting(s.handleStart))
		r.Post("/users/{id}/message", s.acting(s.handleMessage))
		r.Post("/users/{id}/share-contact", s.acting(s.handleShareContact))
		r.Post("/users/{id}/open-link", s.acting(s.handleOpenLink))
		r.Post("/users/{id}/tap", s.acting(s.handleTap))
		r.Post("/users/{id}/delete-message", s.handleDeleteAsUser)
		r.Post("/users/{id}/block", s.acting(s.handleSetBlocked(true)))
		r.Post("/users/{id}/unblock", s.acting(s.handleSetBlocked(false)))
		r.Post("/users/{id}/delete", s.handleUserAction(func(_ *BotHandle, id int64) error { return s.DeleteUser(id) }))

		r.Get("/chats/{id}/messages", s.handleMessages)
		r.Get("/chats/{id}/transcript", s.handleTranscript)
		r.Get("/chats/{id}/taps", s.handleTaps)
		r.Get("/updates", s.handlePendingUpdates)
		r.Post("/updates", s.acting(s.handleInjectUpdate))
		r.Get("/webhook", s.handleWebhookInfo)
		r.Get("/stats", s.handleStats)
		r.Get("/faults", s.handleFaults)
		r.Post("/faults", s.handleSetFaults)
		r.Delete("/faults", s.handleClearFaults)
		r.Get("/limits", s.handleLimits)
		r.Post("/limits", s.handleSetLimits)
		r.Post("/reset", s.handleReset)

		// The receiver of status callbacks (callbacks.go).
		r.Post("/callbacks", s.handleCallback)
		r.Get("/callbacks", s.handleListCallbacks)
		r.Delete("/callbacks", s.handleClearCallbacks)
		r.Post("/callbacks/secrets", s.handleAddCallbackSecret)
		r.Post("/callbacks/fail", s.handleFailCallbacks)
	})

	// The Bot API takes any method (serveBotAPI refuses a GET that would change state itself); any other
	// path gets the platform's 404 in the Bot API's body.
	r.HandleFunc("/bot*", s.serveBotAPI)
	r.NotFound(botNotFound)
	r.MethodNotAllowed(botNotFound) // a method chi does not know
	return r
}

func controlNotFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "not_found", "no such simulator route; GET /sim lists them")
}

// headAsGet serves a HEAD as the GET of the same path (net/http sends no body), as net/http's mux did: no
// route of the simulator is for HEAD alone. It sets chi's routing method, so it holds mounted in another
// chi router too (herald dev), where chi's middleware.GetHead would look the path up in the wrong router.
func headAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			chi.RouteContext(r.Context()).RouteMethod = http.MethodGet
		}
		next.ServeHTTP(w, r)
	})
}
