package main

import (
	"github.com/heraldhq/herald/internal/callback"
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
)

// callbacksCmd is `herald callbacks`: it sends status callbacks to the tenants' endpoints, serving
// /healthz, /readyz and /metrics on --http-addr (/metrics on --metrics-addr when set). On SIGTERM it lets attempts in flight finish
// (callback.Options.GracePeriod) before it exits.
type callbacksCmd struct{ config.Callbacks }

func (c *callbacksCmd) Run(e runEnv) error {
	logger := c.Logger(e.stderr).With("component", "callbacks")
	// Attempts hold a connection only for their claim and their result.
	st, err := store.Open(e.ctx, c.DatabaseURL, 32)
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := callback.New(callback.Options{
		Store:               st,
		Key:                 c.Key(),
		Policy:              c.Policy(),
		Logger:              logger,
		Concurrency:         c.CallbackConcurrency,
		EndpointConcurrency: c.CallbackEndpointConcurrency,
	})
	if err != nil {
		return err
	}
	r, g, gctx := serving(e.ctx, logger, storeReady(st))
	g.Go(func() error { return s.Run(gctx) })
	g.Go(func() error {
		return server.Serve(gctx, c.HTTPAddr, r, logger, server.ServeOptions{MetricsAddr: c.MetricsAddr})
	})
	return g.Wait()
}
