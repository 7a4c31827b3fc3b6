// Package apikeystest is the contract suite of the API-key read model. Every Store adapter runs
// it; it covers the store on its own and the Projector writing through it.
package apikeystest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/projections/apikeys"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// Open returns a fresh, empty store for one test.
type Open = func(t *testing.T) apikeys.Store

// Run runs the whole suite against the adapter that open builds.
func Run(t *testing.T, open Open) {
	readdbtest.Suite[apikeys.Store]{
		{"LookupAndByKeyID", testLookup},
		{"RevokedKeyIsNotFound", testRevoked},
		{"StaleRevisionIgnored", testStale},
		{"EqualRevisionIgnored", testEqual},
		{"BatchWithSeveralRevisionsOfOneKey", testBatchDuplicates},
		{"Reset", testReset},
		{"ProjectorIssueAndRevokeInOneBatch", testProjectorOneBatch},
		{"ProjectorRevokeInLaterBatchAndRedelivery", testProjectorLaterBatch},
		{"ProjectorIgnoresOtherEvents", testProjectorIgnores},
		{"ReaderThroughItsPort", testReader},
		{"RetiringKeyEndsAtValidUntil", testRetiring},
		{"RetirementRevisionRule", testRetirementRevisions},
		{"ProjectorRetirementInOneBatch", testProjectorRetiringOneBatch},
		{"ProjectorRetirementInLaterBatchThenRevocation", testProjectorRetiringLater},
		{"ReaderHonoursTheEndOnItsClock", testReaderRetiring},
		{"ReaderNamesKeysAndTellsTheSessionCheck", testReaderSessionKeys},
	}.Run(t, open)
}

func ctx(t *testing.T) context.Context { return readdbtest.Context(t) }

func upsert(t *testing.T, s apikeys.Store, rows ...apikeys.Row) {
	t.Helper()
	if err := s.Upsert(ctx(t), rows); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func assertClient(t *testing.T, s apikeys.Store, plainKey, want string) {
	t.Helper()
	assertClientAt(t, s, plainKey, want, base)
}

func assertClientAt(t *testing.T, s apikeys.Store, plainKey, want string, at time.Time) apikeys.Row {
	t.Helper()
	got, err := s.Lookup(ctx(t), client.HashAPIKey(plainKey), at)
	if err != nil || got.ClientID != want || got.KeyHash != client.HashAPIKey(plainKey) {
		t.Fatalf("Lookup(%s) at %s = %+v, %v; want client %q", plainKey, at, got, err, want)
	}
	return got
}

func assertNotFound(t *testing.T, s apikeys.Store, plainKey string) {
	t.Helper()
	assertNotFoundAt(t, s, plainKey, base)
}

func assertNotFoundAt(t *testing.T, s apikeys.Store, plainKey string, at time.Time) {
	t.Helper()
	got, err := s.Lookup(ctx(t), client.HashAPIKey(plainKey), at)
	if !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Lookup(%s) at %s = %+v, %v; want ErrNotFound", plainKey, at, got, err)
	}
}

func key(plain, clientID, keyID string, revoked bool, rev uint64) apikeys.Row {
	return apikeys.Row{KeyHash: client.HashAPIKey(plain), ClientID: clientID, KeyID: keyID, Revoked: revoked, Revision: rev}
}

func byKeyID(t *testing.T, s apikeys.Store, clientID, keyID string) apikeys.Row {
	t.Helper()
	r, err := s.ByKeyID(ctx(t), clientID, keyID)
	if err != nil {
		t.Fatalf("ByKeyID(%s, %s): %v", clientID, keyID, err)
	}
	return r
}

func testLookup(t *testing.T, s apikeys.Store) {
	upsert(t, s, key("secret-a", "acme", "k1", false, 1), key("secret-b", "other", "k1", false, 1))
	assertClient(t, s, "secret-a", "acme")
	assertClient(t, s, "secret-b", "other")
	assertNotFound(t, s, "unknown")
	if _, err := s.Lookup(ctx(t), "", base); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Lookup of an empty hash: %v", err)
	}
	if got := byKeyID(t, s, "acme", "k1"); got != key("secret-a", "acme", "k1", false, 1) {
		t.Fatalf("ByKeyID(acme, k1) = %+v", got)
	}
	if got := byKeyID(t, s, "other", "k1"); got != key("secret-b", "other", "k1", false, 1) {
		t.Fatalf("ByKeyID(other, k1) = %+v", got)
	}
	for _, ref := range [][2]string{{"acme", "k2"}, {"nobody", "k1"}} {
		if _, err := s.ByKeyID(ctx(t), ref[0], ref[1]); !errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("ByKeyID(%s, %s): %v, want ErrNotFound", ref[0], ref[1], err)
		}
	}
}

func testRevoked(t *testing.T, s apikeys.Store) {
	upsert(t, s, key("secret-a", "acme", "k1", false, 1), key("secret-b", "acme", "k2", false, 2))
	upsert(t, s, key("secret-a", "acme", "k1", true, 3))
	assertNotFound(t, s, "secret-a")
	assertClient(t, s, "secret-b", "acme")
	if got := byKeyID(t, s, "acme", "k1"); got != key("secret-a", "acme", "k1", true, 3) {
		t.Fatalf("ByKeyID of a revoked key = %+v", got)
	}
}

func testStale(t *testing.T, s apikeys.Store) {
	upsert(t, s, key("secret-a", "acme", "k1", true, 3))
	upsert(t, s, key("secret-a", "acme", "k1", false, 1)) // the issue, redelivered late
	assertNotFound(t, s, "secret-a")
}

func testEqual(t *testing.T, s apikeys.Store) {
	upsert(t, s, key("secret-a", "acme", "k1", false, 2))
	upsert(t, s, key("secret-a", "acme", "k1", true, 2))
	assertClient(t, s, "secret-a", "acme")
}

func testBatchDuplicates(t *testing.T, s apikeys.Store) {
	upsert(t, s, key("secret-a", "acme", "k1", false, 1), key("secret-a", "acme", "k1", true, 4),
		key("secret-a", "acme", "k1", false, 4), key("secret-a", "acme", "k1", false, 2))
	assertNotFound(t, s, "secret-a")
	if got := byKeyID(t, s, "acme", "k1"); got.Revision != 4 || !got.Revoked {
		t.Fatalf("ByKeyID = %+v", got)
	}
}

func testReset(t *testing.T, s apikeys.Store) {
	upsert(t, s, key("secret-a", "acme", "k1", false, 1))
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	assertNotFound(t, s, "secret-a")
	upsert(t, s, key("secret-a", "acme", "k1", false, 1))
	assertClient(t, s, "secret-a", "acme")
}

var base = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func handle(t *testing.T, p *apikeys.Projector, batch []eventschema.Envelope) {
	t.Helper()
	if err := p.Handle(ctx(t), batch); err != nil {
		t.Fatalf("Handle: %v", err)
	}
}

func issue(log *eventlog.Log, clientID, keyID, plain string) eventschema.Envelope {
	return log.Append(clientID, client.StreamName(clientID), base,
		client.APIKeyIssued{KeyID: keyID, KeyHash: client.HashAPIKey(plain), IssuedAt: base})
}

func revoke(log *eventlog.Log, clientID, keyID string) eventschema.Envelope {
	return log.Append(clientID, client.StreamName(clientID), base, client.APIKeyRevoked{KeyID: keyID, RevokedAt: base})
}

func register(log *eventlog.Log, clientID string) eventschema.Envelope {
	return log.Append(clientID, client.StreamName(clientID), base,
		client.Registered{ClientID: clientID, Name: clientID + " AB", RegisteredAt: base})
}

func testProjectorOneBatch(t *testing.T, s apikeys.Store) {
	log := eventlog.New(t)
	p := apikeys.NewProjector(log.Registry(), s)
	if p.Name() != apikeys.ProjectorName {
		t.Fatalf("Name = %q", p.Name())
	}
	batch := []eventschema.Envelope{
		register(log, "acme"), register(log, "other"),
		issue(log, "acme", "k1", "acme-1"), issue(log, "other", "k1", "other-1"),
		issue(log, "acme", "k2", "acme-2"), revoke(log, "acme", "k1"),
	}
	handle(t, p, batch)
	handle(t, p, batch) // redelivery
	assertNotFound(t, s, "acme-1")
	assertClient(t, s, "acme-2", "acme")
	assertClient(t, s, "other-1", "other")
	if got := byKeyID(t, s, "acme", "k1"); got != key("acme-1", "acme", "k1", true, 3) {
		t.Fatalf("ByKeyID(acme, k1) = %+v", got)
	}
}

func testProjectorLaterBatch(t *testing.T, s apikeys.Store) {
	log := eventlog.New(t)
	p := apikeys.NewProjector(log.Registry(), s)
	first := []eventschema.Envelope{register(log, "acme"), issue(log, "acme", "k1", "acme-1"),
		issue(log, "other", "k1", "other-1")}
	handle(t, p, first)
	assertClient(t, s, "acme-1", "acme")

	// The revocation arrives alone: the projector finds the hash through the store.
	second := []eventschema.Envelope{revoke(log, "acme", "k1")}
	handle(t, p, second)
	assertNotFound(t, s, "acme-1")
	assertClient(t, s, "other-1", "other") // same key id, other client: untouched

	// Redelivering the issue after the revocation must not bring the key back.
	handle(t, p, first)
	handle(t, p, second)
	assertNotFound(t, s, "acme-1")

	// Revoking a key the read model never saw is not an error.
	handle(t, p, []eventschema.Envelope{revoke(log, "acme", "k-unknown")})
}

func testProjectorIgnores(t *testing.T, s apikeys.Store) {
	log := eventlog.New(t)
	p := apikeys.NewProjector(log.Registry(), s)
	handle(t, p, []eventschema.Envelope{
		register(log, "acme"),
		log.Append("acme", collection.StreamName("c-1"), base, collection.Claimed{WorkerID: "w", ClaimedAt: base}),
		// A type with a client-looking name on a stream of another category is not a key.
		log.AppendRaw(eventschema.Envelope{Type: client.EventAPIKeyIssued, SchemaVersion: 1, Tenant: "acme",
			Stream: "consent-x", OccurredAt: base,
			Payload: []byte(`{"keyId":"k9","keyHash":"` + client.HashAPIKey("stray") + `","issuedAt":"2026-01-01T00:00:00Z"}`)}),
	})
	assertNotFound(t, s, "stray")
	if _, err := s.ByKeyID(ctx(t), "acme", "k9"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("ByKeyID after non-key events: %v", err)
	}
}

// testReader authenticates through the HTTP layer's port: the reader takes the plain key, hashes
// it as the client aggregate did, and answers an unknown or revoked key with the port's own
// not-found error, never the store's.
func testReader(t *testing.T, s apikeys.Store) {
	upsert(t, s, key("secret-a", "acme", "k1", false, 1), key("secret-b", "acme", "k2", true, 2))
	var keys httpapi.KeyLookup = apikeys.NewReader(s)
	if got, err := keys.Lookup(ctx(t), "secret-a"); err != nil || got != "acme" {
		t.Fatalf("Lookup(secret-a) = %q, %v; want acme", got, err)
	}
	if got, err := keys.Lookup(ctx(t), client.HashAPIKey("secret-a")); !errors.Is(err, httpapi.ErrKeyNotFound) {
		t.Fatalf("Lookup of the stored hash itself = %q, %v; want ErrKeyNotFound", got, err)
	}
	for _, plain := range []string{"secret-b", "unknown", ""} {
		_, err := keys.Lookup(ctx(t), plain)
		if !errors.Is(err, httpapi.ErrKeyNotFound) {
			t.Fatalf("Lookup(%q): %v, want httpapi.ErrKeyNotFound", plain, err)
		}
		if errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("Lookup(%q): %v carries the store's not-found error too", plain, err)
		}
	}
}

func retiring(plain, clientID, keyID string, until time.Time, rev uint64) apikeys.Row {
	r := key(plain, clientID, keyID, false, rev)
	r.ValidUntil = until
	return r
}

// sameRow compares rows with their ends as instants (a store keeps milliseconds, in UTC).
func sameRow(got, want apikeys.Row) bool {
	return got.KeyHash == want.KeyHash && got.ClientID == want.ClientID && got.KeyID == want.KeyID &&
		got.Revoked == want.Revoked && got.ValidUntil.Equal(want.ValidUntil) && got.Revision == want.Revision
}

// testRetiring: a retiring key authenticates before its end, with the end, and not from it on;
// ByKeyID keeps the end.
func testRetiring(t *testing.T, s apikeys.Store) {
	end := base.Add(time.Hour)
	upsert(t, s, retiring("secret-a", "acme", "k1", end, 2), key("secret-b", "acme", "k2", false, 3))
	for _, at := range []time.Time{base, end.Add(-time.Millisecond)} {
		if got := assertClientAt(t, s, "secret-a", "acme", at); !got.ValidUntil.Equal(end) || got.Revoked {
			t.Fatalf("Lookup(secret-a) at %s = %+v; want the end %s", at, got, end)
		}
	}
	for _, at := range []time.Time{end, end.Add(time.Millisecond), end.Add(24 * time.Hour)} {
		assertNotFoundAt(t, s, "secret-a", at)
	}
	if got := assertClientAt(t, s, "secret-b", "acme", end.Add(24*time.Hour)); !got.ValidUntil.IsZero() {
		t.Fatalf("a key without an end has %s", got.ValidUntil)
	}
	if got := byKeyID(t, s, "acme", "k1"); !sameRow(got, retiring("secret-a", "acme", "k1", end, 2)) {
		t.Fatalf("ByKeyID of a retiring key = %+v", got)
	}
	// Revoked before its end: not found at any time.
	revoked := retiring("secret-a", "acme", "k1", end, 4)
	revoked.Revoked = true
	upsert(t, s, revoked)
	assertNotFoundAt(t, s, "secret-a", base)
	if got := byKeyID(t, s, "acme", "k1"); !sameRow(got, revoked) {
		t.Fatalf("ByKeyID of a revoked retiring key = %+v", got)
	}
}

// testRetirementRevisions: a retirement follows the revision rule, so a redelivered issue
// never lifts it.
func testRetirementRevisions(t *testing.T, s apikeys.Store) {
	end := base.Add(time.Minute)
	upsert(t, s, retiring("secret-a", "acme", "k1", end, 3))
	upsert(t, s, key("secret-a", "acme", "k1", false, 1), retiring("secret-a", "acme", "k1", end.Add(time.Hour), 3))
	assertNotFoundAt(t, s, "secret-a", end)
	if got := byKeyID(t, s, "acme", "k1"); !got.ValidUntil.Equal(end) {
		t.Fatalf("ByKeyID = %+v; want the end %s", got, end)
	}
}

func retire(log *eventlog.Log, clientID, keyID string, until time.Time) eventschema.Envelope {
	return log.Append(clientID, client.StreamName(clientID), base, client.APIKeyRetiring{KeyID: keyID, ValidUntil: until, At: base})
}

// testProjectorRetiringOneBatch is a rotation as the client's stream records it (the new key,
// the old one retiring), in one batch and redelivered.
func testProjectorRetiringOneBatch(t *testing.T, s apikeys.Store) {
	log := eventlog.New(t)
	p := apikeys.NewProjector(log.Registry(), s)
	end := base.Add(24 * time.Hour)
	batch := []eventschema.Envelope{register(log, "acme"), issue(log, "acme", "k1", "acme-1"),
		issue(log, "acme", "k2", "acme-2"), retire(log, "acme", "k1", end)}
	handle(t, p, batch)
	handle(t, p, batch)
	if got := assertClientAt(t, s, "acme-1", "acme", end.Add(-time.Second)); !got.ValidUntil.Equal(end) {
		t.Fatalf("the old key = %+v", got)
	}
	assertNotFoundAt(t, s, "acme-1", end)
	assertClientAt(t, s, "acme-2", "acme", end.Add(time.Hour))
	if got := byKeyID(t, s, "acme", "k1"); !sameRow(got, retiring("acme-1", "acme", "k1", end, 3)) {
		t.Fatalf("ByKeyID(acme, k1) = %+v", got)
	}
}

// testProjectorRetiringLater: the retirement arrives alone (the projector finds the key in the
// store), then a revocation before the end; redelivering the issue lifts neither. A retirement
// of a key the read model never saw is no error.
func testProjectorRetiringLater(t *testing.T, s apikeys.Store) {
	log := eventlog.New(t)
	p := apikeys.NewProjector(log.Registry(), s)
	end := base.Add(time.Hour)
	first := []eventschema.Envelope{register(log, "acme"), issue(log, "acme", "k1", "acme-1"), issue(log, "other", "k1", "other-1")}
	handle(t, p, first)
	second := []eventschema.Envelope{retire(log, "acme", "k1", end)}
	handle(t, p, second)
	assertClientAt(t, s, "acme-1", "acme", base)
	assertNotFoundAt(t, s, "acme-1", end)
	assertClientAt(t, s, "other-1", "other", end) // same key id, other client: untouched
	handle(t, p, first)
	assertNotFoundAt(t, s, "acme-1", end)

	handle(t, p, []eventschema.Envelope{revoke(log, "acme", "k1")})
	assertNotFoundAt(t, s, "acme-1", base)
	handle(t, p, first)
	handle(t, p, second)
	assertNotFoundAt(t, s, "acme-1", base)
	if got := byKeyID(t, s, "acme", "k1"); !got.Revoked || !got.ValidUntil.Equal(end) {
		t.Fatalf("ByKeyID after the revocation = %+v", got)
	}

	handle(t, p, []eventschema.Envelope{retire(log, "acme", "k-unknown", end)})
	if _, err := s.ByKeyID(ctx(t), "acme", "k-unknown"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("a retirement of an unknown key made a row: %v", err)
	}
}

// testReaderRetiring: the reader decides a retirement on its clock and tells the HTTP layer the
// end, so that its cache keeps the key no longer.
func testReaderRetiring(t *testing.T, s apikeys.Store) {
	end := base.Add(time.Hour)
	upsert(t, s, retiring("secret-a", "acme", "k1", end, 2), key("secret-b", "acme", "k2", false, 3))
	now := base
	reader := apikeys.NewReader(s).WithClock(func() time.Time { return now })
	var port httpapi.ExpiringKeyLookup = reader
	if id, until, err := port.LookupValidUntil(ctx(t), "secret-a"); err != nil || id != "acme" || !until.Equal(end) {
		t.Fatalf("LookupValidUntil(secret-a) = %q, %s, %v", id, until, err)
	}
	if id, until, err := port.LookupValidUntil(ctx(t), "secret-b"); err != nil || id != "acme" || !until.IsZero() {
		t.Fatalf("LookupValidUntil(secret-b) = %q, %s, %v", id, until, err)
	}
	now = end
	if _, err := port.Lookup(ctx(t), "secret-a"); !errors.Is(err, httpapi.ErrKeyNotFound) {
		t.Fatalf("Lookup(secret-a) at its end: %v, want httpapi.ErrKeyNotFound", err)
	}
	if _, _, err := port.LookupValidUntil(ctx(t), "secret-a"); !errors.Is(err, httpapi.ErrKeyNotFound) || errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("LookupValidUntil(secret-a) at its end: %v, want httpapi.ErrKeyNotFound only", err)
	}
	if id, err := port.Lookup(ctx(t), "secret-b"); err != nil || id != "acme" {
		t.Fatalf("Lookup(secret-b) = %q, %v", id, err)
	}
}

// testReaderSessionKeys: the reader names the key it authenticated (the id a session token
// records), and tells the session check whether a client's key, by that id, still
// authenticates: a revoked key, another client's id, an unknown one and a retiring key past its
// end do not; a retiring key does until its end, which it says.
func testReaderSessionKeys(t *testing.T, s apikeys.Store) {
	end := base.Add(time.Hour)
	upsert(t, s, retiring("secret-a", "acme", "k1", end, 2), key("secret-b", "acme", "k2", false, 3),
		key("secret-c", "acme", "k3", true, 4))
	now := base
	reader := apikeys.NewReader(s).WithClock(func() time.Time { return now })
	var lookup httpapi.KeyInfoLookup = reader
	if got, err := lookup.LookupKey(ctx(t), "secret-b"); err != nil || got != (httpapi.KeyInfo{ClientID: "acme", KeyID: "k2"}) {
		t.Fatalf("LookupKey(secret-b) = %+v, %v", got, err)
	}
	if got, err := lookup.LookupKey(ctx(t), "secret-a"); err != nil || got.KeyID != "k1" || !got.ValidUntil.Equal(end) {
		t.Fatalf("LookupKey(secret-a) = %+v, %v", got, err)
	}
	if _, err := lookup.LookupKey(ctx(t), "secret-c"); !errors.Is(err, httpapi.ErrKeyNotFound) {
		t.Fatalf("LookupKey(secret-c), revoked: %v, want httpapi.ErrKeyNotFound", err)
	}
	var port httpapi.SessionKeys = reader
	for _, tc := range []struct {
		client, keyID string
		active        bool
		until         time.Time
	}{
		{"acme", "k1", true, end},
		{"acme", "k2", true, time.Time{}},
		{"acme", "k3", false, time.Time{}},
		{"other", "k2", false, time.Time{}},
		{"acme", "k-unknown", false, time.Time{}},
	} {
		active, until, err := port.KeyActiveUntil(ctx(t), tc.client, tc.keyID)
		if err != nil || active != tc.active || !until.Equal(tc.until) {
			t.Errorf("KeyActiveUntil(%s, %s) = %v, %s, %v; want %v, %s", tc.client, tc.keyID, active, until, err, tc.active, tc.until)
		}
	}
	now = end
	if active, _, err := port.KeyActiveUntil(ctx(t), "acme", "k1"); err != nil || active {
		t.Fatalf("KeyActiveUntil(acme, k1) at its end = %v, %v; want false", active, err)
	}
}
