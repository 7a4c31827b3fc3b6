package client_test

import (
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/domaintest"
)

func TestSecuritySettings(t *testing.T) {
	sc := func(t *testing.T) *domaintest.Scenario[*client.Client] { return domaintest.For(t, client.Kind) }
	registered := client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: t0}
	fp := strings.Repeat("ab", 32)
	cert := client.CertificateIssued{Serial: "1f", Fingerprint: fp, Environment: client.EnvironmentTest, Subject: "CN=acme",
		NotBefore: t0, NotAfter: t0.Add(365 * 24 * time.Hour), IssuedAt: t0}

	t.Run("a certificate is recorded once and revoked once", func(t *testing.T) {
		sc(t).Given(registered).When(func(c *client.Client) error { return c.RecordCertificate(cert, t0) }).Then(cert)
		sc(t).Given(registered, cert).When(func(c *client.Client) error { return c.RecordCertificate(cert, t0) }).ThenError(domain.ErrConflict)
		revoked := client.CertificateRevoked{Serial: "1f", RevokedAt: t0}
		sc(t).Given(registered, cert).When(func(c *client.Client) error { return c.RevokeCertificate("1f", t0) }).Then(revoked)
		sc(t).Given(registered, cert, revoked).When(func(c *client.Client) error { return c.RevokeCertificate("1f", t0) }).Then()
		sc(t).Given(registered, cert).When(func(c *client.Client) error { return c.RevokeCertificate("2a", t0) }).ThenError(client.ErrUnknownCertificate)
	})
	for name, tc := range map[string]struct {
		edit  func(*client.CertificateIssued)
		field string
	}{
		"an uppercase serial":   {func(c *client.CertificateIssued) { c.Serial = "1F" }, "serial"},
		"a short fingerprint":   {func(c *client.CertificateIssued) { c.Fingerprint = "ab" }, "fingerprint"},
		"a staging environment": {func(c *client.CertificateIssued) { c.Environment = "staging" }, "environment"},
		"no validity":           {func(c *client.CertificateIssued) { c.NotAfter = c.NotBefore }, "notAfter"},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			bad := cert
			tc.edit(&bad)
			sc(t).Given(registered).When(func(c *client.Client) error { return c.RecordCertificate(bad, t0) }).ThenFieldError(tc.field)
		})
	}

	t.Run("settings: what changes is recorded, the rest stays", func(t *testing.T) {
		rate, burst, only := 500.0, 1000, true
		sc(t).Given(registered).When(func(c *client.Client) error {
			if err := c.ChangeSettings(&rate, &burst, nil, t0); err != nil {
				return err
			}
			if err := c.ChangeSettings(&rate, nil, &only, t0); err != nil {
				return err
			}
			if s := c.Settings(); s != (client.Settings{RateLimit: 500, Burst: 1000, MTLSOnly: true}) {
				t.Errorf("settings %+v", s)
			}
			return c.ChangeSettings(&rate, &burst, &only, t0) // nothing new
		}).Then(client.SettingsChanged{RateLimit: &rate, Burst: &burst, ChangedAt: t0}, client.SettingsChanged{MTLSOnly: &only, ChangedAt: t0})
		zero, huge := 0.0, client.MaxBurst+1
		sc(t).Given(registered).When(func(c *client.Client) error { return c.ChangeSettings(&zero, nil, nil, t0) }).ThenFieldError("rateLimit")
		sc(t).Given(registered).When(func(c *client.Client) error { return c.ChangeSettings(nil, &huge, nil, t0) }).ThenFieldError("burst")
	})

	t.Run("rotation: the new key at once, the old one until the grace ends", func(t *testing.T) {
		const next = "samla_acme_fedcba9876543210fedcba9876543210"
		issued := client.APIKeyIssued{KeyID: "k1", KeyHash: client.HashAPIKey(key), IssuedAt: t0}
		sc(t).Given(registered, issued).When(func(c *client.Client) error {
			if err := c.RotateAPIKey("k2", next, time.Hour, t0); err != nil {
				return err
			}
			if got := len(c.ActiveKeyHashesAt(t0.Add(59 * time.Minute))); got != 2 {
				t.Errorf("%d keys during the grace", got)
			}
			if got := c.ActiveKeyHashesAt(t0.Add(time.Hour)); len(got) != 1 || got[0] != client.HashAPIKey(next) {
				t.Errorf("keys after the grace: %v", got)
			}
			return nil
		}).Then(client.APIKeyIssued{KeyID: "k2", KeyHash: client.HashAPIKey(next), IssuedAt: t0},
			client.APIKeyRetiring{KeyID: "k1", ValidUntil: t0.Add(time.Hour), At: t0})
		sc(t).Given(registered, issued).When(func(c *client.Client) error { return c.RotateAPIKey("k2", next, 0, t0) }).
			Then(client.APIKeyIssued{KeyID: "k2", KeyHash: client.HashAPIKey(next), IssuedAt: t0}, client.APIKeyRevoked{KeyID: "k1", RevokedAt: t0})
		sc(t).Given(registered, issued).When(func(c *client.Client) error { return c.RotateAPIKey("k2", next, -time.Second, t0) }).ThenFieldError("grace")
	})

	t.Run("the keys as the operator sees them: ids, times and status, no hash", func(t *testing.T) {
		const second, third = "samla_acme_1111111111111111111111111111111111", "samla_acme_2222222222222222222222222222222222"
		issued := client.APIKeyIssued{KeyID: "k1", KeyHash: client.HashAPIKey(key), IssuedAt: t0}
		t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
		sc(t).Given(registered, issued).When(func(c *client.Client) error {
			if err := c.RotateAPIKey("k2", second, time.Hour, t1); err != nil {
				return err
			}
			if err := c.RotateAPIKey("k3", third, 2*time.Hour, t2); err != nil {
				return err
			}
			if err := c.RevokeAPIKey("k2", t2); err != nil {
				return err
			}
			want := []client.APIKey{
				{ID: "k1", IssuedAt: t0, ValidUntil: t1.Add(time.Hour)}, // the earlier end stays
				{ID: "k2", IssuedAt: t1, Revoked: true, RevokedAt: t2, ValidUntil: t2.Add(2 * time.Hour)},
				{ID: "k3", IssuedAt: t2},
			}
			got := c.APIKeys()
			if len(got) != len(want) {
				t.Fatalf("keys %+v", got)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("key %d = %+v, want %+v", i, got[i], want[i])
				}
			}
			for at, active := range map[time.Time][]bool{t2: {true, false, true}, t1.Add(time.Hour): {false, false, true}} {
				for i, k := range got {
					if k.ActiveAt(at) != active[i] {
						t.Errorf("%s active at %s: %v", k.ID, at, k.ActiveAt(at))
					}
				}
			}
			return nil
		}).Then(client.APIKeyIssued{KeyID: "k2", KeyHash: client.HashAPIKey(second), IssuedAt: t1},
			client.APIKeyRetiring{KeyID: "k1", ValidUntil: t1.Add(time.Hour), At: t1},
			client.APIKeyIssued{KeyID: "k3", KeyHash: client.HashAPIKey(third), IssuedAt: t2},
			client.APIKeyRetiring{KeyID: "k2", ValidUntil: t2.Add(2 * time.Hour), At: t2},
			client.APIKeyRevoked{KeyID: "k2", RevokedAt: t2})
	})
}
