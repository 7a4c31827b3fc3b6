// Package userstest is the contract suite of the users read model. Every Store adapter runs it;
// it covers the store on its own, the Projector writing through it and the Reader on top.
package userstest

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/projections/users"
	"github.com/samla/samla/query"
)

// Open returns a fresh, empty store for one test.
type Open = func(t *testing.T) users.Store

// Run runs the whole suite against the adapter that open builds.
func Run(t *testing.T, open Open) {
	readdbtest.Suite[users.Store]{
		{"RoundTrip", testRoundTrip},
		{"TenantIsolation", testTenantIsolation},
		{"GetMany", testGetMany},
		{"StaleAndEqualRevisionsIgnored", testRevisions},
		{"BatchWithSeveralRevisionsOfOneRow", testBatchDuplicates},
		{"ExternalIDs", testExternalIDs},
		{"ExternalIDsIgnoreStaleRevisions", testExternalIDRevisions},
		{"Reset", testReset},
		{"ProjectorWholeLifeInOneBatch", testProjectorWholeLife},
		{"ProjectorRedeliveryAndOverlap", testProjectorRedelivery},
		{"ProjectorIgnoresOtherCategories", testProjectorOtherCategories},
		{"ProjectorKeepsTheExternalIDSealed", testProjectorSealed},
		{"ProjectorKeepsTheHolderSealed", testProjectorHolderSealed},
		{"ProjectorReservationOfVersion1", testProjectorReservationV1},
		{"ProjectorAfterTheErasure", testProjectorErased},
		{"ReaderThroughItsPort", testReader},
		{"ReaderIsDeletedUser", testReaderDeleted},
		{"ReaderFindsOnlyTheExternalIDAskedFor", testReaderMismatch},
		{"ReaderFindsOnlyALiveHolder", testReaderHolders},
		{"ReaderErasedAndLostKeys", testReaderKeys},
	}.Run(t, open)
}

func ctx(t *testing.T) context.Context { return readdbtest.Context(t) }

// base is a fixed instant with sub-millisecond digits, to prove the store keeps ms precision.
var base = time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

// secret keys the reservations' names in the suite, as the server's secret does.
var secret = []byte("userstest-secret-0123456789abcdef0123")

const (
	u1 = "0190f4a2-7c1e-7b3a-9a51-2f1e3d4c5b6a"
	u2 = "0190f4a2-7c1e-7b3a-9a51-2f1e3d4c5b6b"
)

func row(id, tenant string, rev uint64) users.Row {
	return users.Row{UserUUID: id, Tenant: tenant, Personal: []byte(`{"sealed":{"v":1}}`), CreatedAt: base, Revision: rev}
}

func stored(r users.Row) users.Row {
	r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Millisecond)
	if !r.DeletedAt.IsZero() {
		r.DeletedAt = r.DeletedAt.UTC().Truncate(time.Millisecond)
	}
	return r
}

func upsert(t *testing.T, s users.Store, rows ...users.Row) {
	t.Helper()
	if err := s.Upsert(ctx(t), rows); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func upsertIDs(t *testing.T, s users.Store, rows ...users.ExternalIDRow) {
	t.Helper()
	if err := s.UpsertExternalIDs(ctx(t), rows); err != nil {
		t.Fatalf("UpsertExternalIDs: %v", err)
	}
}

func get(t *testing.T, s users.Store, tenant, id string) users.Row {
	t.Helper()
	r, err := s.Get(ctx(t), tenant, id)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", tenant, id, err)
	}
	return r
}

func assertRow(t *testing.T, got, want users.Row) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("row mismatch\n got: %#v\nwant: %#v", got, want)
	}
}

func assertNotFound(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("err = %v, want readdb.ErrNotFound", err)
	}
}

func testRoundTrip(t *testing.T, s users.Store) {
	in := row(u1, "acme", 3)
	in.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	upsert(t, s, in)
	assertRow(t, get(t, s, "acme", u1), stored(in))

	deleted := in
	deleted.Personal, deleted.DeletedAt, deleted.Revision = nil, in.CreatedAt.Add(time.Hour+time.Microsecond), 4
	upsert(t, s, deleted)
	assertRow(t, get(t, s, "acme", u1), stored(deleted))
}

func testTenantIsolation(t *testing.T, s users.Store) {
	upsert(t, s, row(u1, "acme", 0))
	_, err := s.Get(ctx(t), "globex", u1)
	assertNotFound(t, err)
	_, err = s.Get(ctx(t), "acme", u2)
	assertNotFound(t, err)
}

func testGetMany(t *testing.T, s users.Store) {
	upsert(t, s, row(u1, "acme", 0), row(u2, "globex", 1))
	got, err := s.GetMany(ctx(t), []string{u1, u2, "0190f4a2-0000-0000-0000-000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[u1].Tenant != "acme" || got[u2].Tenant != "globex" {
		t.Fatalf("GetMany = %v", got)
	}
	if none, err := s.GetMany(ctx(t), nil); err != nil || len(none) != 0 {
		t.Fatalf("GetMany(nil) = %v, %v", none, err)
	}
}

func testRevisions(t *testing.T, s users.Store) {
	newer := row(u1, "acme", 5)
	newer.DeletedAt = base
	upsert(t, s, newer)
	upsert(t, s, row(u1, "acme", 4)) // older
	same := row(u1, "acme", 5)
	upsert(t, s, same) // equal
	assertRow(t, get(t, s, "acme", u1), stored(newer))
}

func testBatchDuplicates(t *testing.T, s users.Store) {
	first, second := row(u1, "acme", 2), row(u1, "acme", 2)
	second.Personal = []byte("other")
	newest := row(u1, "acme", 3)
	newest.DeletedAt = base
	upsert(t, s, first, newest, second)
	assertRow(t, get(t, s, "acme", u1), stored(newest))
}

// suiteKeys seals the reservations' holders that the store-level tests write.
var suiteKeys = keystore.NewMemory()

// holder is a reservation's holder as the projector stores it: sealed under the hold's subject.
func holder(t *testing.T, userUUID string) sealed.Value {
	t.Helper()
	v, err := sealed.Seal(ctx(t), suiteKeys, holdOf(userUUID), []byte(`{"userUuid":"`+userUUID+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// holdOf is the subject of a user's hold on its externalId in the suite: a token of its own,
// which names no user.
func holdOf(userUUID string) string {
	return domain.HolderSubject(map[string]string{u1: "3d1c5a0e-first", u2: "8b2f4c7d-second"}[userUUID])
}

func reservation(key, tenant string, holder sealed.Value, released bool, rev uint64) users.ExternalIDRow {
	return users.ExternalIDRow{Key: key, Tenant: tenant, Holder: holder, Released: released, Revision: rev}
}

func getID(t *testing.T, s users.Store, tenant, key string) users.ExternalIDRow {
	t.Helper()
	r, err := s.GetExternalID(ctx(t), tenant, key)
	if err != nil {
		t.Fatalf("GetExternalID(%s): %v", tenant, err)
	}
	return r
}

func testExternalIDs(t *testing.T, s users.Store) {
	key := user.ExternalIDKey(secret, "acme", "customer-42")
	held := reservation(key, "acme", holder(t, u1), false, 0)
	upsertIDs(t, s, held)
	if got := getID(t, s, "acme", key); !reflect.DeepEqual(got, held) {
		t.Fatalf("reservation\n got %#v\nwant %#v", got, held)
	}
	_, err := s.GetExternalID(ctx(t), "globex", key)
	assertNotFound(t, err)
	_, err = s.GetExternalID(ctx(t), "acme", user.ExternalIDKey(secret, "acme", "customer-43"))
	assertNotFound(t, err)

	// Released (no holder kept), then taken by another user.
	released := reservation(key, "acme", sealed.Value{}, true, 1)
	upsertIDs(t, s, released)
	if got := getID(t, s, "acme", key); !reflect.DeepEqual(got, released) {
		t.Fatalf("released\n got %#v\nwant %#v", got, released)
	}
	taken := reservation(key, "acme", holder(t, u2), false, 2)
	upsertIDs(t, s, taken)
	if got := getID(t, s, "acme", key); !reflect.DeepEqual(got, taken) {
		t.Fatalf("taken again\n got %#v\nwant %#v", got, taken)
	}
}

func testExternalIDRevisions(t *testing.T, s users.Store) {
	key := user.ExternalIDKey(secret, "acme", "customer-42")
	released := reservation(key, "acme", sealed.Value{}, true, 1)
	upsertIDs(t, s, released, reservation(key, "acme", holder(t, u1), false, 0)) // in one batch
	upsertIDs(t, s, reservation(key, "acme", holder(t, u1), false, 0))           // redelivered later
	upsertIDs(t, s, reservation(key, "acme", holder(t, u1), false, 1))           // an equal revision
	if got := getID(t, s, "acme", key); !reflect.DeepEqual(got, released) {
		t.Fatalf("reservation\n got %#v\nwant %#v", got, released)
	}
}

func testReset(t *testing.T, s users.Store) {
	key := user.ExternalIDKey(secret, "acme", "customer-42")
	upsert(t, s, row(u1, "acme", 0))
	upsertIDs(t, s, reservation(key, "acme", holder(t, u1), false, 3))
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx(t), "acme", u1)
	assertNotFound(t, err)
	// A reservation left behind would find the user again once re-projected at a lower revision.
	_, err = s.GetExternalID(ctx(t), "acme", key)
	assertNotFound(t, err)
	again := reservation(key, "acme", holder(t, u1), false, 0)
	upsertIDs(t, s, again)
	if got := getID(t, s, "acme", key); !reflect.DeepEqual(got, again) {
		t.Fatalf("a reservation written after the reset: %#v", got)
	}
}

// lifeLog writes the events of a user's life as the command side appends them: the
// reservation, then the user; the deletion, then the release.
type lifeLog struct {
	*eventlog.Log
}

func (l lifeLog) create(id, tenant, externalID string, at time.Time) []eventschema.Envelope {
	key := user.ExternalIDKey(secret, tenant, externalID)
	return []eventschema.Envelope{
		l.Append(tenant, user.ReservationStreamName(key), at, user.ExternalIDReserved{ClientID: tenant, ReservedAt: at,
			Personal: &user.ReservedBy{UserUUID: id, RequestHash: "h", Subject: holdOf(id)}}),
		l.Append(tenant, user.StreamName(id), at, user.Created{UserUUID: id, ClientID: tenant, CreatedAt: at,
			Personal: &user.CreatedPerson{ExternalID: externalID, RequestHash: "h", HolderSubject: holdOf(id)}}),
	}
}

func (l lifeLog) delete(id, tenant, externalID string, at time.Time) []eventschema.Envelope {
	key := user.ExternalIDKey(secret, tenant, externalID)
	return []eventschema.Envelope{
		l.Append(tenant, user.StreamName(id), at, user.Deleted{DeletedAt: at}),
		l.Append(tenant, user.ReservationStreamName(key), at, user.ExternalIDReleased{ReleasedAt: at, Personal: &user.ReleasedBy{UserUUID: id}}),
	}
}

type fixture struct {
	log    lifeLog
	keys   *keystore.Memory
	proj   *users.Projector
	reader users.Reader
}

func newFixture(t *testing.T, s users.Store) fixture {
	l := eventlog.New(t)
	keys := keystore.NewMemory()
	return fixture{log: lifeLog{l}, keys: keys, proj: users.NewProjector(l.Registry(), s, keys), reader: users.NewReader(s, keys, secret)}
}

func (f fixture) handle(t *testing.T, batch ...eventschema.Envelope) {
	t.Helper()
	if err := f.proj.Handle(ctx(t), batch); err != nil {
		t.Fatalf("Handle: %v", err)
	}
}

func (f fixture) view(t *testing.T, tenant, id string) query.UserView {
	t.Helper()
	v, err := f.reader.Get(ctx(t), tenant, id)
	if err != nil {
		t.Fatalf("reader Get(%s, %s): %v", tenant, id, err)
	}
	return v
}

func (f fixture) find(t *testing.T, tenant, externalID string) (query.UserView, error) {
	t.Helper()
	return f.reader.FindByExternalID(ctx(t), tenant, externalID)
}

func testProjectorWholeLife(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	var batch []eventschema.Envelope
	batch = append(batch, f.log.create(u1, "acme", "customer-42", base)...)
	batch = append(batch, f.log.delete(u1, "acme", "customer-42", base.Add(time.Hour))...)
	batch = append(batch, f.log.create(u2, "acme", "customer-42", base.Add(2*time.Hour))...)
	f.handle(t, batch...)

	first := get(t, s, "acme", u1)
	if first.Personal != nil || !first.DeletedAt.Equal(base.Add(time.Hour).Truncate(time.Millisecond)) || first.Revision != 1 ||
		!first.CreatedAt.Equal(base.Truncate(time.Millisecond)) {
		t.Fatalf("deleted user %#v", first)
	}
	v, err := f.find(t, "acme", "customer-42")
	if err != nil || v.UserUUID != u2 || v.ExternalID == nil || *v.ExternalID != "customer-42" {
		t.Fatalf("find after the reuse = %+v, %v", v, err)
	}
}

func testProjectorRedelivery(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	created := f.log.create(u1, "acme", "customer-42", base)
	deleted := f.log.delete(u1, "acme", "customer-42", base.Add(time.Hour))
	f.handle(t, created...)
	f.handle(t, append(created, deleted[0])...) // overlapping
	f.handle(t, deleted...)
	want := get(t, s, "acme", u1)
	f.handle(t, append(created, deleted...)...) // everything again
	f.handle(t, created...)                     // an old batch late
	assertRow(t, get(t, s, "acme", u1), want)
	if want.DeletedAt.IsZero() || want.Revision != 1 {
		t.Fatalf("row %#v", want)
	}
	if _, err := f.find(t, "acme", "customer-42"); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("a replayed reservation found the deleted user: %v", err)
	}
}

func testProjectorOtherCategories(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	f.handle(t,
		f.log.Append("acme", collection.StreamName(u1), base, collection.Claimed{WorkerID: "w", ClaimedAt: base}),
		f.log.Append("acme", client.StreamName("acme"), base, client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: base}),
		// A user event whose user.created never arrived: no row is invented.
		f.log.Append("acme", user.StreamName(u2), base, user.Deleted{DeletedAt: base}),
	)
	got, err := s.GetMany(ctx(t), []string{u1, u2})
	if err != nil || len(got) != 0 {
		t.Fatalf("rows %v, %v", got, err)
	}
}

func testProjectorSealed(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	f.handle(t, f.log.create(u1, "acme", "customer-42", base)...)
	r := get(t, s, "acme", u1)
	if !eventschema.IsSealed(r.Personal) || bytes.Contains(r.Personal, []byte("customer-42")) {
		t.Fatalf("stored personal data %s", r.Personal)
	}
	if subject := eventschema.SealedSubject(r.Personal); subject != "user-"+u1 {
		t.Fatalf("sealed under %q", subject)
	}
}

func testProjectorErased(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	// A rebuild after the user's erasure: its key is gone before the projector sees its events.
	if err := f.keys.Destroy(ctx(t), "user-"+u1); err != nil {
		t.Fatal(err)
	}
	f.handle(t, f.log.create(u1, "acme", "customer-42", base)...)
	if r := get(t, s, "acme", u1); r.Personal != nil {
		t.Fatalf("an erased user's personal data was kept: %s", r.Personal)
	}
	if v := f.view(t, "acme", u1); v.ExternalID != nil {
		t.Fatalf("view %+v", v)
	}
}

func testReader(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	f.handle(t, f.log.create(u1, "acme", "customer-42", base)...)
	f.handle(t, f.log.create(u2, "globex", "customer-42", base)...)

	v := f.view(t, "acme", u1)
	if v.UserUUID != u1 || v.Tenant != "acme" || v.ExternalID == nil || *v.ExternalID != "customer-42" ||
		!v.CreatedAt.Equal(base.Truncate(time.Millisecond)) || v.DeletedAt != nil {
		t.Fatalf("view %+v", v)
	}
	if found, err := f.find(t, "acme", "customer-42"); err != nil || found.UserUUID != u1 {
		t.Fatalf("find = %+v, %v", found, err)
	}
	if found, err := f.find(t, "globex", "customer-42"); err != nil || found.UserUUID != u2 {
		t.Fatalf("find of another tenant = %+v, %v", found, err)
	}
	for _, tc := range []struct{ tenant, externalID string }{{"acme", "customer-43"}, {"initech", "customer-42"}} {
		if _, err := f.find(t, tc.tenant, tc.externalID); !errors.Is(err, query.ErrNotFound) {
			t.Fatalf("find %v: %v", tc, err)
		}
	}
	if _, err := f.reader.Get(ctx(t), "globex", u1); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("another tenant's user: %v", err)
	}
	live := func(tenant, id string) bool {
		ok, err := f.reader.IsLiveUser(ctx(t), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !live("acme", u1) || live("globex", u1) || live("acme", "0190f4a2-0000-0000-0000-000000000000") {
		t.Fatal("liveness before the delete")
	}
	liveness := func(tenant, id string) users.Liveness {
		l, err := f.reader.Liveness(ctx(t), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if liveness("acme", u1) != users.Live || liveness("globex", u1) != users.Unknown ||
		liveness("acme", "0190f4a2-0000-0000-0000-000000000000") != users.Unknown {
		t.Fatal("what the read model knows before the delete")
	}

	f.handle(t, f.log.delete(u1, "acme", "customer-42", base.Add(time.Hour))...)
	v = f.view(t, "acme", u1)
	if v.ExternalID != nil || v.DeletedAt == nil || !v.DeletedAt.Equal(base.Add(time.Hour).Truncate(time.Millisecond)) {
		t.Fatalf("deleted view %+v", v)
	}
	if _, err := f.find(t, "acme", "customer-42"); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("find after the delete: %v", err)
	}
	if live("acme", u1) || liveness("acme", u1) != users.Deleted {
		t.Fatal("a deleted user is live")
	}
}

// deletedUsers is the port DELETE /users/{userUuid} waits on (command/httpcmd.DeletedUsers),
// restated here as httpcmd declares it: the reader must satisfy it by its shape alone.
type deletedUsers interface {
	IsDeletedUser(ctx context.Context, clientID, userUUID string) (bool, error)
}

// testReaderDeleted: only a user the read model shows deleted is deleted; a live one, one it has
// not seen (yet) and another tenant's are not. It opens nothing, so it answers without the keys.
func testReaderDeleted(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	var deleted deletedUsers = users.NewReader(s, keystore.NewMemory(), secret)
	is := func(tenant, id string) bool {
		t.Helper()
		ok, err := deleted.IsDeletedUser(ctx(t), tenant, id)
		if err != nil {
			t.Fatalf("IsDeletedUser(%s, %s): %v", tenant, id, err)
		}
		return ok
	}
	if is("acme", u1) {
		t.Fatal("a user the read model has not seen is deleted")
	}
	f.handle(t, f.log.create(u1, "acme", "customer-42", base)...)
	f.handle(t, f.log.create(u2, "acme", "customer-43", base)...)
	if is("acme", u1) || is("acme", u2) {
		t.Fatal("a live user is deleted")
	}
	f.handle(t, f.log.delete(u1, "acme", "customer-42", base.Add(time.Hour))...)
	if !is("acme", u1) || is("acme", u2) || is("globex", u1) {
		t.Fatal("after the delete: want only acme's deleted user deleted")
	}
}

func testReaderMismatch(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	// A reservation of customer-7 held by a user whose externalId is customer-42: what a lost
	// race on one Idempotency-Key leaves until the command side repairs it.
	f.handle(t, f.log.create(u1, "acme", "customer-42", base)...)
	key := user.ExternalIDKey(secret, "acme", "customer-7")
	f.handle(t, f.log.Append("acme", user.ReservationStreamName(key), base,
		user.ExternalIDReserved{ClientID: "acme", ReservedAt: base,
			Personal: &user.ReservedBy{UserUUID: u1, RequestHash: "h", Subject: holdOf(u1)}}))
	if v, err := f.find(t, "acme", "customer-7"); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("find = %+v, %v", v, err)
	}
}

func testReaderKeys(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	f.handle(t, f.log.create(u1, "acme", "customer-42", base)...)

	// Another deployment's (or a lost) key store cannot open it: an error, never an absent
	// externalId.
	lost := users.NewReader(s, keystore.NewMemory(), secret)
	if _, err := lost.Get(ctx(t), "acme", u1); !errors.Is(err, eventschema.ErrKeyNotFound) {
		t.Fatalf("Get with a lost key: %v", err)
	}
	if _, err := lost.FindByExternalID(ctx(t), "acme", "customer-42"); !errors.Is(err, eventschema.ErrKeyNotFound) {
		t.Fatalf("find with a lost key: %v", err)
	}

	// Another secret names other reservations: nothing is found.
	other := users.NewReader(s, f.keys, []byte("another-secret-0123456789abcdef0123"))
	if _, err := other.FindByExternalID(ctx(t), "acme", "customer-42"); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("find under another secret: %v", err)
	}

	// Erased: the user is shown without its externalId, and nothing finds it by it.
	if err := f.keys.Destroy(ctx(t), "user-"+u1); err != nil {
		t.Fatal(err)
	}
	if v := f.view(t, "acme", u1); v.ExternalID != nil || v.DeletedAt != nil {
		t.Fatalf("erased view %+v", v)
	}
	if _, err := f.find(t, "acme", "customer-42"); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("find after the erasure: %v", err)
	}

}

// testProjectorHolderSealed: a reservation's holder is kept sealed under its hold's subject, so
// that neither the row nor the sealed form names the user; destroying that key (the user's
// erasure) leaves a reservation that finds nobody.
func testProjectorHolderSealed(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	f.handle(t, f.log.create(u1, "acme", "customer-42", base)...)
	key := user.ExternalIDKey(secret, "acme", "customer-42")
	r := getID(t, s, "acme", key)
	if r.Holder.IsZero() || bytes.Contains(r.Holder.Bytes(), []byte(u1)) || r.Holder.Subject() != holdOf(u1) {
		t.Fatalf("stored holder %s", r.Holder.Bytes())
	}
	if _, err := f.find(t, "acme", "customer-42"); err != nil {
		t.Fatalf("find before the erasure: %v", err)
	}
	if err := f.keys.Destroy(ctx(t), holdOf(u1)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.find(t, "acme", "customer-42"); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("find after the hold's erasure: %v", err)
	}
	// Projected again after the erasure (a rebuild), the hold keeps nothing.
	f.handle(t, f.log.Append("acme", user.ReservationStreamName(key), base, user.ExternalIDReserved{ClientID: "acme",
		ReservedAt: base, Personal: &user.ReservedBy{UserUUID: u1, Subject: holdOf(u1)}}))
	if r := getID(t, s, "acme", key); !r.Holder.IsZero() {
		t.Fatalf("an erased hold was kept: %s", r.Holder.Bytes())
	}
}

// testProjectorReservationV1: a reservation of version 1 named its holder in plain text and no
// subject of its hold: it is read with its holder sealed under the user's own subject.
func testProjectorReservationV1(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	key := user.ExternalIDKey(secret, "acme", "customer-42")
	f.handle(t, f.log.AppendRaw(eventschema.Envelope{Type: user.EventExternalIDReserved, SchemaVersion: 1, Tenant: "acme",
		Stream: user.ReservationStreamName(key), OccurredAt: base,
		Payload: []byte(`{"clientId":"acme","userUuid":"` + u1 + `","requestHash":"h","reservedAt":"2026-03-04T05:06:07.891Z"}`)}))
	f.handle(t, f.log.create(u1, "acme", "customer-42", base)[1])
	if r := getID(t, s, "acme", key); r.Holder.Subject() != domain.UserSubject(u1) {
		t.Fatalf("a hold of version 1 sealed under %q", r.Holder.Subject())
	}
	if v, err := f.find(t, "acme", "customer-42"); err != nil || v.UserUUID != u1 {
		t.Fatalf("find = %+v, %v", v, err)
	}
}

// testReaderHolders: a reservation finds its holder only while the reservation holds and the
// holder is a live user the read model knows.
func testReaderHolders(t *testing.T, s users.Store) {
	f := newFixture(t, s)
	created := f.log.create(u1, "acme", "customer-42", base)
	// The reservation before its user: nobody is found yet.
	f.handle(t, created[0])
	if _, err := f.find(t, "acme", "customer-42"); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("find before the user: %v", err)
	}
	f.handle(t, created[1])
	if v, err := f.find(t, "acme", "customer-42"); err != nil || v.UserUUID != u1 {
		t.Fatalf("find = %+v, %v", v, err)
	}
	// The user deleted, its reservation not released yet: nobody is found.
	deleted := f.log.delete(u1, "acme", "customer-42", base.Add(time.Hour))
	f.handle(t, deleted[0])
	if _, err := f.find(t, "acme", "customer-42"); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("find of a deleted user: %v", err)
	}
	f.handle(t, deleted[1])
	if _, err := f.find(t, "acme", "customer-42"); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("find after the release: %v", err)
	}
	// A lost key store is an error, never nobody.
	f.handle(t, f.log.create(u2, "acme", "customer-7", base)...)
	lost := users.NewReader(s, keystore.NewMemory(), secret)
	if _, err := lost.FindByExternalID(ctx(t), "acme", "customer-7"); !errors.Is(err, eventschema.ErrKeyNotFound) {
		t.Fatalf("find with a lost key store: %v", err)
	}
}
