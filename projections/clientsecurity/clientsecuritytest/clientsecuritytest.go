// Package clientsecuritytest is the contract suite of the client-security read model. Every
// Store adapter runs it; it covers the store on its own, the Projector writing through it and
// the Reader serving the HTTP layer's port.
package clientsecuritytest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/projections/clientsecurity"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// Open returns a fresh, empty store for one test.
type Open = func(t *testing.T) clientsecurity.Store

// Run runs the whole suite against the adapter that open builds.
func Run(t *testing.T, open Open) {
	readdbtest.Suite[clientsecurity.Store]{
		{"CertificateRoundTrip", testCertificateRoundTrip},
		{"CertificateRevisions", testCertificateRevisions},
		{"SettingsRoundTripAndRevisions", testSettings},
		{"Reset", testReset},
		{"ProjectorIssueRevokeAndSettingsInOneBatch", testProjectorOneBatch},
		{"ProjectorLaterBatchesAndRedelivery", testProjectorLaterBatches},
		{"ProjectorIgnoresOtherEvents", testProjectorIgnores},
		{"ReaderThroughItsPort", testReader},
	}.Run(t, open)
}

func ctx(t *testing.T) context.Context { return readdbtest.Context(t) }

var base = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func cert(serial, clientID, env string, revoked bool, rev uint64) clientsecurity.Certificate {
	c := clientsecurity.Certificate{Serial: serial, ClientID: clientID, Environment: env,
		Fingerprint: strings.Repeat(serial[:1], 64), NotBefore: base, NotAfter: base.Add(365 * 24 * time.Hour), Revision: rev}
	if revoked {
		c.Revoked, c.RevokedAt = true, base.Add(time.Hour)
	}
	return c
}

func upsertCerts(t *testing.T, s clientsecurity.Store, rows ...clientsecurity.Certificate) {
	t.Helper()
	if err := s.UpsertCertificates(ctx(t), rows); err != nil {
		t.Fatalf("UpsertCertificates: %v", err)
	}
}

func upsertSettings(t *testing.T, s clientsecurity.Store, rows ...clientsecurity.Settings) {
	t.Helper()
	if err := s.UpsertSettings(ctx(t), rows); err != nil {
		t.Fatalf("UpsertSettings: %v", err)
	}
}

func getCert(t *testing.T, s clientsecurity.Store, serial string) clientsecurity.Certificate {
	t.Helper()
	c, err := s.Certificate(ctx(t), serial)
	if err != nil {
		t.Fatalf("Certificate(%s): %v", serial, err)
	}
	return c
}

func sameCert(a, b clientsecurity.Certificate) bool {
	return a.Serial == b.Serial && a.ClientID == b.ClientID && a.Environment == b.Environment &&
		a.Fingerprint == b.Fingerprint && a.NotBefore.Equal(b.NotBefore) && a.NotAfter.Equal(b.NotAfter) &&
		a.Revoked == b.Revoked && a.RevokedAt.Equal(b.RevokedAt) && a.Revision == b.Revision
}

func assertCert(t *testing.T, s clientsecurity.Store, want clientsecurity.Certificate) {
	t.Helper()
	if got := getCert(t, s, want.Serial); !sameCert(got, want) {
		t.Fatalf("Certificate(%s) = %+v\nwant %+v", want.Serial, got, want)
	}
}

func assertNoCert(t *testing.T, s clientsecurity.Store, serial string) {
	t.Helper()
	if got, err := s.Certificate(ctx(t), serial); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Certificate(%s) = %+v, %v; want ErrNotFound", serial, got, err)
	}
}

func assertSettings(t *testing.T, s clientsecurity.Store, want clientsecurity.Settings) {
	t.Helper()
	got, err := s.Settings(ctx(t), want.ClientID)
	if err != nil || got != want {
		t.Fatalf("Settings(%s) = %+v, %v; want %+v", want.ClientID, got, err, want)
	}
}

func testCertificateRoundTrip(t *testing.T, s clientsecurity.Store) {
	a, b := cert("a1", "acme", "test", false, 1), cert("b2", "beta", "production", true, 3)
	upsertCerts(t, s, a, b)
	assertCert(t, s, a)
	assertCert(t, s, b)
	assertNoCert(t, s, "c3")
	assertNoCert(t, s, "")
	if getCert(t, s, "a1").RevokedAt != (time.Time{}) {
		t.Fatal("an unrevoked certificate has a revocation time")
	}
	if err := s.UpsertCertificates(ctx(t), nil); err != nil {
		t.Fatalf("an empty batch: %v", err)
	}
}

func testCertificateRevisions(t *testing.T, s clientsecurity.Store) {
	upsertCerts(t, s, cert("a1", "acme", "test", true, 3))
	upsertCerts(t, s, cert("a1", "acme", "test", false, 1)) // the issue, redelivered late
	assertCert(t, s, cert("a1", "acme", "test", true, 3))
	upsertCerts(t, s, cert("a1", "acme", "test", false, 3)) // equal: ignored
	assertCert(t, s, cert("a1", "acme", "test", true, 3))
	// Several versions in one batch: the first with the highest revision wins.
	upsertCerts(t, s, cert("b1", "beta", "test", false, 1), cert("b1", "beta", "test", true, 4),
		cert("b1", "beta", "test", false, 4), cert("b1", "beta", "test", false, 2))
	assertCert(t, s, cert("b1", "beta", "test", true, 4))
}

func testSettings(t *testing.T, s clientsecurity.Store) {
	if _, err := s.Settings(ctx(t), "acme"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Settings of a client without any: %v", err)
	}
	upsertSettings(t, s, clientsecurity.Settings{ClientID: "acme", RateLimit: 12.5, Burst: 40, MTLSOnly: true, Revision: 2},
		clientsecurity.Settings{ClientID: "beta", Revision: 1})
	assertSettings(t, s, clientsecurity.Settings{ClientID: "acme", RateLimit: 12.5, Burst: 40, MTLSOnly: true, Revision: 2})
	assertSettings(t, s, clientsecurity.Settings{ClientID: "beta", Revision: 1})
	upsertSettings(t, s, clientsecurity.Settings{ClientID: "acme", Revision: 1})
	upsertSettings(t, s, clientsecurity.Settings{ClientID: "acme", Burst: 1, Revision: 2})
	assertSettings(t, s, clientsecurity.Settings{ClientID: "acme", RateLimit: 12.5, Burst: 40, MTLSOnly: true, Revision: 2})
	upsertSettings(t, s, clientsecurity.Settings{ClientID: "acme", RateLimit: 0.1, Burst: 1_000_000, Revision: 5},
		clientsecurity.Settings{ClientID: "acme", Revision: 4})
	assertSettings(t, s, clientsecurity.Settings{ClientID: "acme", RateLimit: 0.1, Burst: 1_000_000, Revision: 5})
}

func testReset(t *testing.T, s clientsecurity.Store) {
	upsertCerts(t, s, cert("a1", "acme", "test", false, 1))
	upsertSettings(t, s, clientsecurity.Settings{ClientID: "acme", MTLSOnly: true, Revision: 2})
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	assertNoCert(t, s, "a1")
	if _, err := s.Settings(ctx(t), "acme"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Settings after Reset: %v", err)
	}
	upsertCerts(t, s, cert("a1", "acme", "test", false, 1))
	assertCert(t, s, cert("a1", "acme", "test", false, 1))
}

func handle(t *testing.T, p *clientsecurity.Projector, batch ...eventschema.Envelope) {
	t.Helper()
	if err := p.Handle(ctx(t), batch); err != nil {
		t.Fatalf("Handle: %v", err)
	}
}

func issued(serial string, env client.Environment) client.CertificateIssued {
	return client.CertificateIssued{Serial: serial, Fingerprint: strings.Repeat(serial[:1], 64), Environment: env,
		Subject: "CN=x", NotBefore: base, NotAfter: base.Add(365 * 24 * time.Hour), IssuedAt: base}
}

func add(log *eventlog.Log, clientID string, ev domain.Event) eventschema.Envelope {
	return log.Append(clientID, client.StreamName(clientID), base, ev)
}

func testProjectorOneBatch(t *testing.T, s clientsecurity.Store) {
	log := eventlog.New(t)
	p := clientsecurity.NewProjector(log.Registry(), s)
	if p.Name() != clientsecurity.ProjectorName {
		t.Fatalf("Name = %q", p.Name())
	}
	on, rate, burst := true, 25.0, 50
	batch := []eventschema.Envelope{
		// Revisions count from 0 in each stream.
		add(log, "acme", client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: base}),
		add(log, "acme", issued("a1", client.EnvironmentTest)),
		add(log, "acme", issued("a2", client.EnvironmentProduction)),
		add(log, "acme", client.CertificateRevoked{Serial: "a1", RevokedAt: base.Add(time.Hour)}),
		add(log, "acme", client.SettingsChanged{MTLSOnly: &on, ChangedAt: base}),
		add(log, "acme", client.SettingsChanged{RateLimit: &rate, Burst: &burst, ChangedAt: base}),
		add(log, "beta", client.Registered{ClientID: "beta", Name: "Beta", RegisteredAt: base}),
		add(log, "beta", issued("b1", client.EnvironmentTest)),
	}
	handle(t, p, batch...)
	handle(t, p, batch...) // redelivery
	assertCert(t, s, cert("a1", "acme", "test", true, 3))
	assertCert(t, s, cert("a2", "acme", "production", false, 2))
	assertCert(t, s, cert("b1", "beta", "test", false, 1))
	assertSettings(t, s, clientsecurity.Settings{ClientID: "acme", RateLimit: 25, Burst: 50, MTLSOnly: true, Revision: 5})
	if _, err := s.Settings(ctx(t), "beta"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("beta never changed its settings: %v", err)
	}
}

func testProjectorLaterBatches(t *testing.T, s clientsecurity.Store) {
	log := eventlog.New(t)
	p := clientsecurity.NewProjector(log.Registry(), s)
	on, off, rate := true, false, 5.0
	first := []eventschema.Envelope{
		add(log, "acme", client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: base}),
		add(log, "acme", issued("a1", client.EnvironmentTest)),
		add(log, "acme", client.SettingsChanged{MTLSOnly: &on, RateLimit: &rate, ChangedAt: base}),
	}
	handle(t, p, first...)
	// Alone in their batch: the projector finds the rows through the store, and a change folds
	// onto what is stored.
	second := []eventschema.Envelope{
		add(log, "acme", client.CertificateRevoked{Serial: "a1", RevokedAt: base.Add(time.Hour)}),
		add(log, "acme", client.SettingsChanged{MTLSOnly: &off, ChangedAt: base}),
	}
	handle(t, p, second...)
	assertCert(t, s, cert("a1", "acme", "test", true, 3))
	assertSettings(t, s, clientsecurity.Settings{ClientID: "acme", RateLimit: 5, Revision: 4})
	// Redelivering the earlier batch neither un-revokes nor turns mTLS-only back on.
	handle(t, p, first...)
	handle(t, p, second...)
	assertCert(t, s, cert("a1", "acme", "test", true, 3))
	assertSettings(t, s, clientsecurity.Settings{ClientID: "acme", RateLimit: 5, Revision: 4})
	// Revoking a serial the read model never saw, or another client's, changes nothing.
	handle(t, p, add(log, "acme", client.CertificateRevoked{Serial: "ff", RevokedAt: base}))
	handle(t, p, add(log, "beta", client.Registered{ClientID: "beta", Name: "Beta", RegisteredAt: base}),
		add(log, "beta", issued("b1", client.EnvironmentTest)))
	handle(t, p, add(log, "acme", client.CertificateRevoked{Serial: "b1", RevokedAt: base}))
	assertNoCert(t, s, "ff")
	assertCert(t, s, cert("b1", "beta", "test", false, 1))
}

func testProjectorIgnores(t *testing.T, s clientsecurity.Store) {
	log := eventlog.New(t)
	p := clientsecurity.NewProjector(log.Registry(), s)
	handle(t, p,
		add(log, "acme", client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: base}),
		add(log, "acme", client.APIKeyIssued{KeyID: "k1", KeyHash: client.HashAPIKey("x"), IssuedAt: base}),
		log.Append("acme", collection.StreamName("c-1"), base, collection.Claimed{WorkerID: "w", ClaimedAt: base}),
		// A certificate event on a stream of another category is no certificate.
		log.AppendRaw(eventschema.Envelope{Type: client.EventCertificateIssued, SchemaVersion: 1, Tenant: "acme",
			Stream: "consent-x", OccurredAt: base,
			Payload: []byte(`{"serial":"c1","fingerprint":"` + strings.Repeat("c", 64) + `","environment":"test","subject":"CN=x",` +
				`"notBefore":"2026-01-01T00:00:00Z","notAfter":"2027-01-01T00:00:00Z","issuedAt":"2026-01-01T00:00:00Z"}`)}),
	)
	assertNoCert(t, s, "c1")
	if _, err := s.Settings(ctx(t), "acme"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("settings after unrelated events: %v", err)
	}
}

// testReader answers through the HTTP layer's port with the port's own errors, never the
// store's.
func testReader(t *testing.T, s clientsecurity.Store) {
	upsertCerts(t, s, cert("a1", "acme", "test", false, 2), cert("a2", "acme", "production", true, 3))
	upsertSettings(t, s, clientsecurity.Settings{ClientID: "acme", MTLSOnly: true, Revision: 4})
	var port httpapi.MTLSLookup = clientsecurity.NewReader(s)
	got, err := port.CertificateBySerial(ctx(t), "a1")
	want := httpapi.ClientCertificate{ClientID: "acme", Environment: "test", Fingerprint: strings.Repeat("a", 64), NotAfter: base.Add(365 * 24 * time.Hour)}
	if err != nil || got.ClientID != want.ClientID || got.Environment != want.Environment || got.Fingerprint != want.Fingerprint ||
		!got.NotAfter.Equal(want.NotAfter) || got.Revoked {
		t.Fatalf("CertificateBySerial(a1) = %+v, %v; want %+v", got, err, want)
	}
	if got, err := port.CertificateBySerial(ctx(t), "a2"); err != nil || !got.Revoked || got.Environment != "production" {
		t.Fatalf("CertificateBySerial(a2) = %+v, %v", got, err)
	}
	_, err = port.CertificateBySerial(ctx(t), "ff")
	if !errors.Is(err, httpapi.ErrCertificateNotFound) || errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("an unknown serial: %v, want httpapi.ErrCertificateNotFound only", err)
	}
	for id, want := range map[string]bool{"acme": true, "beta": false} {
		if got, err := port.MTLSOnly(ctx(t), id); err != nil || got != want {
			t.Fatalf("MTLSOnly(%s) = %v, %v; want %v", id, got, err, want)
		}
	}

	// The rate limits: a client's own, or zeros (the service's default) for what it never set.
	upsertSettings(t, s, clientsecurity.Settings{ClientID: "beta", RateLimit: 12.5, Burst: 40, Revision: 2},
		clientsecurity.Settings{ClientID: "gamma", Burst: 7, Revision: 2})
	var limits httpapi.ClientLimits = clientsecurity.NewReader(s)
	for id, want := range map[string]struct {
		rate  float64
		burst int
	}{"acme": {0, 0}, "beta": {12.5, 40}, "gamma": {0, 7}, "nobody": {0, 0}} {
		if rate, burst, err := limits.ClientRateLimit(ctx(t), id); err != nil || rate != want.rate || burst != want.burst {
			t.Fatalf("ClientRateLimit(%s) = %g, %d, %v; want %+v", id, rate, burst, err, want)
		}
	}
}
