// Command herald is Herald's one binary: each component is a subcommand, so one image runs them all.
// This package only wires: it parses configuration and hands it to the packages under internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	_ "net/http/pprof" // registered on http.DefaultServeMux, served only with HERALD_PPROF_ADDR
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the subcommand table.
var commands = map[string]command{
	"migrate":  {"apply the embedded SQL migrations", runMigrate},
	"ingress":  {"serve the tenant API (/v1)", runIngress},
	"tenant":   {"admin: create, suspend, resume, list tenants; add developers", runTenant},
	"apikey":   {"admin: create, revoke, list API keys", runAPIKey},
	"dev":      {"everything in one process on embedded defaults (make run)", runDev},
	"operator": {"reconcile Tenant and ApiKey resources into the key store", runOperator},
	"worker":   {"deliver notifications from Kafka to the messenger", runWorker},
	"sim":      {"the messenger simulator on its own (Bot API + control API to act as users)", runSim},
	"webhook":  {"serve the messenger webhook (or long-poll updates); set-url registers it", runWebhook},
}

func main() {
	// HERALD_PPROF_ADDR serves net/http/pprof on a separate, opt-in address (keep it on loopback): the
	// way to profile a component under load without exposing profiles on the service port.
	if addr := os.Getenv("HERALD_PPROF_ADDR"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "herald: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "herald %s: %v\n", args[0], err)
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: herald <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'herald <command> -h' for the flags of a command. Every flag has a HERALD_* environment variable.")
}

// usageError marks a mistake in the command line (exit status 2).
type usageError struct{ error }

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("herald "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return nil
}
