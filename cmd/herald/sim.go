package main

import (
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/dev/sim"
)

// simCmd is `herald sim`: the messenger simulator on its own. Point --messenger-api-url of the other
// components at it, and drive simulated users through its /sim control API.
type simCmd struct{ config.Sim }

func (c *simCmd) Run(e runEnv) error {
	return sim.Run(e.ctx, c.HTTPAddr, sim.Options{Token: c.MessengerBotToken, BotUsername: c.MessengerBotUsername,
		GlobalRate: c.MessengerRateLimit, PerChatRate: c.SimPerChatRate, WebhookPlainHTTP: c.SimWebhookPlainHTTP, Logger: c.Logger(e.stderr).With("component", "sim")})
}
