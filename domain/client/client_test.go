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
