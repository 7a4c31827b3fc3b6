// The operator's CA for mutual TLS (samla ca init|sign|revoke|list) and a client's settings
// (samla clients set). Certificates and settings are recorded on the client as events through
// the clients service; the CA itself is files (platform/mtlsca).

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/mtlsca"
)

// InitCA creates the operator's CA at cfg.CAFiles(), refusing to replace one.
func InitCA(cfg *Config) (mtlsca.Files, *mtlsca.CA, error) {
	files := cfg.CAFiles()
	ca, err := mtlsca.Init(files, "Samla operator CA", time.Now())
	return files, ca, err
}

// withClientService opens the event store and the key store beside a running service (as
// `samla clients signing` does: a client's stream may hold sealed secrets) and runs fn with the
// clients service.
func withClientService(ctx context.Context, cfg *Config, fn func(*clients.Service, eventstore.Store, *eventschema.Registry) error) error {
	release, err := lockDataDir(cfg, useBeside)
	if err != nil {
		return err
	}
	defer func() { _ = release() }()
	store, err := openStore(cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	keys, err := openKeys(cfg)
	if err != nil {
		return err
	}
	defer keys.close()
	if err := checkKeysNotLost(ctx, keys, store); err != nil {
		return err
	}
	registry, err := eventschema.NewRegistry()
	if err != nil {
		return err
	}
	return fn(clients.New(repository.New(store, registry, client.Kind, repository.WithKeys(keys)), nil), store, registry)
}

// SignClientCertificate checks the CSR file (RSA of exactly 2048 bits, a valid self-signature),
// signs a client certificate for clientID in env valid for validity (0: a year), records it on
// the client (client.certificate-issued; a client that does not exist is refused and nothing
// is written) and returns the event and the certificate PEM.
func SignClientCertificate(ctx context.Context, cfg *Config, logger *slog.Logger, clientID, env, csrFile string, validity time.Duration) (client.CertificateIssued, []byte, error) {
	if !mtlsca.ValidEnvironment(env) {
		return client.CertificateIssued{}, nil, fmt.Errorf("--env must be test or production, not %q", env)
	}
	csrPEM, err := readBounded(csrFile, mtlsca.MaxCSRBytes)
	if err != nil {
		return client.CertificateIssued{}, nil, fmt.Errorf("read the CSR: %w", err)
	}
	csr, err := mtlsca.ParseCSR(csrPEM)
	if err != nil {
		return client.CertificateIssued{}, nil, err
	}
	ca, err := mtlsca.Load(cfg.CAFiles())
	if err != nil {
		return client.CertificateIssued{}, nil, err
	}
	issued, err := ca.SignClient(csr, clientID, env, validity, time.Now())
	if err != nil {
		return client.CertificateIssued{}, nil, err
	}
	ev := client.CertificateIssued{Serial: issued.Serial, Fingerprint: issued.Fingerprint, Environment: client.Environment(env),
		Subject: issued.Cert.Subject.String(), NotBefore: issued.Cert.NotBefore, NotAfter: issued.Cert.NotAfter}
	err = withClientService(ctx, cfg, func(svc *clients.Service, _ eventstore.Store, _ *eventschema.Registry) error {
		return svc.RecordCertificate(ctx, clientID, ev)
	})
	if err != nil {
		return client.CertificateIssued{}, nil, err
	}
	logger.Info("client certificate issued", "client", clientID, "serial", ev.Serial, "environment", env)
	return ev, issued.PEM, nil
}

// RevokeClientCertificate revokes the certificate with this serial (as openssl prints it, or as
// samla ca list does) and returns its client (clientID when given, else found in the event
// store) and the serial as recorded.
func RevokeClientCertificate(ctx context.Context, cfg *Config, logger *slog.Logger, serial, clientID string) (string, string, error) {
	serial, err := mtlsca.NormalizeSerial(serial)
	if err != nil {
		return "", "", err
	}
	err = withClientService(ctx, cfg, func(svc *clients.Service, store eventstore.Store, reg *eventschema.Registry) error {
		if clientID == "" {
			if clientID, err = clients.FindCertificateClient(ctx, store, reg, serial); err != nil {
				return err
			}
		}
		return svc.RevokeCertificate(ctx, clientID, serial)
	})
	if err != nil {
		return "", "", err
	}
	logger.Info("client certificate revoked", "client", clientID, "serial", serial)
	return clientID, serial, nil
}

// ClientCertificates lists a client's certificates from its events.
func ClientCertificates(ctx context.Context, cfg *Config, clientID string) ([]client.Certificate, error) {
	var certs []client.Certificate
	err := withClientService(ctx, cfg, func(svc *clients.Service, _ eventstore.Store, _ *eventschema.Registry) (err error) {
		certs, err = svc.Certificates(ctx, clientID)
		return err
	})
	return certs, err
}

// SetClientSettings records the settings given (nil: unchanged) and returns the client's
// settings after it.
func SetClientSettings(ctx context.Context, cfg *Config, logger *slog.Logger, clientID string, rateLimit *float64, burst *int, mtlsOnly *bool) (client.Settings, error) {
	var settings client.Settings
	err := withClientService(ctx, cfg, func(svc *clients.Service, _ eventstore.Store, _ *eventschema.Registry) (err error) {
		settings, err = svc.ChangeSettings(ctx, clientID, rateLimit, burst, mtlsOnly)
		return err
	})
	if err != nil {
		return client.Settings{}, err
	}
	logger.Info("client settings changed", "client", clientID)
	return settings, nil
}

// operatorCommand runs body with the configuration's logger and a signal context.
func operatorCommand(cfg *Config, stderr io.Writer, body func(context.Context, *slog.Logger) error) func(*cobra.Command, []string) error {
	return func(*cobra.Command, []string) error {
		logger, err := setUp(cfg, stderr)
		if err != nil {
			return err
		}
		ctx, stop := signalContext()
		defer stop()
		return body(ctx, logger)
	}
}

func caCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "ca", Short: "The operator's certificate authority for mutual TLS",
		Long: "The CA signs the clients' certificates for the mutual-TLS listener (--mtls-addr). Its files are " +
			"<data dir>/ca/ca.crt and ca.key (0600) unless --ca-cert-file and --ca-key-file name others."}

	initCmd := &cobra.Command{Use: "init", Short: "Create the CA (never replaces one)", Args: cobra.NoArgs}
	initCfg := bindConfig(initCmd.Flags())
	initCmd.RunE = operatorCommand(initCfg, stderr, func(context.Context, *slog.Logger) error {
		files, ca, err := InitCA(initCfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "CA created (ECDSA P-256, valid until %s)\n  certificate: %s (give it to clients to verify the listener)\n  key:         %s (keep it secret)\n  SHA-256:     %s\n",
			ca.Cert.NotAfter.Format(time.DateOnly), files.Cert, files.Key, mtlsca.Fingerprint(ca.Cert.Raw))
		return nil
	})

	sign := &cobra.Command{Use: "sign", Short: "Sign a client's CSR (RSA 2048) and record the certificate", Args: cobra.NoArgs,
		Long: "Checks the CSR (an RSA key of exactly 2048 bits and a valid self-signature), signs a certificate for TLS " +
			"client authentication with CN=<client id>, OU=<environment>, O=Samla client and a random 128-bit serial, " +
			"records it on the client (client.certificate-issued) and writes it (PEM) to --out or stdout."}
	signCfg := bindConfig(sign.Flags())
	signClient := sign.Flags().String("client", "", "client id")
	signEnv := sign.Flags().String("env", "", "test or production")
	signCSR := sign.Flags().String("csr", "", "PEM certificate signing request")
	signOut := sign.Flags().String("out", "", "file to write the certificate to (default stdout)")
	signDays := sign.Flags().Int("days", int(mtlsca.DefaultClientValidity/(24*time.Hour)), "validity in days")
	sign.RunE = operatorCommand(signCfg, stderr, func(ctx context.Context, logger *slog.Logger) error {
		if *signClient == "" || *signEnv == "" || *signCSR == "" {
			return errors.New("--client, --env and --csr are required")
		}
		if maxDays := int(mtlsca.MaxClientValidity / (24 * time.Hour)); *signDays < 1 || *signDays > maxDays {
			return fmt.Errorf("--days must be 1 to %d, not %d", maxDays, *signDays)
		}
		ev, certPEM, err := SignClientCertificate(ctx, signCfg, logger, *signClient, *signEnv, *signCSR, time.Duration(*signDays)*24*time.Hour)
		if err != nil {
			return err
		}
		info := stdout
		if *signOut == "" {
			info = stderr
			if _, err := stdout.Write(certPEM); err != nil {
				return err
			}
		} else if err := os.WriteFile(*signOut, certPEM, 0o644); err != nil {
			return fmt.Errorf("certificate %s is recorded but could not be written (revoke it, or sign again): %w", ev.Serial, err)
		}
		fmt.Fprintf(info, "client %s: certificate %s for %s, valid until %s\n", *signClient, ev.Serial, ev.Environment,
			ev.NotAfter.Format(time.RFC3339))
		return nil
	})

	revoke := &cobra.Command{Use: "revoke", Short: "Revoke a client certificate by its serial", Args: cobra.NoArgs,
		Long: "Records client.certificate-revoked; the mutual-TLS listener refuses the certificate within seconds, " +
			"without a restart. The client is found by the serial unless --client names it."}
	revokeCfg := bindConfig(revoke.Flags())
	revokeSerial := revoke.Flags().String("serial", "", "the certificate's serial in hex (as samla ca list or openssl x509 -serial print it)")
	revokeClient := revoke.Flags().String("client", "", "the certificate's client (optional)")
	revoke.RunE = operatorCommand(revokeCfg, stderr, func(ctx context.Context, logger *slog.Logger) error {
		if *revokeSerial == "" {
			return errors.New("--serial is required")
		}
		clientID, serial, err := RevokeClientCertificate(ctx, revokeCfg, logger, *revokeSerial, *revokeClient)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "client %s: certificate %s revoked\n", clientID, serial)
		return nil
	})

	list := &cobra.Command{Use: "list", Short: "List a client's certificates", Args: cobra.NoArgs}
	listCfg := bindConfig(list.Flags())
	listClient := list.Flags().String("client", "", "client id")
	list.RunE = operatorCommand(listCfg, stderr, func(ctx context.Context, _ *slog.Logger) error {
		if *listClient == "" {
			return errors.New("--client is required")
		}
		certs, err := ClientCertificates(ctx, listCfg, *listClient)
		if err != nil {
			return err
		}
		return printCertificates(stdout, certs)
	})

	cmd.AddCommand(initCmd, sign, revoke, list)
	return cmd
}

func printCertificates(w io.Writer, certs []client.Certificate) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERIAL\tENVIRONMENT\tNOT BEFORE\tNOT AFTER\tREVOKED")
	for _, c := range certs {
		revoked := "no"
		if c.Revoked {
			revoked = c.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Serial, c.Environment, c.NotBefore.UTC().Format(time.RFC3339),
			c.NotAfter.UTC().Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

// clientsSetCommand is `samla clients set`: only the flags given are recorded.
func clientsSetCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "set", Short: "Change a client's settings: its rate limit and burst, mTLS-only", Args: cobra.NoArgs,
		Long: "Records client.settings-changed with the flags given (and only what differs). --mtls-only refuses the " +
			"client's API key on the plain listener (401 MTLS_REQUIRED); --mtls-only=false lifts it."}
	// The service's own --rate-limit and --rate-burst mean nothing here; this command's
	// --rate-limit is the client's.
	shared := pflag.NewFlagSet("config", pflag.ContinueOnError)
	cfg := bindConfig(shared)
	shared.VisitAll(func(f *pflag.Flag) {
		if f.Name != "rate-limit" && f.Name != "rate-burst" {
			cmd.Flags().AddFlag(f)
		}
	})
	id := cmd.Flags().String("id", "", "client id")
	rateLimit := cmd.Flags().Float64("rate-limit", 0, fmt.Sprintf("the client's requests per second (%g to %d)", client.MinRateLimit, client.MaxRateLimit))
	burst := cmd.Flags().Int("burst", 0, fmt.Sprintf("the client's burst of requests (1 to %d)", client.MaxBurst))
	mtlsOnly := cmd.Flags().Bool("mtls-only", false, "refuse the client's API key on the plain listener (--mtls-only=false lifts it)")
	cmd.RunE = operatorCommand(cfg, stderr, func(ctx context.Context, logger *slog.Logger) error {
		if *id == "" {
			return errors.New("--id is required")
		}
		var (
			r *float64
			b *int
			m *bool
		)
		if cmd.Flags().Changed("rate-limit") {
			r = rateLimit
		}
		if cmd.Flags().Changed("burst") {
			b = burst
		}
		if cmd.Flags().Changed("mtls-only") {
			m = mtlsOnly
		}
		if r == nil && b == nil && m == nil {
			return errors.New("give at least one of --rate-limit, --burst and --mtls-only")
		}
		settings, err := SetClientSettings(ctx, cfg, logger, *id, r, b, m)
		if err != nil {
			return err
		}
		rate, bucket := "default", "default"
		if settings.RateLimit > 0 {
			rate = fmt.Sprintf("%g/s", settings.RateLimit)
		}
		if settings.Burst > 0 {
			bucket = fmt.Sprint(settings.Burst)
		}
		fmt.Fprintf(stdout, "client %s: rate limit %s, burst %s, mTLS-only %v\n", *id, rate, bucket, settings.MTLSOnly)
		return nil
	})
	return cmd
}
