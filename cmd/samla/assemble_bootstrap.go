// Bootstrap: the sandbox client of `samla run` and the operator's client registration.

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/apikeys"
)

// bootstrap creates the sandbox client and, when the projections run in this process, waits
// until its key authenticates, so that the printed curl works at once.
func (s *Service) bootstrap(ctx context.Context) error {
	// With the key store: the sandbox's signing configuration seals its provider key.
	svc := clients.New(repository.New(s.store, s.registry, client.Kind, repository.WithKeys(s.keys)), nil)
	key, generated, err := svc.EnsureSandbox(ctx, s.cfg.DataDir, s.cfg.BootstrapAPIKey)
	if err != nil {
		return err
	}
	if s.cfg.SigningProviderURL == "" {
		// The sandbox's signing provider: cancellations work on a fresh `samla run`.
		if err := svc.EnsureSandboxSigning(ctx, SandboxSigningKey); err != nil {
			return err
		}
	}
	s.bootstrapKey, s.bootstrapGenerated = key, generated
	if !s.roles.Project || !s.roles.Relay {
		return nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	keys := apikeys.NewReader(s.models.APIKeys)
	for {
		if _, err := keys.Lookup(waitCtx, key); err == nil {
			return nil
		}
		select {
		case <-waitCtx.Done():
			return fmt.Errorf("the sandbox client's key did not reach the read model: %w", waitCtx.Err())
		case <-s.done:
			return s.failErr
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// SandboxSigningKey is the sandbox client's key at the sandbox's signing provider, which takes
// any key (it keeps each key's processes apart); it is a secret only in name.
const SandboxSigningKey = "sandbox-signing-provider-key"

// CreateClient registers a client and returns its first API key.
func CreateClient(ctx context.Context, cfg *Config, logger *slog.Logger, id, name string) (string, error) {
	release, err := lockDataDir(cfg, useBeside)
	if err != nil {
		return "", err
	}
	defer func() { _ = release() }()
	store, err := openStore(cfg)
	if err != nil {
		return "", err
	}
	defer store.Close()
	registry, err := eventschema.NewRegistry()
	if err != nil {
		return "", err
	}
	key, err := clients.New(repository.New(store, registry, client.Kind), nil).Create(ctx, id, name, false)
	if err != nil {
		return "", err
	}
	logger.Info("client created", "client", id)
	return key, nil
}

// ConfigureClientSigning records a client's signing configuration: the template file's text
// and the provider key file's key (sealed under the client's subject in the key store beside
// the event store). It returns the template version recorded.
func ConfigureClientSigning(ctx context.Context, cfg *Config, logger *slog.Logger, id, keyFile, templateFile, place string) (int, error) {
	key, err := readBounded(keyFile, 4<<10)
	if err != nil {
		return 0, fmt.Errorf("read the provider key: %w", err)
	}
	template, err := readBounded(templateFile, clients.MaxTemplateFileBytes)
	if err != nil {
		return 0, fmt.Errorf("read the template: %w", err)
	}
	var version int
	err = withClientService(ctx, cfg, func(svc *clients.Service, _ eventstore.Store, _ *eventschema.Registry) error {
		version, err = svc.ConfigureSigning(ctx, id, string(template), string(key), place)
		return err
	})
	if err != nil {
		return 0, err
	}
	logger.Info("client's signing configured", "client", id, "templateVersion", version)
	return version, nil
}

// readBounded reads a file of at most limit bytes; a larger one is refused, not cut.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
