// Command samla is Samla's one binary: `samla run` starts every role on the embedded default;
// the role commands run one role each against EventStoreDB, Kafka and ClickHouse.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/samla/samla/domain/poa"
	"github.com/samla/samla/platform/logging"
)

func main() {
	if err := newRoot(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "samla:", err)
		os.Exit(1)
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "samla",
		Short:         "Collects insurance, pension and wealth data for end users from insurers, pension providers and banks",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		roleCommand("run", "Start every role in one process on the embedded default, with the sandbox", AllRoles(), stdout, stderr),
		roleCommand("command", "Run the command API (write side)", Roles{Command: true}, stdout, stderr),
		roleCommand("query", "Run the query API (read side)", Roles{Query: true}, stdout, stderr),
		roleCommand("relay", "Run the relay from the event store to Kafka", Roles{Relay: true}, stdout, stderr),
		roleCommand("project", "Run the projections from Kafka to the read models", Roles{Project: true}, stdout, stderr),
		roleCommand("connect", "Run the connector workers (and the sandbox companies unless --sandbox=false)", Roles{Connect: true}, stdout, stderr),
		projectionsCommand(stdout, stderr),
		clientsCommand(stdout, stderr),
		caCommand(stdout, stderr),
		keysCommand(stdout, stderr),
		sessionsCommand(stdout, stderr),
		sandboxCommand(stdout, stderr),
	)
	return root
}

// setUp validates the configuration and builds the logger every command starts with, so that
// a malformed setting stops the command before it touches anything.
func setUp(cfg *Config, stderr io.Writer) (*slog.Logger, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return logging.New(stderr, cfg.LogLevel, cfg.LogFormat)
}

// signalContext ends on SIGINT or SIGTERM, which starts a graceful shutdown.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func roleCommand(use, short string, roles Roles, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	cfg := bindConfig(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		logger, err := setUp(cfg, stderr)
		if err != nil {
			return err
		}
		if !cfg.Profiling {
			// Without the pprof endpoint nobody can read a heap profile, so the runtime need not
			// record one: it samples an allocation every 512 KiB, and each new allocation site a
			// load reaches grows its table for good (+0.7 MB after a 30 s POST load).
			runtime.MemProfileRate = 0
		}
		ctx, stop := signalContext()
		defer stop()
		svc, err := Start(ctx, cfg, roles, logger)
		if err != nil {
			return err
		}
		if roles.Command || roles.Query {
			printWelcome(stdout, svc)
		}
		var roleErr error
		select {
		case <-ctx.Done():
		case <-svc.Done():
			roleErr = svc.Err()
		}
		logger.Info("shutting down")
		shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		if err := svc.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.Canceled) {
			return errors.Join(roleErr, fmt.Errorf("shutdown: %w", err))
		}
		return roleErr
	}
	return cmd
}

func printWelcome(w io.Writer, svc *Service) {
	base := "http://" + svc.HTTPAddr()
	fmt.Fprintf(w, "\nSamla is running.\n  API:     %s\n  Metrics: http://%s/metrics\n", base, svc.OpsAddr())
	if addr := svc.MTLSAddr(); addr != "" {
		fmt.Fprintf(w, "  mTLS:    https://%s (%s environment; a client certificate of the CA required)\n", addr, svc.cfg.Environment)
	}
	key := svc.BootstrapAPIKey()
	if key == "" {
		return
	}
	// The key is shown on a terminal, or once when it was just generated; where stdout is
	// collected as a log, later starts name the file (mode 0600) instead of repeating a secret.
	if svc.BootstrapKeyGenerated() || isTerminal(w) {
		fmt.Fprintf(w, "  API key of the sandbox client: %s\n", key)
	}
	if svc.BootstrapKeyGenerated() {
		fmt.Fprintf(w, "  (generated and written to %s)\n", svc.BootstrapKeyPath())
	} else if !isTerminal(w) {
		key = "$(cat " + svc.BootstrapKeyPath() + ")"
		fmt.Fprintf(w, "  API key of the sandbox client: in %s\n", svc.BootstrapKeyPath())
	}
	fmt.Fprintf(w, `
Try it (the MOCK login signs by itself after about a second):

  curl -s -X POST %[1]s/collections \
    -H "Authorization-token: %[2]s" -H 'Service-Version: 2026-04-01' -H 'Content-Type: application/json' \
    -d '{"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK","parameters":[{"type":"SwedishPersonalNumberParameter","personalNumber":"199001010017"}]}'

  curl -s %[1]s/collections/<collectionId>/status -H "Authorization-token: %[2]s"

`, base, key)
}

// isTerminal tells whether w is a terminal (a character device), where a person reads it.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func projectionsCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "projections", Short: "Manage the read models"}
	rebuild := &cobra.Command{Use: "rebuild", Short: "Rebuild the read models from the event store and swap them in when complete", Args: cobra.NoArgs,
		Long: `Replays the event store into new read models (SQLite: <data dir>/readmodels.rebuild; ClickHouse:
the database <database>_rebuild) and swaps them in for the served ones once every model is complete:
a reader never sees half a read model, and a failed or interrupted rebuild leaves the served ones as
they were (its leftovers are removed by the next run). Progress goes to stderr (a redrawn line on a
terminal, a line every 5 s otherwise); the last line, on stdout, is
"rebuilt N events into M read models in T (R events/s)".`}
	cfg := bindConfig(rebuild.Flags())
	rebuild.RunE = func(cmd *cobra.Command, _ []string) error {
		logger, err := setUp(cfg, stderr)
		if err != nil {
			return err
		}
		ctx, stop := signalContext()
		defer stop()
		progress := newRebuildProgress(stderr)
		summary, err := rebuildProjections(ctx, cfg, logger, progress.update)
		progress.finish()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, rebuildSummary(summary))
		return nil
	}
	cmd.AddCommand(rebuild)
	return cmd
}

func clientsCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "clients", Short: "Manage client systems (tenants) and their API keys"}
	create := &cobra.Command{Use: "create", Short: "Register a client and print its API key once", Args: cobra.NoArgs}
	cfg := bindConfig(create.Flags())
	id := create.Flags().String("id", "", "client id: 2-63 lowercase letters, digits or hyphens")
	name := create.Flags().String("name", "", "display name")
	create.RunE = func(cmd *cobra.Command, _ []string) error {
		logger, err := setUp(cfg, stderr)
		if err != nil {
			return err
		}
		ctx, stop := signalContext()
		defer stop()
		key, err := CreateClient(ctx, cfg, logger, *id, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "client %s created; its API key (shown once): %s\n", *id, key)
		return nil
	}
	cmd.AddCommand(create, signingCommand(stdout, stderr), clientsSetCommand(stdout, stderr))
	cmd.AddCommand(clientKeyCommands(stdout, stderr)...)
	return cmd
}

// signingCommand is `samla clients signing`: the operator's configuration of a client's
// cancellations (the spec: "the signing provider API key is stored in the client's account
// configuration and a cancellation PDF template … is supplied to the service operator").
func signingCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "signing", Short: "Set a client's signing provider key and power-of-attorney template", Args: cobra.NoArgs,
		Long: "Records the client's signing configuration as an event: the template, checked for its placeholders " +
			"and kept under the client's next template version, and the provider key, sealed like personal data " +
			"(never printed, logged or returned). --example-template prints a template that works."}
	cfg := bindConfig(cmd.Flags())
	id := cmd.Flags().String("id", "", "client id")
	keyFile := cmd.Flags().String("provider-key-file", "", "file holding the signing provider's API key for this client")
	templateFile := cmd.Flags().String("template", "", "power-of-attorney template file (see --example-template)")
	place := cmd.Flags().String("place", "", "what the documents print for {{place}} (empty: a blank to fill in)")
	example := cmd.Flags().Bool("example-template", false, "print a working template and exit")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *example {
			_, err := fmt.Fprint(stdout, poa.ExampleTemplate)
			return err
		}
		if *id == "" || *keyFile == "" || *templateFile == "" {
			return errors.New("--id, --provider-key-file and --template are required (or --example-template)")
		}
		logger, err := setUp(cfg, stderr)
		if err != nil {
			return err
		}
		ctx, stop := signalContext()
		defer stop()
		version, err := ConfigureClientSigning(ctx, cfg, logger, *id, *keyFile, *templateFile, *place)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "client %s: signing configured, template version %d\n", *id, version)
		return nil
	}
	return cmd
}
