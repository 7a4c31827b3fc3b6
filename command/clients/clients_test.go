package clients_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
)

func newService(t *testing.T) (*clients.Service, *repository.Repository[*client.Client], *memstore.Store) {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	repo := repository.New(store, reg, client.Kind)
	return clients.New(repo, nil), repo, store
}

func activeKey(t *testing.T, repo *repository.Repository[*client.Client], clientID, key string) bool {
	t.Helper()
	c, err := repo.Load(context.Background(), clientID)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(c.ActiveKeyHashes(), client.HashAPIKey(key))
}

func TestCreateRegistersAndIssuesOneKey(t *testing.T) {
	svc, repo, store := newService(t)
	ctx := context.Background()
	key, err := svc.Create(ctx, "acme", "Acme", false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "samla_acme_") || !activeKey(t, repo, "acme", key) {
		t.Fatalf("key %q is not an active key of acme", key)
	}
	if store.Appends() != 1 || len(store.Events(client.StreamName("acme"))) != 2 {
		t.Fatalf("appends %d, events %d: want registration and key in one append", store.Appends(), len(store.Events(client.StreamName("acme"))))
	}
	if _, err := svc.Create(ctx, "acme", "Acme again", false); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	if store.Appends() != 1 {
		t.Fatal("a refused create appended")
	}
}

func TestEnsureSandboxGeneratesOnceAndReadsBack(t *testing.T) {
	svc, repo, store := newService(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	key, generated, err := svc.EnsureSandbox(ctx, dir, "")
	if err != nil || !generated || !activeKey(t, repo, clients.SandboxClientID, key) {
		t.Fatalf("first start: key %q, generated %v, err %v", key, generated, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, clients.BootstrapKeyFile))
	if err != nil || strings.TrimSpace(string(b)) != key {
		t.Fatalf("key file %q (%v), want the generated key", b, err)
	}
	appends := store.Appends()
	again, generated, err := svc.EnsureSandbox(ctx, dir, "")
	if err != nil || generated || again != key || store.Appends() != appends {
		t.Fatalf("second start: key %q (want %q), generated %v, err %v, appends %d → %d", again, key, generated, err, appends, store.Appends())
	}
}

func TestEnsureSandboxIssuesAnExplicitKeyOnce(t *testing.T) {
	svc, repo, store := newService(t)
	ctx := context.Background()
	dir := t.TempDir()
	explicit := "samla_sandbox_" + strings.Repeat("ab", 32)
	key, generated, err := svc.EnsureSandbox(ctx, dir, explicit)
	if err != nil || generated || key != explicit || !activeKey(t, repo, clients.SandboxClientID, explicit) {
		t.Fatalf("explicit key: %q, generated %v, err %v", key, generated, err)
	}
	if _, err := os.Stat(filepath.Join(dir, clients.BootstrapKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an explicit key was written to the data dir: %v", err)
	}
	appends := store.Appends()
	if _, _, err := svc.EnsureSandbox(ctx, dir, explicit); err != nil || store.Appends() != appends {
		t.Fatalf("the same key again: err %v, appends %d → %d", err, appends, store.Appends())
	}
	other := "samla_sandbox_" + strings.Repeat("cd", 32)
	if _, _, err := svc.EnsureSandbox(ctx, dir, other); err != nil || !activeKey(t, repo, clients.SandboxClientID, other) ||
		!activeKey(t, repo, clients.SandboxClientID, explicit) {
		t.Fatalf("another key: err %v; both keys should be active", err)
	}
}
