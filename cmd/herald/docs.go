package main

import (
	"fmt"
	"os"

	"github.com/alecthomas/kong"

	"github.com/heraldhq/herald/internal/config"
)

// configDocsCmd is `herald config-docs [FILE]` (make docs): the settings table of docs/configuration.md,
// rendered from this grammar; with FILE, written into FILE between its markers, keeping the prose.
type configDocsCmd struct {
	File string `arg:"" optional:"" help:"the Markdown file to update"`
}

func (c *configDocsCmd) Run(kctx *kong.Context, e runEnv) error {
	table := config.SettingsTable(kctx.Model)
	if c.File == "" {
		fmt.Fprint(e.stdout, table)
		return nil
	}
	doc, err := os.ReadFile(c.File)
	if err != nil {
		return err
	}
	updated, err := config.UpdateDocs(string(doc), table)
	if err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	return os.WriteFile(c.File, []byte(updated), 0o644)
}
