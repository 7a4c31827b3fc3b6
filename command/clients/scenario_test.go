package clients_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/poa"
)

// Command-level scenarios: given a client's events, when the service runs, then what it appends.

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestScenarioEnsureSandbox(t *testing.T) {
	explicit := "samla_sandbox_" + strings.Repeat("ab", 32)
	registered := client.Registered{ClientID: clients.SandboxClientID, Name: "Sandbox client", Sandbox: true, RegisteredAt: t0}
	issued := client.APIKeyIssued{KeyID: "k-" + client.HashAPIKey(explicit)[:12], KeyHash: client.HashAPIKey(explicit), IssuedAt: t0}
	ensure := func(svc *clients.Service, key string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, _, err := svc.EnsureSandbox(ctx, t.TempDir(), key)
			return err
		}
	}
	newScenario := func(t *testing.T) (*commandtest.Scenario, *clients.Service) {
		sc := commandtest.New(t, t0)
		return sc, clients.New(commandtest.Repository(sc, client.Kind), sc.Clock())
	}
	t.Run("a first start registers the client with the key, in one append", func(t *testing.T) {
		sc, svc := newScenario(t)
		sc.When(ensure(svc, explicit)).Then(registered, issued)
		if sc.Store().Appends() != 1 {
			t.Fatalf("appends = %d", sc.Store().Appends())
		}
	})
	t.Run("a later start with the same key appends nothing", func(t *testing.T) {
		sc, svc := newScenario(t)
		sc.Given(client.StreamName(clients.SandboxClientID), registered, issued).When(ensure(svc, explicit)).Then()
	})
	t.Run("another key is issued beside the first", func(t *testing.T) {
		sc, svc := newScenario(t)
		other := "samla_sandbox_" + strings.Repeat("cd", 32)
		sc.Given(client.StreamName(clients.SandboxClientID), registered, issued).When(ensure(svc, other)).
			Then(client.APIKeyIssued{KeyID: "k-" + client.HashAPIKey(other)[:12], KeyHash: client.HashAPIKey(other), IssuedAt: t0})
	})
}

func TestScenarioCreate(t *testing.T) {
	sc := commandtest.New(t, t0)
	svc := clients.New(commandtest.Repository(sc, client.Kind), sc.Clock())
	sc.Given(client.StreamName("acme"), client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: t0}).
		When(func(ctx context.Context) error {
			_, err := svc.Create(ctx, "acme", "Acme again", false)
			return err
		}).ThenError(domain.ErrConflict)
	sc.When(func(ctx context.Context) error {
		_, err := svc.Create(ctx, "Not An Id", "Bad", false)
		return err
	}).ThenError(domain.ErrInvalid)
}

func TestScenarioConfigureSigning(t *testing.T) {
	const providerKey = "provider-key-0123456789"
	example, err := poa.Parse(poa.ExampleTemplate)
	if err != nil {
		t.Fatal(err)
	}
	registered := client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: t0}
	t.Run("a checked template under version 1, the key in the sealed part", func(t *testing.T) {
		sc := commandtest.New(t, t0)
		svc := clients.New(commandtest.Repository(sc, client.Kind), sc.Clock())
		var version int
		sc.Given(client.StreamName("acme"), registered).When(func(ctx context.Context) error {
			version, err = svc.ConfigureSigning(ctx, "acme", poa.ExampleTemplate, providerKey+"\n", "Lund")
			return err
		}).Then(client.SigningConfigured{TemplateVersion: 1, Template: example.Text(), TemplateHash: example.Version(),
			Place: "Lund", ConfiguredAt: t0, Personal: &client.SigningSecret{ProviderKey: providerKey}})
		if version != 1 {
			t.Fatalf("version %d", version)
		}
	})
	t.Run("a template with an unknown placeholder is refused with the known ones", func(t *testing.T) {
		sc := commandtest.New(t, t0)
		svc := clients.New(commandtest.Repository(sc, client.Kind), sc.Clock())
		err := sc.Given(client.StreamName("acme"), registered).When(func(ctx context.Context) error {
			_, err := svc.ConfigureSigning(ctx, "acme", poa.ExampleTemplate+"\n{{holder}}", providerKey, "")
			return err
		}).ThenError(poa.ErrInvalidTemplate)
		if !strings.Contains(err.Error(), "{{holder}}") || !strings.Contains(err.Error(), "{{holderName}}") {
			t.Fatalf("error %v names neither the unknown nor the known placeholders", err)
		}
	})
	t.Run("the sandbox gets the example once", func(t *testing.T) {
		sc := commandtest.New(t, t0)
		svc := clients.New(commandtest.Repository(sc, client.Kind), sc.Clock())
		sandbox := client.Registered{ClientID: clients.SandboxClientID, Name: "Sandbox client", Sandbox: true, RegisteredAt: t0}
		configured := client.SigningConfigured{TemplateVersion: 1, Template: example.Text(), TemplateHash: example.Version(),
			Place: "Stockholm", ConfiguredAt: t0, Personal: &client.SigningSecret{ProviderKey: providerKey}}
		sc.Given(client.StreamName(clients.SandboxClientID), sandbox).
			When(func(ctx context.Context) error { return svc.EnsureSandboxSigning(ctx, providerKey) }).Then(configured)
		sc.When(func(ctx context.Context) error { return svc.EnsureSandboxSigning(ctx, providerKey) }).Then()
	})
}
