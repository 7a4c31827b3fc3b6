// Package clients is the operator's application service for tenants: registering clients and
// issuing their API keys, including the sandbox client that `samla run` creates on first start.
package clients

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/poa"
)

// SandboxClientID is the client `samla run` creates for trying the service.
const SandboxClientID = "sandbox"

// BootstrapKeyFile is where a generated sandbox key is written, inside the data dir.
const BootstrapKeyFile = "bootstrap-api-key"

// Repository is the port to the event-sourced clients (*repository.Repository[*client.Client]
// satisfies it): the one way to change one, and Load to read one.
type Repository interface {
	Load(ctx context.Context, clientID string) (*client.Client, error)
	Update(ctx context.Context, clientID string, meta repository.Meta, decide func(*client.Client) error,
		opts ...repository.UpdateOption) (*client.Client, eventstore.AppendResult, error)
}

// Service registers clients and issues keys.
type Service struct {
	repo Repository
	now  func() time.Time
}

// New builds the service.
func New(repo Repository, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{repo: repo, now: now}
}

// GenerateAPIKey returns a new key with 256 random bits; the prefix names the client so that a
// leaked key is easy to attribute, and carries no secret.
func GenerateAPIKey(clientID string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate API key: %w", err)
	}
	return "samla_" + clientID + "_" + hex.EncodeToString(b), nil
}

// keyID derives a key's id from its hash, so issuing the same key twice is recognisably the same.
func keyID(key string) string { return "k-" + client.HashAPIKey(key)[:12] }

func meta(clientID string) repository.Meta {
	return repository.Meta{Tenant: clientID, Actor: "operator", CorrelationID: "bootstrap"}
}

// Create registers a client and issues its first key, which is returned once and never stored.
// Both are one append: a client never exists without a key.
func (s *Service) Create(ctx context.Context, clientID, name string, sandbox bool) (string, error) {
	key, err := GenerateAPIKey(clientID)
	if err != nil {
		return "", err
	}
	if _, _, err := s.repo.Update(ctx, clientID, meta(clientID), func(c *client.Client) error {
		if err := c.Register(clientID, name, sandbox, s.now()); err != nil {
			return err
		}
		return c.IssueAPIKey(keyID(key), key, s.now())
	}); err != nil {
		return "", fmt.Errorf("create client %s: %w", clientID, err)
	}
	return key, nil
}

// EnsureSandbox makes sure the sandbox client exists and that apiKey (when given) is one of its
// active keys. With no apiKey, a key is generated on first start and written to the data dir;
// later starts read it back so that it can be printed again. generated tells the caller whether
// the key was created by this call.
func (s *Service) EnsureSandbox(ctx context.Context, dataDir, apiKey string) (key string, generated bool, err error) {
	path := filepath.Join(dataDir, BootstrapKeyFile)
	if apiKey == "" {
		if b, err := os.ReadFile(path); err == nil {
			apiKey = strings.TrimSpace(string(b))
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", false, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if apiKey == "" {
		if apiKey, err = GenerateAPIKey(SandboxClientID); err != nil {
			return "", false, err
		}
		generated = true
	}
	if _, _, err := s.repo.Update(ctx, SandboxClientID, meta(SandboxClientID), func(c *client.Client) error {
		return s.decideSandbox(c, apiKey)
	}); err != nil {
		return "", false, fmt.Errorf("bootstrap sandbox client: %w", err)
	}
	if generated {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return "", false, fmt.Errorf("create data dir: %w", err)
		}
		if err := os.WriteFile(path, []byte(apiKey+"\n"), 0o600); err != nil {
			return "", false, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return apiKey, generated, nil
}

// decideSandbox registers the sandbox client when it is missing and issues apiKey unless it is
// already an active key.
func (s *Service) decideSandbox(c *client.Client, apiKey string) error {
	if !c.Exists() {
		if err := c.Register(SandboxClientID, "Sandbox client", true, s.now()); err != nil {
			return err
		}
	}
	if slices.Contains(c.ActiveKeyHashes(), client.HashAPIKey(apiKey)) {
		return nil
	}
	if err := c.IssueAPIKey(keyID(apiKey), apiKey, s.now()); err != nil {
		return fmt.Errorf("issue the bootstrap API key: %w", err)
	}
	return nil
}

// MaxTemplateFileBytes bounds a template file the operator gives: poa.Parse refuses more anyway,
// and reading stops there.
const MaxTemplateFileBytes = 64 << 10

// ConfigureSigning records a client's signing configuration (the spec: the signing provider API
// key in the client's account configuration, and the cancellation template supplied to the
// operator): the power-of-attorney template, checked by poa.Parse (an unknown, malformed or
// missing placeholder is a *poa.TemplateError listing the known ones), under the client's next
// template version, and the provider key, sealed by the repository (it must have the key
// store). It returns the version recorded.
func (s *Service) ConfigureSigning(ctx context.Context, clientID, template, providerKey, place string) (int, error) {
	t, err := poa.Parse(template)
	if err != nil {
		return 0, fmt.Errorf("configure signing of %s: %w", clientID, err)
	}
	c, _, err := s.repo.Update(ctx, clientID, meta(clientID), func(c *client.Client) error {
		return c.ConfigureSigning(t.Text(), t.Version(), strings.TrimSpace(providerKey), place, s.now())
	})
	if err != nil {
		return 0, fmt.Errorf("configure signing of %s: %w", clientID, err)
	}
	cfg, _ := c.Signing()
	return cfg.TemplateVersion, nil
}

// EnsureSandboxSigning gives the sandbox client the example template and providerKey (the
// sandbox signing provider's) unless it has a signing configuration already, so that
// cancellations work on a fresh `samla run`.
func (s *Service) EnsureSandboxSigning(ctx context.Context, providerKey string) error {
	t, err := poa.Parse(poa.ExampleTemplate)
	if err != nil {
		return fmt.Errorf("the example template: %w", err)
	}
	if _, _, err := s.repo.Update(ctx, SandboxClientID, meta(SandboxClientID), func(c *client.Client) error {
		if _, ok := c.Signing(); ok {
			return nil
		}
		return c.ConfigureSigning(t.Text(), t.Version(), providerKey, "Stockholm", s.now())
	}); err != nil {
		return fmt.Errorf("configure the sandbox client's signing: %w", err)
	}
	return nil
}
