// Package ingress is the tenant API, /v1. This file is its route table.
package ingress

import (
	"github.com/go-chi/chi/v5"
)

// Routes mounts the tenant API on r. Every /v1 route but the API reference sheds load past the in-flight
// cap, then authenticates (a bad key is 401 before anything else is looked at), then refuses a tenant
// over its limits where that is known before the body is read (tenantlimits.go), then holds the tenant to its
// share of the requests, batches and body bytes in flight (admit, admission.go).
func (a *API) Routes(r chi.Router) {
	r.Route("/v1", func(r chi.Router) {
		r.Get("/openapi.yaml", serveOpenAPI)
		r.Group(func(r chi.Router) {
			r.Use(limitSlots(a.inFlight), a.authenticate)
			// Sends count against the tenant's sends per second, item by item, once they are known to be
			// valid (in the handler); every other route against its requests per second.
			r.With(a.refuseOverSends, a.admit(MaxBodyBytes, false)).Post("/send", a.handle(a.send))
			r.With(a.refuseOverSends, a.admit(MaxBatchBodyBytes, true)).Post("/send/batch", a.handle(a.sendBatch))
			r.Group(func(r chi.Router) {
				r.Use(a.limitRequests, a.admit(MaxBodyBytes, false))
				r.Get("/status/{tracking_id}", a.handle(a.status))
				r.Get("/notifications", a.handle(a.listNotifications))
				r.Post("/notifications/{tracking_id}/cancel", a.handle(a.cancelNotification))
				r.Delete("/notifications/{tracking_id}/message", a.handle(a.deleteMessage))
				r.Post("/link-token", a.handle(a.linkToken))
				r.Post("/phone-verification/start", a.handle(a.startVerification))
				r.Get("/phone-verification/status/{user_id}", a.handle(a.verificationStatus))
				r.Get("/users/{user_id}", a.handle(a.getUser))
				r.Delete("/users/{user_id}", a.handle(a.eraseUser))
				r.Post("/users/{user_id}/opt-out", a.handle(a.optOut))
				r.Delete("/users/{user_id}/opt-out", a.handle(a.liftOptOut))
				r.Post("/callbacks", a.handle(a.createCallback))
				r.Get("/callbacks", a.handle(a.listCallbacks))
				r.Delete("/callbacks/{id}", a.handle(a.deleteCallback))
				r.Post("/callbacks/{id}/rotate-secret", a.handle(a.rotateCallbackSecret))
				r.Post("/callbacks/{id}/test", a.handle(a.testCallback))
				r.Patch("/users/{user_id}", a.handle(a.patchUser))
				r.Get("/templates", a.handle(a.listTemplates))
				r.Get("/templates/{name}", a.handle(a.getTemplate))
				r.Get("/templates/{name}/versions/{version}", a.handle(a.getTemplate))
				r.Delete("/templates/{name}", a.handle(a.deleteTemplate))
				r.Post("/templates/{name}/preview", a.handle(a.previewTemplate))
				r.Get("/usage", a.handle(a.getUsage))
				r.Get("/audit-events", a.handle(a.listAuditEvents))
			})
			// A template may hold 50 locales of 16 KiB: its body is admitted as a batch's is.
			r.With(a.limitRequests, a.admit(MaxTemplateBodyBytes, true)).Put("/templates/{name}", a.handle(a.putTemplate))
		})
	})
}
