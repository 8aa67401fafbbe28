package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/sim"
)

// runSim is `herald sim`: the messenger simulator on its own. Point HERALD_MESSENGER_API_URL of the other
// components at it, and drive simulated users through its /sim control API.
func runSim(ctx context.Context, args []string, _, stderr io.Writer) error {
	var c config.Config
	fs := newFlagSet("sim", stderr)
	c.Bind(fs, config.HTTPAddr, config.BotToken, config.BotUsername, config.RateLimit, config.LogLevel, config.LogFormat)
	perChatDefault := 1.0
	if v, ok := os.LookupEnv("HERALD_SIM_PER_CHAT_RATE"); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("HERALD_SIM_PER_CHAT_RATE: %q is not a number", v)
		}
		perChatDefault = n
	}
	perChat := fs.Float64("per-chat-rate", perChatDefault, "messages per second the simulated platform allows per chat (env HERALD_SIM_PER_CHAT_RATE)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	check := []string{config.HTTPAddr, config.RateLimit, config.LogLevel, config.LogFormat}
	if c.BotToken != "" {
		check = append(check, config.BotToken)
	}
	if c.BotUsername != "" {
		check = append(check, config.BotUsername)
	}
	if err := c.Validate(check...); err != nil {
		return err
	}
	return sim.Run(ctx, c.HTTPAddr, sim.Options{Token: c.BotToken, BotUsername: c.BotUsername, GlobalRate: c.RateLimit,
		PerChatRate: *perChat, Logger: c.Logger(stderr).With("component", "sim")})
}
