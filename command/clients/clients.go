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

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
)

// SandboxClientID is the client `samla run` creates for trying the service.
const SandboxClientID = "sandbox"

// BootstrapKeyFile is where a generated sandbox key is written, inside the data dir.
const BootstrapKeyFile = "bootstrap-api-key"

// Service registers clients and issues keys.
type Service struct {
	repo *repository.Repository
	now  func() time.Time
}

// New builds the service.
func New(repo *repository.Repository, now func() time.Time) *Service {
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

// register decides a client's registration and folds it into c, so that c can decide its first
// key in the same append.
func (s *Service) register(c *client.Client, clientID, name string, sandbox bool) ([]domain.Event, error) {
	events, err := c.Register(clientID, name, sandbox, s.now())
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		if err := c.Apply(e); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// Create registers a client and issues its first key, which is returned once and never stored.
func (s *Service) Create(ctx context.Context, clientID, name string, sandbox bool) (string, error) {
	c, err := s.repo.LoadClient(ctx, clientID)
	if err != nil {
		return "", err
	}
	events, err := s.register(c, clientID, name, sandbox)
	if err != nil {
		return "", err
	}
	key, err := GenerateAPIKey(clientID)
	if err != nil {
		return "", err
	}
	issued, err := c.IssueAPIKey(keyID(key), key, s.now())
	if err != nil {
		return "", err
	}
	if _, err := s.repo.Save(ctx, client.StreamName(clientID), 0, meta(clientID), append(events, issued...)); err != nil {
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
	c, err := s.repo.LoadClient(ctx, SandboxClientID)
	if err != nil {
		return "", false, err
	}
	loadedVersion := c.Version() // decideSandbox folds what it decides into c
	decided, err := s.decideSandbox(c, apiKey)
	if err != nil {
		return "", false, err
	}
	if _, err := s.repo.Save(ctx, client.StreamName(SandboxClientID), loadedVersion, meta(SandboxClientID), decided); err != nil {
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
func (s *Service) decideSandbox(c *client.Client, apiKey string) ([]domain.Event, error) {
	var decided []domain.Event
	if !c.Exists() {
		events, err := s.register(c, SandboxClientID, "Sandbox client", true)
		if err != nil {
			return nil, err
		}
		decided = append(decided, events...)
	}
	if slices.Contains(c.ActiveKeyHashes(), client.HashAPIKey(apiKey)) {
		return decided, nil
	}
	issued, err := c.IssueAPIKey(keyID(apiKey), apiKey, s.now())
	if err != nil {
		return nil, fmt.Errorf("issue the bootstrap API key: %w", err)
	}
	return append(decided, issued...), nil
}
