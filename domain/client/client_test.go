package client_test

import (
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/domaintest"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

const key = "samla_sandbox_0123456789abcdef0123456789abcdef"

func TestClient(t *testing.T) {
	sc := func(t *testing.T) *domaintest.Scenario[*client.Client] { return domaintest.For(t, client.Kind) }
	registered := client.Registered{ClientID: "acme", Name: "Acme", Sandbox: true, RegisteredAt: t0}
	t.Run("register", func(t *testing.T) {
		sc(t).When(func(c *client.Client) error { return c.Register("acme", "Acme", true, t0) }).Then(registered)
	})
	t.Run("bad id", func(t *testing.T) {
		sc(t).When(func(c *client.Client) error { return c.Register("Acme Inc", "Acme", true, t0) }).ThenError(domain.ErrInvalid)
	})
	t.Run("a key is stored only as its hash", func(t *testing.T) {
		sc(t).Given(registered).When(func(c *client.Client) error { return c.IssueAPIKey("k1", key, t0) }).
			Then(client.APIKeyIssued{KeyID: "k1", KeyHash: client.HashAPIKey(key), IssuedAt: t0})
		if strings.Contains(client.HashAPIKey(key), key) || len(client.HashAPIKey(key)) != 64 {
			t.Fatal("hash must be 64 hex characters and not contain the key")
		}
	})
	t.Run("short keys are refused", func(t *testing.T) {
		sc(t).Given(registered).When(func(c *client.Client) error { return c.IssueAPIKey("k1", "short", t0) }).ThenError(domain.ErrInvalid)
	})
	t.Run("revoke", func(t *testing.T) {
		issued := client.APIKeyIssued{KeyID: "k1", KeyHash: client.HashAPIKey(key), IssuedAt: t0}
		sc(t).Given(registered, issued).When(func(c *client.Client) error { return c.RevokeAPIKey("k1", t0) }).
			Then(client.APIKeyRevoked{KeyID: "k1", RevokedAt: t0})
		c := client.Kind.New()
		if err := domain.Rehydrate(c, registered, issued, client.APIKeyRevoked{KeyID: "k1", RevokedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if len(c.ActiveKeyHashes()) != 0 {
			t.Fatal("a revoked key is still active")
		}
	})
}

func TestSigningConfiguration(t *testing.T) {
	sc := func(t *testing.T) *domaintest.Scenario[*client.Client] { return domaintest.For(t, client.Kind) }
	registered := client.Registered{ClientID: "acme", Name: "Acme", Sandbox: true, RegisteredAt: t0}
	const providerKey = "provider-key-0123456789"
	v1 := client.SigningConfigured{TemplateVersion: 1, Template: "T1", TemplateHash: "sha256:1", Place: "Lund", ConfiguredAt: t0,
		Personal: &client.SigningSecret{ProviderKey: providerKey}}
	t.Run("the first configuration is version 1, the key in the sealed part", func(t *testing.T) {
		sc(t).Given(registered).When(func(c *client.Client) error { return c.ConfigureSigning("T1", "sha256:1", providerKey, "Lund", t0) }).
			Then(v1)
	})
	t.Run("the next one is version 2; cancellations of version 1 still find theirs", func(t *testing.T) {
		sc(t).Given(registered, v1).When(func(c *client.Client) error {
			if err := c.ConfigureSigning("T2", "sha256:2", providerKey, "", t0); err != nil {
				return err
			}
			cfg, ok := c.Signing()
			if old, found := c.Template(1); !ok || cfg.TemplateVersion != 2 || cfg.Template != "T2" || cfg.Place != "" || !found || old != "T1" {
				t.Errorf("configuration %+v %v, version 1 %q %v", cfg, ok, old, found)
			}
			return nil
		}).Then(client.SigningConfigured{TemplateVersion: 2, Template: "T2", TemplateHash: "sha256:2", ConfiguredAt: t0,
			Personal: &client.SigningSecret{ProviderKey: providerKey}})
	})
	for name, tc := range map[string]struct{ template, key, place, field string }{
		"no template":       {"", providerKey, "", "template"},
		"a short key":       {"T", "short", "", "providerKey"},
		"a key with a tab":  {"T", "provider-key\t0123456789", "", "providerKey"},
		"a place of 101":    {"T", providerKey, strings.Repeat("x", 101), "place"},
		"a place with a LF": {"T", providerKey, "Lund\n", "place"},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			sc(t).Given(registered).When(func(c *client.Client) error { return c.ConfigureSigning(tc.template, "sha256:1", tc.key, tc.place, t0) }).
				ThenFieldError(tc.field)
		})
	}
	t.Run("without configuration, or with its key erased, there is none", func(t *testing.T) {
		c := client.Kind.New()
		if err := domain.Rehydrate(c, registered); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Signing(); ok {
			t.Error("a client without configuration has one")
		}
		erased := v1
		erased.Personal = nil
		if err := domain.Rehydrate(c, erased); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Signing(); ok {
			t.Error("a configuration without its key is usable")
		}
	})
}
