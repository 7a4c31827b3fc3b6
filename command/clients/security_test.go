package clients_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
)

func certificate(serial string, env client.Environment) client.CertificateIssued {
	return client.CertificateIssued{Serial: serial, Fingerprint: strings.Repeat("ab", 32), Environment: env,
		Subject: "CN=acme,OU=" + string(env) + ",O=Samla client", NotBefore: t0.Add(-5 * time.Minute), NotAfter: t0.Add(365 * 24 * time.Hour)}
}

func securityScenario(t *testing.T) (*commandtest.Scenario, *clients.Service) {
	sc := commandtest.New(t, t0)
	return sc, clients.New(commandtest.Repository(sc, client.Kind), sc.Clock())
}

var acmeRegistered = client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: t0}

func TestScenarioRecordCertificate(t *testing.T) {
	record := func(svc *clients.Service, id string, c client.CertificateIssued) func(context.Context) error {
		return func(ctx context.Context) error { return svc.RecordCertificate(ctx, id, c) }
	}
	t.Run("recorded with the time of issue", func(t *testing.T) {
		sc, svc := securityScenario(t)
		want := certificate("a1b2", client.EnvironmentTest)
		want.IssuedAt = t0
		sc.Given(client.StreamName("acme"), acmeRegistered).
			When(record(svc, "acme", certificate("a1b2", client.EnvironmentTest))).Then(want)
	})
	t.Run("a client that does not exist", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.When(record(svc, "nobody", certificate("a1b2", client.EnvironmentTest))).ThenError(domain.ErrConflict)
	})
	t.Run("a serial recorded already", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, certificate("a1b2", client.EnvironmentTest)).
			When(record(svc, "acme", certificate("a1b2", client.EnvironmentProduction))).ThenError(domain.ErrConflict)
	})
	t.Run("an environment that is neither", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered).
			When(record(svc, "acme", certificate("a1b2", "staging"))).ThenError(domain.ErrInvalid)
	})
}

func TestScenarioRevokeCertificate(t *testing.T) {
	revoke := func(svc *clients.Service, id, serial string) func(context.Context) error {
		return func(ctx context.Context) error { return svc.RevokeCertificate(ctx, id, serial) }
	}
	issued := certificate("a1b2", client.EnvironmentTest)
	t.Run("revoked", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, issued).When(revoke(svc, "acme", "a1b2")).
			Then(client.CertificateRevoked{Serial: "a1b2", RevokedAt: t0})
	})
	t.Run("revoked twice records once", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, issued, client.CertificateRevoked{Serial: "a1b2", RevokedAt: t0}).
			When(revoke(svc, "acme", "a1b2")).Then()
	})
	t.Run("a serial of another client", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, issued).
			Given(client.StreamName("beta"), client.Registered{ClientID: "beta", Name: "Beta", RegisteredAt: t0}).
			When(revoke(svc, "beta", "a1b2")).ThenError(client.ErrUnknownCertificate)
	})
}

func TestScenarioChangeSettings(t *testing.T) {
	rate, burst, on, off := 200.0, 400, true, false
	change := func(svc *clients.Service, r *float64, b *int, m *bool) func(context.Context) error {
		return func(ctx context.Context) error { _, err := svc.ChangeSettings(ctx, "acme", r, b, m); return err }
	}
	t.Run("only what is given", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered).When(change(svc, nil, nil, &on)).
			Then(client.SettingsChanged{MTLSOnly: &on, ChangedAt: t0})
	})
	t.Run("rate and burst, and mTLS-only again", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.Given(client.StreamName("acme"), acmeRegistered, client.SettingsChanged{MTLSOnly: &on, ChangedAt: t0}).
			When(change(svc, &rate, &burst, &on)).Then(client.SettingsChanged{RateLimit: &rate, Burst: &burst, ChangedAt: t0})
		settings, err := svc.ChangeSettings(context.Background(), "acme", nil, nil, &off)
		if err != nil || settings != (client.Settings{RateLimit: rate, Burst: burst}) {
			t.Fatalf("settings %+v, %v", settings, err)
		}
	})
	t.Run("out of range", func(t *testing.T) {
		sc, svc := securityScenario(t)
		zero := 0
		sc.Given(client.StreamName("acme"), acmeRegistered).When(change(svc, nil, &zero, nil)).ThenError(domain.ErrInvalid)
	})
	t.Run("a client that does not exist", func(t *testing.T) {
		sc, svc := securityScenario(t)
		sc.When(change(svc, nil, nil, &on)).ThenError(domain.ErrConflict)
	})
}

func TestCertificatesAndFindCertificateClient(t *testing.T) {
	sc, svc := securityScenario(t)
	issued := certificate("a1b2", client.EnvironmentTest)
	other := certificate("c3d4", client.EnvironmentProduction)
	sc.Given(client.StreamName("acme"), acmeRegistered, issued, client.CertificateRevoked{Serial: "a1b2", RevokedAt: t0}).
		Given(client.StreamName("beta"), client.Registered{ClientID: "beta", Name: "Beta", RegisteredAt: t0}, other)
	ctx := context.Background()
	certs, err := svc.Certificates(ctx, "acme")
	if err != nil || len(certs) != 1 || certs[0].Serial != "a1b2" || !certs[0].Revoked || !certs[0].RevokedAt.Equal(t0) {
		t.Fatalf("Certificates(acme) = %+v, %v", certs, err)
	}
	if _, err := svc.Certificates(ctx, "nobody"); !errors.Is(err, clients.ErrUnknownClient) {
		t.Fatalf("Certificates(nobody): %v", err)
	}
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for serial, want := range map[string]string{"a1b2": "acme", "c3d4": "beta"} {
		if got, err := clients.FindCertificateClient(ctx, sc.Store(), reg, serial); err != nil || got != want {
			t.Fatalf("FindCertificateClient(%s) = %q, %v; want %s", serial, got, err, want)
		}
	}
	if _, err := clients.FindCertificateClient(ctx, sc.Store(), reg, "ffff"); !errors.Is(err, clients.ErrCertificateNotFound) {
		t.Fatalf("an unknown serial: %v", err)
	}
}
