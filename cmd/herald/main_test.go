package main

import (
	"io"
	"os"
	"runtime/debug"
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
		// Each command shows its own defaults: herald dev writes to a terminal, the others to a log pipeline.
		{[]string{"dev", "-h"}, 0, `--log-format="text"`, ""},
		{[]string{"help", "dev"}, 0, `--log-format="text"`, ""},
		{[]string{"ingress", "-h"}, 0, `--log-format="json"`, ""},
		{[]string{"dev", "-h"}, 0, "--print-env", ""},
		{[]string{"dev", "--print-env", "--data-dir", t.TempDir()}, 1, "", "herald dev: no herald dev is running on the data directory"},
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

func TestVersion(t *testing.T) {
	_, v1, _ := herald(t, "version")
	code, v2, _ := herald(t, "--version")
	if code != 0 || v1 != v2 || !strings.HasPrefix(v1, "herald ") {
		t.Errorf("herald version %q, herald --version %q (%d)", v1, v2, code)
	}
}

// `make build` and the image stamp the version: without it a build from a checkout says "(devel)".
func TestBuildsStampTheVersion(t *testing.T) {
	for _, path := range []string{"../../Makefile", "../../Dockerfile"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "-X main.buildVersion=") {
			t.Errorf("%s builds herald without -X main.buildVersion=…", path)
		}
	}
}

func TestDescribeBuild(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		info    *debug.BuildInfo
		ok      bool
		stamped string
		want    string
	}{
		{"no build information", nil, false, "", "herald (unknown version: no build information)"},
		{"a checkout with changes", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("-trimpath", "true", "vcs", "git", "vcs.revision", "0072c9b1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7", "vcs.time", "2026-05-01T10:00:00Z", "vcs.modified", "true")},
			true, "", "herald (devel), commit 0072c9b1d2e3 (modified) of 2026-05-01T10:00:00Z, go1.26.8"},
		{"a tagged, clean build", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
			Settings: vcs("vcs.revision", "abc123", "vcs.modified", "false")},
			true, "", "herald v1.2.0, commit abc123, go1.26.8"},
		{"-buildvcs=false or no checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("-trimpath", "true")},
			true, "", "herald (devel), go1.26.8"},
		{"a test binary", &debug.BuildInfo{}, true, "", "herald (devel)"},
		{"make build from a worktree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			true, "v0.3.0-12-g93ea2eb", "herald v0.3.0-12-g93ea2eb, go1.26.8"},
		{"go install of a tag, stamped too", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}},
			true, "93ea2eb", "herald v1.2.0, go1.26.8"},
	} {
		if got := describeBuild(tc.info, tc.ok, tc.stamped); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
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
