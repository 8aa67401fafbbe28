package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/heraldhq/herald/internal/config"
)

func TestHelpListsEverySettingWithItsVariableAndNoSecret(t *testing.T) {
	// Help must not show what the environment holds: the defaults come from the code.
	secrets := map[string]string{
		"HERALD_DATABASE_URL":        "postgres://herald:pa55word@db/herald",
		"HERALD_WEBHOOK_SECRET":      "s3cret-webhook",
		"HERALD_MESSENGER_BOT_TOKEN": "123:s3cret-token",
		"HERALD_PHONE_HASH_KEY":      "s3cret-phone-hash-key",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	model := newParser(&cli{}, io.Discard, io.Discard).Model
	checked := 0
	_ = kong.Visit(model.Node, func(n kong.Visitable, next kong.Next) error {
		node, ok := n.(*kong.Node)
		if !ok || node.Type != kong.CommandNode || len(node.Children) > 0 {
			return next(nil)
		}
		args := append(strings.Fields(node.Path()), "-h")
		if node.Parent.DefaultCmd == node {
			args = append(strings.Fields(node.Parent.Path()), "-h") // herald webhook -h
		}
		code, help, stderr := herald(t, args...)
		if code != 0 {
			t.Errorf("herald %s: %d %s", strings.Join(args, " "), code, stderr)
		}
		for _, f := range node.Flags {
			if !strings.Contains(help, "--"+f.Name) {
				t.Errorf("herald %s does not list --%s:\n%s", strings.Join(args, " "), f.Name, help)
			}
			for _, env := range f.Envs {
				if !strings.Contains(help, "($"+env+")") {
					t.Errorf("herald %s does not name %s:\n%s", strings.Join(args, " "), env, help)
				}
			}
			if f.Default != "" && !f.IsBool() && !strings.Contains(help, "--"+f.Name+"="+f.FormatPlaceHolder()) {
				t.Errorf("herald %s does not show the default of --%s (%s):\n%s", strings.Join(args, " "), f.Name, f.Default, help)
			}
			checked++
		}
		for _, v := range secrets {
			if strings.Contains(help, v) {
				t.Errorf("herald %s shows a secret from the environment:\n%s", strings.Join(args, " "), help)
			}
		}
		return next(nil)
	})
	if checked < 30 {
		t.Errorf("only %d flags checked", checked)
	}
}

func TestHelpAndUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, 2, "", "Commands:"},
		{[]string{"-h"}, 0, "Commands:", ""},
		{[]string{"--help"}, 0, "Commands:", ""},
		{[]string{"help"}, 0, "Commands:", ""},
		{[]string{"help", "worker"}, 0, "--worker-lease", ""},
		{[]string{"help", "webhook"}, 0, "herald webhook set-url <url>", ""},
		{[]string{"webhook", "-h"}, 0, "--updates", ""},
		{[]string{"webhook", "set-url", "-h"}, 0, "--webhook-secret", ""},
		{[]string{"help", "nonsense"}, 2, "", "unexpected argument nonsense"},
		{[]string{"nonsense"}, 2, "", `herald: unknown command "nonsense"`},
		{[]string{"worker", "--worker-lease", "soon"}, 2, "", "herald worker: --worker-lease:"},
	} {
		code, stdout, stderr := herald(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("herald %s: exit %d (want %d)\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), code, tc.code, stdout, stderr)
		}
	}
	// herald webhook's help is that of the command it runs, not of a hidden "serve".
	if _, stdout, _ := herald(t, "webhook", "-h"); strings.Contains(stdout, "serve [flags]") || !strings.HasPrefix(stdout, "Usage: herald webhook [flags]\n") {
		t.Errorf("herald webhook -h:\n%s", stdout)
	}
}

// docs/configuration.md shows the settings table rendered from the code, so it cannot drift.
func TestConfigurationDocsMatchTheSettings(t *testing.T) {
	const path = "../../docs/configuration.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := config.UpdateDocs(string(doc), config.SettingsTable(newParser(&cli{}, io.Discard, io.Discard).Model))
	if err != nil {
		t.Fatalf("docs/configuration.md: %v", err)
	}
	if string(doc) != want {
		t.Errorf("docs/configuration.md does not match the settings declared in internal/config: run `make docs` " +
			"(go run ./cmd/herald config-docs docs/configuration.md) and commit the result")
	}
}
