// Command herald is Herald's one binary: each component is a subcommand, so one image runs them all.
// This package only wires: the settings are declared in internal/config; each command here embeds the
// ones it reads, and its Run builds the options of a package under internal/ and runs it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // registered on http.DefaultServeMux, served only with --pprof-addr
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // PATCH /v1/users/{id} checks time zones against the zone database, also in a static image without one

	"github.com/alecthomas/kong"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/tracing"
)

// cli is herald's command line.
type cli struct {
	config.Process
	Version kong.VersionFlag `help:"print the version and exit"`

	Ingress   ingressCmd   `cmd:"" help:"serve the tenant API (/v1)"`
	Webhook   webhookCmd   `cmd:"" help:"serve the messenger webhook (or long-poll updates); set-url registers it"`
	Worker    workerCmd    `cmd:"" help:"deliver notifications from Kafka to the messenger"`
	Callbacks callbacksCmd `cmd:"" help:"send status callbacks (signed events) to the tenants' endpoints"`
	Operator  operatorCmd  `cmd:"" help:"reconcile Tenant and ApiKey resources into the key store"`
	Migrate   migrateCmd   `cmd:"" help:"apply the embedded SQL migrations"`
	Dev       devCmd       `cmd:"" help:"everything in one process on embedded defaults (make run)"`
	Sim       simCmd       `cmd:"" help:"the messenger simulator on its own (Bot API + control API to act as users)"`
	Tenant    tenantCmd    `cmd:"" help:"admin: create, suspend, resume, list tenants; add developers"`
	APIKey    apikeyCmd    `cmd:"" name:"apikey" help:"admin: create, revoke, list API keys"`

	Notifications notificationsCmd `cmd:"" help:"admin: list and cancel a tenant's notifications"`
	Usage         usageCmd         `cmd:"" help:"admin: what each tenant sent, per day or hour, as CSV or JSON"`
	Audit         auditCmd         `cmd:"" help:"admin: who changed what, every tenant or one, newest first, as CSV or JSON"`

	Help       helpCmd       `cmd:"" help:"show the help of a command: herald help [COMMAND…]"`
	VersionCmd versionCmd    `cmd:"" name:"version" help:"print the version"`
	ConfigDocs configDocsCmd `cmd:"" name:"config-docs" hidden:"" help:"print the settings table of docs/configuration.md, or update it in FILE"`
}

// runEnv is what every command's Run receives.
type runEnv struct {
	ctx            context.Context
	stdout, stderr io.Writer
}

// usageError marks a mistake in the command line (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exit is how kong's help and version flags end a run: run recovers it, so tests can call run.
type exit int

// newParser builds herald's parser around a fresh grammar.
func newParser(c *cli, stdout, stderr io.Writer) *config.Parser {
	p, err := config.NewParser(c,
		kong.Name("herald"),
		kong.Description("Herald, a multi-tenant notification delivery gateway. Every setting is a flag and a HERALD_* environment variable; the flag wins."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exit(code)) }),
		kong.Vars{"version": version()},
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
		kong.Help(printHelp),
		// `--expires-in -5m` is a value, as it was with the standard flag package: then refused for what it is.
		kong.WithHyphenPrefixedParameters(true),
	)
	if err != nil {
		panic(err) // the grammar is wrong: every test catches it
	}
	return p
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	var c cli
	parser := newParser(&c, stdout, stderr)
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exit)
			if !ok {
				panic(r)
			}
			code = int(e)
		}
	}()
	if len(args) == 0 {
		usage(parser, stderr)
		return 2
	}
	if name := args[0]; !strings.HasPrefix(name, "-") && !isCommand(parser.Model, name) {
		fmt.Fprintf(stderr, "herald: unknown command %q\n\n", name)
		usage(parser, stderr)
		return 2
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		return report(stderr, kctx, err)
	}
	if c.PprofAddr != "" {
		// A separate, opt-in address: profile a component under load without exposing profiles on the
		// service port. Herald's limits, without a write timeout: a CPU profile streams for its seconds.
		limits := server.DefaultClientBounds
		limits.WriteTimeout = 0
		srv := server.NewHTTPServer(http.DefaultServeMux, slog.Default(), limits)
		srv.Addr = c.PprofAddr
		go func() { _ = srv.ListenAndServe() }()
	}
	// A change an admin command makes is the admin CLI's (the audit trail, §15); the components say who
	// makes theirs themselves (the tenant API: the request's key; the operator; the chat: the user).
	if cmd := kctx.Command(); strings.HasPrefix(cmd, "tenant ") || strings.HasPrefix(cmd, "apikey ") {
		ctx = audit.WithActor(ctx, audit.AdminCLI)
	}
	if err := kctx.Run(runEnv{ctx: ctx, stdout: stdout, stderr: stderr}); err != nil {
		return report(stderr, kctx, err)
	}
	return 0
}

// report prints an error under the command's name and returns the exit status: 2 for a mistake in the
// command line, 1 for anything else (an invalid configuration included).
func report(stderr io.Writer, kctx *kong.Context, err error) int {
	var perr *kong.ParseError
	if errors.As(err, &perr) && kctx == nil {
		kctx = perr.Context
	}
	name := commandPath(kctx)
	if node := lastCommand(kctx); perr != nil && node != nil && len(node.Children) > 0 && kctx.Selected() == node {
		// A command that needs a subcommand was given none: list them rather than kong's truncated guess.
		fmt.Fprintf(stderr, "%s: a subcommand is required:\n", name)
		for _, c := range node.Children {
			if !c.Hidden {
				fmt.Fprintf(stderr, "  %s %-14s %s\n", name, c.Name, c.Help)
			}
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if perr != nil || errors.As(err, new(usageError)) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
		return 2
	}
	return 1
}

// lastCommand is the deepest command selected, or nil.
func lastCommand(kctx *kong.Context) *kong.Node {
	if kctx == nil {
		return nil
	}
	var node *kong.Node
	for _, p := range kctx.Path {
		if p.Command != nil {
			node = p.Command
		}
	}
	return node
}

// commandPath is "herald" and the visible commands selected, as users type them.
func commandPath(kctx *kong.Context) string {
	parts := []string{"herald"}
	if kctx != nil {
		for _, p := range kctx.Path {
			if p.Command != nil && !p.Command.Hidden {
				parts = append(parts, p.Command.Name)
			}
		}
	}
	return strings.Join(parts, " ")
}

func isCommand(app *kong.Application, name string) bool {
	for _, n := range app.Children {
		if n.Type == kong.CommandNode && (n.Name == name || slices.Contains(n.Aliases, name)) {
			return true
		}
	}
	return false
}

// usage prints the top-level help to w.
func usage(p *config.Parser, w io.Writer) {
	p.Stdout = w
	if kctx, err := kong.Trace(p.Kong, nil); err == nil {
		_ = kctx.PrintUsage(false)
	}
}

// printHelp is kong's help, except for a command that runs by default and also has subcommands (herald
// webhook, with herald webhook set-url): kong would list only the subcommands; this shows the flags the
// command runs with, as `herald webhook -h` always has.
func printHelp(options kong.HelpOptions, kctx *kong.Context) error {
	sel := kctx.Selected()
	if sel == nil || sel.DefaultCmd == nil || sel.DefaultCmd.Tag.Default != "withargs" {
		return kong.DefaultHelpPrinter(options, kctx)
	}
	dctx, err := kong.Trace(kctx.Kong, append(strings.Fields(sel.Path()), sel.DefaultCmd.Name))
	if err != nil {
		return err
	}
	fmt.Fprintf(kctx.Stdout, "Usage: %s %s [flags]\n", kctx.Model.Name, sel.Path())
	for _, child := range sel.Children {
		if child != sel.DefaultCmd && !child.Hidden {
			fmt.Fprintf(kctx.Stdout, "       %s %s\n", kctx.Model.Name, child.Summary())
		}
	}
	options.NoAppSummary = true
	return kong.DefaultHelpPrinter(options, dctx)
}

// helpCmd is `herald help [COMMAND…]`, the same as `herald [COMMAND…] --help`.
type helpCmd struct {
	Command []string `arg:"" optional:"" help:"the command"`
}

func (h *helpCmd) Run(kctx *kong.Context) error {
	// Parsing `COMMAND… --help` prints the help and ends the run, as the flag does.
	_, err := kctx.Kong.Parse(append(h.Command, "--help"))
	return err
}

// startTracing installs OpenTelemetry for a component (exporting over OTLP only when
// OTEL_EXPORTER_OTLP_ENDPOINT is set) and returns what flushes it on the way out. A broken exporter
// configuration is logged, not fatal: tracing is an aid, delivery does not depend on it.
func startTracing(ctx context.Context, service string, logger *slog.Logger) func() {
	shutdown, err := tracing.Setup(ctx, service)
	if err != nil {
		logger.Warn("tracing is off: the OTLP exporter could not be set up", "err", err)
		return func() {}
	}
	if tracing.Enabled() {
		logger.Info("exporting traces over OTLP", "service", service)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(ctx)
	}
}
