package devenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// instance is what a running herald dev tells other tools about itself, in DataDir/run.json (removed when
// it stops): the private PostgreSQL's port changes with every run.
type instance struct {
	APIBase     string `json:"api_base"`
	DatabaseURL string `json:"database_url"`
	DemoKey     string `json:"demo_key,omitempty"`
	// BotTokenKey is the dev instance's HERALD_BOT_TOKEN_KEY: `herald tenant … --bot-token-file` seals a
	// tenant's bot's token with it, and the running dev must be able to open it. The file is 0600 in the
	// data directory, beside the dev keys it is read from.
	BotTokenKey string `json:"bot_token_key,omitempty"`
	// MessengerAPIURL and PublicURL point the admin CLI at the simulator, to register a tenant's own bot
	// with it (`herald tenant update --bot-token-file`): the simulator's Bot API, and the https URL of this
	// herald dev that the simulator posts to over plain http (its WebhookPlainHTTP). Empty with a real bot.
	MessengerAPIURL string `json:"messenger_api_url,omitempty"`
	PublicURL       string `json:"public_url,omitempty"`
}

const instanceFile = "run.json"

func writeInstance(dir string, in instance) error {
	b, _ := json.MarshalIndent(in, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, instanceFile), b, 0o600); err != nil {
		return fmt.Errorf("while writing %s: %w", instanceFile, err)
	}
	return nil
}

// PrintEnv prints the exports that point the admin CLI and a shell at the herald dev running on dataDir:
// HERALD_DATABASE_URL; for a tenant's own bot HERALD_BOT_TOKEN_KEY, HERALD_MESSENGER_API_URL and
// HERALD_PUBLIC_URL (the simulator's); and the walkthrough's HERALD (the API base) and KEY (the demo key).
func PrintEnv(w io.Writer, dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, instanceFile))
	if !running(dataDir) || err != nil {
		return fmt.Errorf("no herald dev is running on the data directory %s: start one (make run), then ask again", dataDir)
	}
	var in instance
	if err := json.Unmarshal(b, &in); err != nil || in.DatabaseURL == "" {
		return errors.New("herald dev is still starting: ask again in a moment")
	}
	fmt.Fprintf(w, "# The herald dev on %s: eval \"$(herald dev --print-env)\"\n", dataDir)
	fmt.Fprintln(w, "# herald dev reads HERALD_DATABASE_URL and HERALD_MESSENGER_API_URL too: unset them before the next make run in this shell.")
	fmt.Fprintf(w, "export HERALD_DATABASE_URL=%s\n", shellQuote(in.DatabaseURL))
	if in.BotTokenKey != "" {
		fmt.Fprintf(w, "export HERALD_BOT_TOKEN_KEY=%s\n", shellQuote(in.BotTokenKey))
	}
	if in.MessengerAPIURL != "" {
		fmt.Fprintln(w, "# A tenant's own bot (herald tenant update --bot-token-file) is registered with the simulator:")
		fmt.Fprintf(w, "export HERALD_MESSENGER_API_URL=%s HERALD_PUBLIC_URL=%s\n", shellQuote(in.MessengerAPIURL), shellQuote(in.PublicURL))
	}
	fmt.Fprintf(w, "export HERALD=%s\n", shellQuote(in.APIBase))
	if in.DemoKey != "" {
		fmt.Fprintf(w, "export KEY=%s\n", shellQuote(in.DemoKey))
	}
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
