// Package cancellationstest is the contract suite of the cancellations read model. Every Store
// adapter runs it; it covers the store on its own, the Projector writing through it and the
// Reader on top.
package cancellationstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/cancellations"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/internal/sealed"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// Open returns a fresh, empty store for one test.
type Open = func(t *testing.T) cancellations.Store

// Run runs the whole suite against the adapter that open builds.
func Run(t *testing.T, open Open) {
	readdbtest.Suite[cancellations.Store]{
		{"RoundTripEveryField", testRoundTrip},
		{"GetMany", testGetMany},
		{"StaleAndEqualRevisionsIgnored", testRevisions},
		{"BatchWithSeveralRevisionsOfOneRow", testBatchDuplicates},
		{"TenantIsolation", testTenantIsolation},
		{"ListByCollection", testListByCollection},
		{"ListByUserPages", testListByUserPages},
		{"ListNeedingProvider", testListNeedingProvider},
		{"ListNeedingProviderPages", testListNeedingProviderPages},
		{"ListNeedingProviderAfterAPosition", testListNeedingProviderAfterAPosition},
		{"ErasePersonal", testErasePersonal},
		{"Reset", testReset},
		{"ProjectorWholeLife", testProjectorWholeLife},
		{"ProjectorEveryEnding", testProjectorEndings},
		{"ProjectorRedeliveryAndOverlap", testProjectorRedelivery},
		{"ProjectorIgnoresOtherCategories", testProjectorOtherCategories},
		{"ProjectorKeepsTheDocumentSealed", testProjectorSealed},
		{"ProjectorErasesOnUserDeleted", testProjectorErasesOnUserDeleted},
		{"ProjectorAfterTheErasure", testProjectorAfterErasure},
		{"ProjectorMetrics", testProjectorMetrics},
		{"ReaderThroughItsPort", testReaderPort},
		{"ReaderSignedDocument", testReaderSignedDocument},
		{"ReaderListNeedingProvider", testReaderListNeedingProvider},
		{"ReaderUserCancellationIDs", testReaderUserCancellationIDs},
	}.Run(t, open)
}

func ctx(t *testing.T) context.Context { return readdbtest.Context(t) }

// suiteKeys seals and opens the documents in the tests that do not need keys of their own.
var suiteKeys = keystore.NewMemory()

// base is a fixed instant with sub-millisecond digits, to prove the store keeps ms precision.
var base = time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

const (
	u1    = "0197c0a1-1111-7b3a-9a51-2f1e3d4c5b6a"
	u2    = "0197c0a1-2222-7b3a-9a51-2f1e3d4c5b6a"
	col1  = "0197c0a1-cccc-7b3a-9a51-000000000001"
	col2  = "0197c0a1-cccc-7b3a-9a51-000000000002"
	d1    = "0197c0a1-dddd-7b3a-9a51-000000000001"
	d2    = "0197c0a1-dddd-7b3a-9a51-000000000002"
	d3    = "0197c0a1-dddd-7b3a-9a51-000000000003"
	comp  = "se-demo-insurer"
	holdr = "Tolvan Tolvansson" // the holder's name, which the PDF holds and no store may in plain text
)

// pdf is a signed PDF that names the holder.
var pdf = []byte("%PDF-1.7\n% power of attorney for " + holdr + ", insurance 12345-678\n%%EOF\n")

// sealDoc is a document's content as the projector stores it, under the cancellation's subject.
func sealDoc(t *testing.T, keys eventschema.Keys, collectionID, userUUID string, plain []byte) sealed.Value {
	t.Helper()
	v, err := sealed.Seal(ctx(t), keys, collection.DataSubject(collectionID, userUUID), plain)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// row is a cancellation of the tenant's user's collection, requested at base plus minute minutes.
func row(id, tenant, collectionID, userUUID, status string, minute int, rev uint64) cancellations.Row {
	at := base.Add(time.Duration(minute) * time.Minute)
	return cancellations.Row{DocumentID: id, Tenant: tenant, CollectionID: collectionID, UserUUID: userUUID, Company: comp,
		InsuranceID: "ins-" + id, DeliveryMethod: "EMAIL", TemplateVersion: 1, Status: status, RequestedAt: at, UpdatedAt: at,
		Revision: rev}
}

// full is a row with every field set.
func full(id string, rev uint64) cancellations.Row {
	r := row(id, "acme", col1, u1, "CLOSED", 0, rev)
	r.InsuranceType, r.DeliveryMethod, r.TemplateVersion = "HOME", "SMS", 3
	r.IsSignedAndSealed = true
	r.SentAt, r.Deadline = base.Add(time.Second), base.Add(30*24*time.Hour)
	r.SignedAt, r.EndedAt = base.Add(time.Hour), base.Add(2*time.Hour)
	r.CancelReason, r.ErrorCode = "CLIENT", "RENDER_FAILED"
	r.UpdatedAt = base.Add(3 * time.Hour)
	return r
}

// stored is r as a store returns it: times at ms precision, in UTC.
func stored(r cancellations.Row) cancellations.Row {
	for _, at := range []*time.Time{&r.RequestedAt, &r.SentAt, &r.Deadline, &r.SignedAt, &r.EndedAt, &r.UpdatedAt} {
		if !at.IsZero() {
			*at = at.UTC().Truncate(time.Millisecond)
		}
	}
	return r
}

func upsert(t *testing.T, s cancellations.Store, rows ...cancellations.Row) {
	t.Helper()
	if err := s.Upsert(ctx(t), rows, nil); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func upsertDocs(t *testing.T, s cancellations.Store, docs ...cancellations.Document) {
	t.Helper()
	if err := s.Upsert(ctx(t), nil, docs); err != nil {
		t.Fatalf("Upsert documents: %v", err)
	}
}

func get(t *testing.T, s cancellations.Store, tenant, id string) cancellations.Row {
	t.Helper()
	r, err := s.Get(ctx(t), tenant, id)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", tenant, id, err)
	}
	return r
}

func document(t *testing.T, s cancellations.Store, tenant, id string) cancellations.Document {
	t.Helper()
	d, err := s.Document(ctx(t), tenant, id)
	if err != nil {
		t.Fatalf("Document(%s, %s): %v", tenant, id, err)
	}
	return d
}

func assertRow(t *testing.T, got, want cancellations.Row) {
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

func ids(rows []cancellations.Row) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.DocumentID)
	}
	return out
}

func assertIDs(t *testing.T, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

func testRoundTrip(t *testing.T, s cancellations.Store) {
	in := full(d1, 6)
	in.RequestedAt = time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	upsert(t, s, in)
	got := get(t, s, "acme", d1)
	assertRow(t, got, stored(in))
	if got.RequestedAt.Location() != time.UTC || got.RequestedAt.Nanosecond() != 678_000_000 {
		t.Fatalf("requested at %v", got.RequestedAt)
	}
	// A row with nothing optional reads back with zero values.
	bare := row(d2, "acme", col1, "", "PREPARATION", 1, 0)
	bare.InsuranceType = ""
	upsert(t, s, bare)
	assertRow(t, get(t, s, "acme", d2), stored(bare))
	// The document round-trips sealed, by itself.
	doc := cancellations.Document{DocumentID: d1, Tenant: "acme", Content: sealDoc(t, suiteKeys, col1, u1, pdf), Revision: 6}
	upsertDocs(t, s, doc)
	if got := document(t, s, "acme", d1); !reflect.DeepEqual(got, doc) {
		t.Fatalf("document\n got %#v\nwant %#v", got, doc)
	}
	_, err := s.Document(ctx(t), "acme", d2)
	assertNotFound(t, err)
}

func testGetMany(t *testing.T, s cancellations.Store) {
	a, b := row(d1, "acme", col1, u1, "PREPARATION", 0, 0), row(d2, "globex", col2, u2, "PENDING", 1, 2)
	upsert(t, s, a, b)
	got, err := s.GetMany(ctx(t), []string{d1, d2, "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[d1], stored(a)) || !reflect.DeepEqual(got[d2], stored(b)) {
		t.Fatalf("GetMany = %#v", got)
	}
	if none, err := s.GetMany(ctx(t), nil); err != nil || len(none) != 0 {
		t.Fatalf("GetMany(nil) = %v, %v", none, err)
	}
	// More ids than one IN list takes.
	many := make([]string, 1203)
	for i := range many {
		many[i] = fmt.Sprintf("missing-%d", i)
	}
	many[1202] = d2
	if got, err := s.GetMany(ctx(t), many); err != nil || len(got) != 1 {
		t.Fatalf("GetMany of many = %d rows, %v", len(got), err)
	}
}

func testRevisions(t *testing.T, s cancellations.Store) {
	current := row(d1, "acme", col1, u1, "CLOSED", 0, 5)
	upsert(t, s, current)
	stale, equal := current, current
	stale.Status, stale.Revision = "PENDING", 4
	equal.Status = "REJECTED"
	upsert(t, s, stale)
	upsert(t, s, equal)
	assertRow(t, get(t, s, "acme", d1), stored(current))
	newer := current
	newer.IsSignedAndSealed, newer.Revision = true, 6
	upsert(t, s, newer)
	assertRow(t, get(t, s, "acme", d1), stored(newer))

	// Documents follow the same rule.
	doc := cancellations.Document{DocumentID: d1, Tenant: "acme", Content: sealDoc(t, suiteKeys, col1, u1, pdf), Revision: 6}
	upsertDocs(t, s, doc)
	for _, other := range []cancellations.Document{{DocumentID: d1, Tenant: "acme", Revision: 5}, {DocumentID: d1, Tenant: "acme", Revision: 6}} {
		upsertDocs(t, s, other)
		if got := document(t, s, "acme", d1); !reflect.DeepEqual(got, doc) {
			t.Fatalf("revision %d overwrote the document: %#v", other.Revision, got)
		}
	}
}

func testBatchDuplicates(t *testing.T, s cancellations.Store) {
	r1, r3, r3b, r2 := row(d1, "acme", col1, u1, "PREPARATION", 0, 1), row(d1, "acme", col1, u1, "CLOSED", 0, 3),
		row(d1, "acme", col1, u1, "REJECTED", 0, 3), row(d1, "acme", col1, u1, "PENDING", 0, 2)
	upsert(t, s, r1, r3, r3b, r2)
	assertRow(t, get(t, s, "acme", d1), stored(r3))
}

func testTenantIsolation(t *testing.T, s cancellations.Store) {
	upsert(t, s, row(d1, "acme", col1, u1, "CLOSED", 0, 4))
	upsertDocs(t, s, cancellations.Document{DocumentID: d1, Tenant: "acme", Content: sealDoc(t, suiteKeys, col1, u1, pdf), Revision: 4})
	_, err := s.Get(ctx(t), "globex", d1)
	assertNotFound(t, err)
	_, err = s.Get(ctx(t), "acme", d2)
	assertNotFound(t, err)
	_, err = s.Document(ctx(t), "globex", d1)
	assertNotFound(t, err)
	rows, err := s.ListByCollection(ctx(t), "globex", col1, 10)
	if err != nil || len(rows) != 0 {
		t.Fatalf("another tenant's collection lists %v, %v", rows, err)
	}
	rows, err = s.ListByUser(ctx(t), "globex", u1, nil, 10)
	if err != nil || len(rows) != 0 {
		t.Fatalf("another tenant's user lists %v, %v", rows, err)
	}
}

func listCollection(t *testing.T, s cancellations.Store, tenant, collectionID string, limit int) []string {
	t.Helper()
	rows, err := s.ListByCollection(ctx(t), tenant, collectionID, limit)
	if err != nil {
		t.Fatalf("ListByCollection: %v", err)
	}
	return ids(rows)
}

func testListByCollection(t *testing.T, s cancellations.Store) {
	upsert(t, s,
		row("k-3", "acme", col1, u1, "PREPARATION", 3, 0),
		row("k-1", "acme", col1, u1, "PREPARATION", 1, 0),
		row("k-2b", "acme", col1, u1, "PREPARATION", 2, 0),  // the same ms as k-2: the id breaks the tie
		row("k-2", "acme", col1, u1, "PREPARATION", 2, 0),   //
		row("k-x", "acme", col2, u1, "PREPARATION", 0, 0),   // another collection's
		row("k-y", "globex", col1, u1, "PREPARATION", 0, 0), // the same collection id under another client
	)
	assertIDs(t, listCollection(t, s, "acme", col1, 10), "k-1", "k-2", "k-2b", "k-3")
	assertIDs(t, listCollection(t, s, "acme", col1, 2), "k-1", "k-2")
	assertIDs(t, listCollection(t, s, "globex", col1, 10), "k-y")
	assertIDs(t, listCollection(t, s, "acme", "", 10))
	assertIDs(t, listCollection(t, s, "acme", col1, 0))
	// The listed row is the current one, in full.
	newer := full("k-1", 4)
	newer.RequestedAt = base.Add(time.Minute)
	upsert(t, s, newer)
	rows, err := s.ListByCollection(ctx(t), "acme", col1, 1)
	if err != nil || len(rows) != 1 {
		t.Fatalf("ListByCollection = %v, %v", rows, err)
	}
	assertRow(t, rows[0], stored(newer))
}

func testListByUserPages(t *testing.T, s cancellations.Store) {
	var all []cancellations.Row
	for i := range 7 {
		all = append(all, row("k-"+string(rune('a'+i)), "acme", col1, u1, "PREPARATION", i/2, 0)) // pairs share a ms
	}
	upsert(t, s, append(all, row("k-other", "acme", col1, u2, "PREPARATION", 0, 0))...)
	var got []string
	var after *cancellations.Position
	for page := 0; ; page++ {
		rows, err := s.ListByUser(ctx(t), "acme", u1, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(rows)...)
		if len(rows) < 3 {
			break
		}
		last := rows[len(rows)-1]
		after = &cancellations.Position{RequestedAt: last.RequestedAt, DocumentID: last.DocumentID}
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	assertIDs(t, got, "k-a", "k-b", "k-c", "k-d", "k-e", "k-f", "k-g")
	if rows, err := s.ListByUser(ctx(t), "acme", "", nil, 10); err != nil || len(rows) != 0 {
		t.Fatalf("no user: %v, %v", rows, err)
	}
}

func testListNeedingProvider(t *testing.T, s cancellations.Store) {
	var want []string
	minute := 100
	for _, st := range cancellation.AllStatuses() {
		for _, sealedToo := range []bool{false, true} {
			if sealedToo && st != cancellation.StatusClosed {
				continue
			}
			id := fmt.Sprintf("k-%s-%v", st, sealedToo)
			r := row(id, "acme", col1, u1, string(st), minute, 0)
			r.IsSignedAndSealed = sealedToo
			upsert(t, s, r)
			if cancellations.NeedsProvider(string(st), sealedToo) {
				want = append([]string{id}, want...) // oldest first: the later ones were requested earlier
			}
			minute--
		}
	}
	rows, err := s.ListNeedingProvider(ctx(t), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, ids(rows), want...)
	if !slices.Equal(want, []string{"k-CLOSED-false", "k-PENDING-false", "k-PREPARATION-false"}) {
		t.Fatalf("needing the provider: %v", want)
	}
	// A cancellation whose PDF was sealed leaves the list, whatever versions a store keeps; so
	// does one that ended.
	sealedNow := row("k-CLOSED-false", "acme", col1, u1, "CLOSED", 98, 1)
	sealedNow.IsSignedAndSealed = true
	ended := row("k-PENDING-false", "acme", col1, u1, "TIMED_OUT", 99, 1)
	upsert(t, s, sealedNow, ended)
	if rows, err = s.ListNeedingProvider(ctx(t), nil, 1); err != nil {
		t.Fatal(err)
	}
	assertIDs(t, ids(rows), "k-PREPARATION-false")
	if rows, err = s.ListNeedingProvider(ctx(t), nil, 5); err != nil {
		t.Fatal(err)
	}
	assertIDs(t, ids(rows), "k-PREPARATION-false")
}

// testErasePersonal: ErasePersonal blanks the documents of the user's cancellations of the
// tenant, keeps the rows, the documents' revisions and everything else, leaves every other
// document alone, and a later revision is still written over it.
func testErasePersonal(t *testing.T, s cancellations.Store) {
	doc := func(r cancellations.Row) cancellations.Document {
		return cancellations.Document{DocumentID: r.DocumentID, Tenant: r.Tenant,
			Content: sealDoc(t, suiteKeys, r.CollectionID, r.UserUUID, pdf), Revision: r.Revision}
	}
	erased := []cancellations.Row{row("k-1", "acme", col1, u1, "CLOSED", 1, 4), row("k-2", "acme", col2, u1, "CLOSED", 2, 7)}
	kept := []cancellations.Row{row("k-other-user", "acme", col1, u2, "CLOSED", 3, 4),
		row("k-other-tenant", "globex", col1, u1, "CLOSED", 4, 4), row("k-no-user", "acme", col1, "", "CLOSED", 5, 4)}
	all := append(slices.Clone(erased), kept...)
	for i := range all {
		all[i].IsSignedAndSealed = true
		upsert(t, s, all[i])
		upsertDocs(t, s, doc(all[i]))
	}
	for range 2 { // erasing again changes nothing
		if err := s.ErasePersonal(ctx(t), "acme", u1); err != nil {
			t.Fatalf("ErasePersonal: %v", err)
		}
		for _, r := range all[:len(erased)] {
			assertRow(t, get(t, s, "acme", r.DocumentID), stored(r))
			want := doc(r)
			want.Content = sealed.Value{}
			if got := document(t, s, "acme", r.DocumentID); !reflect.DeepEqual(got, want) {
				t.Fatalf("erased document %#v", got)
			}
		}
		for _, r := range all[len(erased):] {
			assertRow(t, get(t, s, r.Tenant, r.DocumentID), stored(r))
			if got := document(t, s, r.Tenant, r.DocumentID); got.Content.IsZero() || got.Revision != r.Revision {
				t.Fatalf("kept document %#v", got)
			}
		}
	}
	if err := s.ErasePersonal(ctx(t), "acme", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.ErasePersonal(ctx(t), "acme", "u-none"); err != nil {
		t.Fatal(err)
	}
	next := doc(all[0])
	next.Revision = 5
	upsertDocs(t, s, next)
	if got := document(t, s, "acme", "k-1"); !reflect.DeepEqual(got, next) {
		t.Fatalf("a newer document after the erasure: %#v", got)
	}
}

func testReset(t *testing.T, s cancellations.Store) {
	upsert(t, s, row(d1, "acme", col1, u1, "CLOSED", 0, 4))
	upsertDocs(t, s, cancellations.Document{DocumentID: d1, Tenant: "acme", Content: sealDoc(t, suiteKeys, col1, u1, pdf), Revision: 4})
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx(t), "acme", d1)
	assertNotFound(t, err)
	_, err = s.Document(ctx(t), "acme", d1)
	assertNotFound(t, err)
	// The store takes rows and documents again after a reset, from revision 0.
	upsert(t, s, row(d1, "acme", col1, u1, "PREPARATION", 0, 0))
	upsertDocs(t, s, cancellations.Document{DocumentID: d1, Tenant: "acme", Revision: 0})
	get(t, s, "acme", d1)
	document(t, s, "acme", d1)
}

// fixture records cancellation events, as the command side and the worker do, and folds them.
type fixture struct {
	t    *testing.T
	log  *eventlog.Log
	keys *keystore.Memory
	p    *cancellations.Projector
	s    cancellations.Store
}

func newFixture(t *testing.T, s cancellations.Store) *fixture {
	log := eventlog.New(t)
	keys := keystore.NewMemory()
	return &fixture{t: t, log: log, keys: keys, s: s, p: cancellations.NewProjector(log.Registry(), s, keys, cancellations.Metrics{})}
}

func (f *fixture) reader() cancellations.Reader { return cancellations.NewReader(f.s, f.keys) }

func (f *fixture) requested(tenant, id, collectionID, userUUID string, at time.Time) eventschema.Envelope {
	return f.log.Append(tenant, cancellation.StreamName(id), at, cancellation.Requested{DocumentID: id, ClientID: tenant,
		CollectionID: collectionID, UserUUID: userUUID, Company: comp, InsuranceID: "ins-" + id, InsuranceType: "HOME",
		DeliveryMethod: cancellation.DeliveryEmail, TemplateVersion: 2, CancellationDate: "2026-04-01", RequestedAt: at,
		Personal: &cancellation.Requester{HolderName: holdr, PersonalNumber: "191212121212", InsuranceNumber: "12345-678",
			Email: "tolvan@example.com", IdempotencyKey: "idem-1", RequestHash: "hash-1"}})
}

func (f *fixture) append(tenant, id string, at time.Time, ev domain.Event) eventschema.Envelope {
	return f.log.Append(tenant, cancellation.StreamName(id), at, ev)
}

func (f *fixture) sent(tenant, id string, at time.Time) eventschema.Envelope {
	return f.append(tenant, id, at, cancellation.Sent{At: at, Deadline: at.Add(30 * 24 * time.Hour), ProcessID: "p-" + id,
		DocumentSHA256: hex.EncodeToString(make([]byte, 32)), DocumentSize: 100})
}

func (f *fixture) signed(tenant, id string, at time.Time) eventschema.Envelope {
	return f.append(tenant, id, at, cancellation.Signed{SignedAt: at, Method: "SANDBOX_EID"})
}

func (f *fixture) sealed(tenant, id string, at time.Time, doc []byte) eventschema.Envelope {
	sum := sha256.Sum256(doc)
	return f.append(tenant, id, at, cancellation.Sealed{SealedAt: at, SHA256: hex.EncodeToString(sum[:]), Size: len(doc),
		Personal: &cancellation.SealedPersonal{Document: doc}})
}

// life is a cancellation's whole way to its sealed PDF, from at on.
func (f *fixture) life(tenant, id, collectionID, userUUID string, at time.Time) []eventschema.Envelope {
	return []eventschema.Envelope{
		f.requested(tenant, id, collectionID, userUUID, at),
		f.append(tenant, id, at.Add(time.Second), cancellation.Claimed{WorkerID: "w-1", ClaimedAt: at.Add(time.Second)}),
		f.sent(tenant, id, at.Add(2*time.Second)),
		f.signed(tenant, id, at.Add(time.Minute)),
		f.sealed(tenant, id, at.Add(time.Minute+time.Second), pdf),
	}
}

func (f *fixture) handle(envs ...eventschema.Envelope) {
	f.t.Helper()
	if err := f.p.Handle(ctx(f.t), envs); err != nil {
		f.t.Fatalf("Handle: %v", err)
	}
}

func (f *fixture) view(tenant, id string) query.CancellationView {
	f.t.Helper()
	v, err := f.reader().Cancellation(ctx(f.t), tenant, id)
	if err != nil {
		f.t.Fatalf("Reader.Cancellation(%s): %v", id, err)
	}
	return v
}

func (f *fixture) assertNoDocument(tenant, id string) {
	f.t.Helper()
	if doc, err := f.reader().SignedDocument(ctx(f.t), tenant, id); !errors.Is(err, query.ErrNoSignedDocument) || errors.Is(err, query.ErrNotFound) {
		f.t.Fatalf("SignedDocument(%s) = %d bytes, %v; want query.ErrNoSignedDocument", id, len(doc), err)
	}
}

func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// testProjectorWholeLife folds a cancellation's life one event at a time and checks what the
// reader and the store show after each.
func testProjectorWholeLife(t *testing.T, s cancellations.Store) {
	f := newFixture(t, s)
	at := base

	f.handle(f.requested("acme", d1, col1, u1, at))
	want := query.CancellationView{DocumentID: d1, Tenant: "acme", CollectionID: col1, UserUUID: u1, Company: comp,
		InsuranceID: "ins-" + d1, Status: "PREPARATION", CreatedAt: ms(at), UpdatedAt: ms(at)}
	if v := f.view("acme", d1); !reflect.DeepEqual(v, want) {
		t.Fatalf("requested:\n got %#v\nwant %#v", v, want)
	}
	assertRow(t, get(t, s, "acme", d1), cancellations.Row{DocumentID: d1, Tenant: "acme", CollectionID: col1, UserUUID: u1,
		Company: comp, InsuranceID: "ins-" + d1, InsuranceType: "HOME", DeliveryMethod: "EMAIL", TemplateVersion: 2,
		Status: "PREPARATION", RequestedAt: ms(at), UpdatedAt: ms(at), Revision: 0})
	f.assertNoDocument("acme", d1)

	f.handle(f.append("acme", d1, at.Add(time.Second), cancellation.Claimed{WorkerID: "w-1", ClaimedAt: at.Add(time.Second)}))
	want.UpdatedAt = ms(at.Add(time.Second))
	if v := f.view("acme", d1); !reflect.DeepEqual(v, want) {
		t.Fatalf("claimed:\n got %#v\nwant %#v", v, want)
	}

	f.handle(f.sent("acme", d1, at.Add(2*time.Second)))
	want.Status, want.UpdatedAt = "PENDING", ms(at.Add(2*time.Second))
	if v := f.view("acme", d1); !reflect.DeepEqual(v, want) {
		t.Fatalf("sent:\n got %#v\nwant %#v", v, want)
	}
	if r := get(t, s, "acme", d1); !r.SentAt.Equal(ms(at.Add(2*time.Second))) ||
		!r.Deadline.Equal(ms(at.Add(2*time.Second+30*24*time.Hour))) || r.Revision != 2 {
		t.Fatalf("sent row %#v", r)
	}
	f.assertNoDocument("acme", d1)

	// A provider's callback changes no status, only the revision and the time.
	noted := at.Add(30 * time.Second)
	f.handle(f.append("acme", d1, noted, cancellation.ProviderNotified{At: noted, EventID: "evt-1"}))
	want.UpdatedAt = ms(noted)
	if v := f.view("acme", d1); !reflect.DeepEqual(v, want) {
		t.Fatalf("notified:\n got %#v\nwant %#v", v, want)
	}
	if r := get(t, s, "acme", d1); r.Status != "PENDING" || r.Revision != 3 {
		t.Fatalf("notified row %#v", r)
	}

	signedAt, sealedAt := at.Add(time.Minute), at.Add(time.Minute+time.Second)
	f.handle(f.signed("acme", d1, signedAt))
	signedMs := ms(signedAt)
	want.Status, want.SignedAt, want.UpdatedAt = "CLOSED", &signedMs, signedMs
	if v := f.view("acme", d1); !reflect.DeepEqual(v, want) {
		t.Fatalf("signed:\n got %#v\nwant %#v", v, want)
	}
	if r := get(t, s, "acme", d1); !r.EndedAt.Equal(signedMs) || r.IsSignedAndSealed || r.Revision != 4 {
		t.Fatalf("signed row %#v", r)
	}
	f.assertNoDocument("acme", d1)
	if ids, _, err := f.reader().ListNeedingProvider(ctx(t), time.Time{}, "", 0); err != nil || !slices.Equal(ids, []string{d1}) {
		t.Fatalf("signed, not sealed: needing the provider %v, %v", ids, err)
	}

	f.handle(f.sealed("acme", d1, sealedAt, pdf))
	want.IsSignedAndSealed, want.UpdatedAt = true, ms(sealedAt)
	if v := f.view("acme", d1); !reflect.DeepEqual(v, want) {
		t.Fatalf("sealed:\n got %#v\nwant %#v", v, want)
	}
	if r := get(t, s, "acme", d1); r.Revision != 5 || r.Status != "CLOSED" || !r.EndedAt.Equal(signedMs) {
		t.Fatalf("sealed row %#v", r)
	}
	got, err := f.reader().SignedDocument(ctx(t), "acme", d1)
	if err != nil || !bytes.Equal(got, pdf) {
		t.Fatalf("SignedDocument = %q, %v", got, err)
	}
	if ids, _, err := f.reader().ListNeedingProvider(ctx(t), time.Time{}, "", 0); err != nil || len(ids) != 0 {
		t.Fatalf("sealed: needing the provider %v, %v", ids, err)
	}
}

// testProjectorEndings: every other way a cancellation ends, each in one batch.
func testProjectorEndings(t *testing.T, s cancellations.Store) {
	f := newFixture(t, s)
	end := base.Add(time.Hour)
	cases := []struct {
		id     string
		events func(id string) []eventschema.Envelope
		want   cancellations.Row
	}{
		{"k-rejected", func(id string) []eventschema.Envelope {
			return []eventschema.Envelope{f.sent("acme", id, base.Add(time.Second)), f.append("acme", id, end, cancellation.Rejected{At: end})}
		}, cancellations.Row{Status: "REJECTED"}},
		{"k-timed-out", func(id string) []eventschema.Envelope {
			return []eventschema.Envelope{f.sent("acme", id, base.Add(time.Second)), f.append("acme", id, end, cancellation.TimedOut{At: end})}
		}, cancellations.Row{Status: "TIMED_OUT"}},
		{"k-canceled", func(id string) []eventschema.Envelope {
			return []eventschema.Envelope{f.append("acme", id, end, cancellation.Canceled{At: end, Reason: cancellation.CanceledUserDeleted})}
		}, cancellations.Row{Status: "CANCELED", CancelReason: "USER_DELETED"}},
		{"k-document-failed", func(id string) []eventschema.Envelope {
			return []eventschema.Envelope{f.append("acme", id, end, cancellation.DocumentFailed{At: end, Code: cancellation.DocumentRefused,
				Message: "The provider refused the document."})}
		}, cancellations.Row{Status: "DOCUMENT_ERROR", ErrorCode: "DOCUMENT_REFUSED"}},
	}
	for _, tc := range cases {
		f.handle(append([]eventschema.Envelope{f.requested("acme", tc.id, col1, u1, base)}, tc.events(tc.id)...)...)
		r := get(t, s, "acme", tc.id)
		if r.Status != tc.want.Status || r.CancelReason != tc.want.CancelReason || r.ErrorCode != tc.want.ErrorCode ||
			!r.EndedAt.Equal(ms(end)) || !r.UpdatedAt.Equal(ms(end)) || !r.SignedAt.IsZero() || r.IsSignedAndSealed {
			t.Fatalf("%s: %#v", tc.id, r)
		}
		if v := f.view("acme", tc.id); v.Status != tc.want.Status || v.SignedAt != nil || v.IsSignedAndSealed {
			t.Fatalf("%s: view %#v", tc.id, v)
		}
		f.assertNoDocument("acme", tc.id)
	}
	if ids, _, err := f.reader().ListNeedingProvider(ctx(t), time.Time{}, "", 0); err != nil || len(ids) != 0 {
		t.Fatalf("ended: needing the provider %v, %v", ids, err)
	}
}

func testProjectorRedelivery(t *testing.T, s cancellations.Store) {
	f := newFixture(t, s)
	life := f.life("acme", d1, col1, u1, base)
	f.handle(life...)
	want := get(t, s, "acme", d1)
	wantDoc := document(t, s, "acme", d1)
	// The same batch again, an overlapping one, and older ones change nothing.
	f.handle(life...)
	f.handle(life[2:]...)
	f.handle(life[0])
	f.handle(life[4])
	assertRow(t, get(t, s, "acme", d1), want)
	if got := document(t, s, "acme", d1); !reflect.DeepEqual(got, wantDoc) {
		t.Fatalf("the document was written again: %#v", got)
	}
	if want.Status != "CLOSED" || !want.IsSignedAndSealed || want.Revision != 4 {
		t.Fatalf("row %#v", want)
	}
}

func testProjectorOtherCategories(t *testing.T, s cancellations.Store) {
	f := newFixture(t, s)
	f.handle(
		f.log.Append("acme", client.StreamName("acme"), base, client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: base}),
		f.log.Append("acme", user.StreamName(u1), base, user.Created{UserUUID: u1, ClientID: "acme", CreatedAt: base}),
	)
	// An event of a cancellation whose request the read model never saw makes no row.
	f.handle(f.log.AppendRaw(eventschema.Envelope{Type: cancellation.EventTimedOut, SchemaVersion: 1, Tenant: "acme",
		Stream: cancellation.StreamName(d2), OccurredAt: base, Payload: json.RawMessage(`{"at":"2026-03-04T05:06:07Z"}`)}))
	rows, err := s.GetMany(ctx(t), []string{d1, d2, "acme", u1})
	if err != nil || len(rows) != 0 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	// A type this build does not know moves the revision and nothing else.
	f.handle(f.requested("acme", d1, col1, u1, base))
	f.handle(f.log.AppendRaw(eventschema.Envelope{Type: "cancellation.something-new", SchemaVersion: 1, Tenant: "acme",
		Stream: cancellation.StreamName(d1), OccurredAt: base.Add(time.Second), Payload: json.RawMessage(`{}`)}))
	if r := get(t, s, "acme", d1); r.Status != "PREPARATION" || r.Revision != 1 || !r.UpdatedAt.Equal(ms(base.Add(time.Second))) {
		t.Fatalf("after an unknown type: %#v", r)
	}
}

// testProjectorSealed: the signed PDF is kept sealed under the cancellation's data subject (the
// user's, or the collection's when it has no user); nothing of the holder is stored in plain text.
func testProjectorSealed(t *testing.T, s cancellations.Store) {
	f := newFixture(t, s)
	f.handle(f.life("acme", d1, col1, u1, base)...)
	f.handle(f.life("acme", d2, col2, "", base)...)
	for id, subject := range map[string]string{d1: domain.UserSubject(u1), d2: domain.CollectionSubject(col2)} {
		r, doc := get(t, s, "acme", id), document(t, s, "acme", id)
		dump := fmt.Sprintf("%#v %#v %s", r, doc, doc.Content.Bytes())
		for _, secret := range []string{holdr, "12345-678", "191212121212", "tolvan@example.com", "hash-1", "%PDF"} {
			if bytes.Contains([]byte(dump), []byte(secret)) {
				t.Fatalf("the stored cancellation holds %q in plain text: %s", secret, dump)
			}
		}
		if doc.Content.IsZero() || doc.Content.Subject() != subject || doc.Revision != 4 {
			t.Fatalf("%s: sealed under %q at %d, want %q", id, doc.Content.Subject(), doc.Revision, subject)
		}
		if got, err := f.reader().SignedDocument(ctx(t), "acme", id); err != nil || !bytes.Equal(got, pdf) {
			t.Fatalf("%s read back: %q, %v", id, got, err)
		}
	}
}

// testProjectorErasesOnUserDeleted: a user.deleted blanks the PDFs of the user's cancellations,
// in the batch that brings it or after; the rows, statuses included, stay; another user's
// cancellations keep theirs.
func testProjectorErasesOnUserDeleted(t *testing.T, s cancellations.Store) {
	f := newFixture(t, s)
	deleted := f.log.Append("acme", user.StreamName(u1), base.Add(time.Hour), user.Deleted{DeletedAt: base.Add(time.Hour)})
	batch := append(f.life("acme", d1, col1, u1, base), f.life("acme", d2, col2, u2, base)...)
	batch = append(batch, deleted)
	for range 2 {
		f.handle(batch...)
		if r := get(t, s, "acme", d1); r.Status != "CLOSED" || !r.IsSignedAndSealed || r.Revision != 4 {
			t.Fatalf("the deleted user's cancellation: %#v", r)
		}
		if d := document(t, s, "acme", d1); !d.Content.IsZero() {
			t.Fatalf("the deleted user's document kept: %#v", d)
		}
		f.assertNoDocument("acme", d1)
		if got, err := f.reader().SignedDocument(ctx(t), "acme", d2); err != nil || !bytes.Equal(got, pdf) {
			t.Fatalf("another user's cancellation lost its document: %q, %v", got, err)
		}
	}
	if v := f.view("acme", d1); v.Status != "CLOSED" || !v.IsSignedAndSealed || v.SignedAt == nil {
		t.Fatalf("the erased cancellation reads as %#v", v)
	}
	// A user.deleted that comes after the batch erases as well.
	f.handle(f.log.Append("acme", user.StreamName(u2), base.Add(2*time.Hour), user.Deleted{DeletedAt: base.Add(2 * time.Hour)}))
	f.assertNoDocument("acme", d2)
}

// testProjectorAfterTheErasure: a replay after the user's key was destroyed keeps nothing of the
// PDF, under no new key, and the cancellation still shows signed and sealed.
func testProjectorAfterErasure(t *testing.T, s cancellations.Store) {
	f := newFixture(t, s)
	if err := f.keys.Destroy(ctx(t), domain.UserSubject(u1)); err != nil {
		t.Fatal(err)
	}
	f.handle(f.life("acme", d1, col1, u1, base)...)
	if r := get(t, s, "acme", d1); r.Status != "CLOSED" || !r.IsSignedAndSealed {
		t.Fatalf("replayed after the erasure: %#v", r)
	}
	if d, err := s.Document(ctx(t), "acme", d1); err == nil && !d.Content.IsZero() {
		t.Fatalf("a document kept after the erasure: %#v", d)
	}
	f.assertNoDocument("acme", d1)
	// So does a sealed event whose personal part the event store erased (Opening hands it on
	// without one).
	sum := sha256.Sum256(pdf)
	f.handle(f.requested("acme", d2, col2, u2, base), f.sent("acme", d2, base), f.signed("acme", d2, base.Add(time.Minute)),
		f.append("acme", d2, base.Add(2*time.Minute), cancellation.Sealed{SealedAt: base.Add(2 * time.Minute),
			SHA256: hex.EncodeToString(sum[:]), Size: len(pdf)}))
	if r := get(t, s, "acme", d2); !r.IsSignedAndSealed {
		t.Fatalf("sealed without its document: %#v", r)
	}
	f.assertNoDocument("acme", d2)
}

// testProjectorMetrics: every status change is counted once, by company and status, however often
// it is delivered; the time to the signature is observed once, from the sending.
func testProjectorMetrics(t *testing.T, s cancellations.Store) {
	log := eventlog.New(t)
	m := cancellations.Metrics{
		Statuses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "statuses"}, []string{"company", "status"}),
		Signature: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "signature", Buckets: []float64{60, 600, 3600}},
			[]string{"company"}),
	}
	f := &fixture{t: t, log: log, keys: keystore.NewMemory(), s: s}
	f.p = cancellations.NewProjector(log.Registry(), s, f.keys, m)
	batch := f.life("acme", d1, col1, u1, base) // sent at +2 s, signed at +60 s: 58 s
	batch = append(batch, f.append("acme", d1, base.Add(time.Hour), cancellation.ProviderNotified{At: base.Add(time.Hour), EventID: "e"}))
	batch = append(batch, f.requested("acme", d2, col1, u1, base), f.sent("acme", d2, base),
		f.append("acme", d2, base.Add(time.Minute), cancellation.Rejected{At: base.Add(time.Minute)}))
	f.handle(batch...)
	f.handle(batch...) // redelivered
	f.handle(batch[3:]...)
	for status, want := range map[string]float64{"PREPARATION": 2, "PENDING": 2, "CLOSED": 1, "REJECTED": 1, "CANCELED": 0} {
		if got := counted(t, m.Statuses.WithLabelValues(comp, status)); got != want {
			t.Errorf("%s counted %v times, want %v", status, got, want)
		}
	}
	var h dto.Metric
	if err := m.Signature.WithLabelValues(comp).(prometheus.Metric).Write(&h); err != nil {
		t.Fatal(err)
	}
	if got := h.GetHistogram(); got.GetSampleCount() != 1 || got.GetSampleSum() != 58 {
		t.Fatalf("time to signature: %d observations of %v s in all, want one of 58 s", got.GetSampleCount(), got.GetSampleSum())
	}
}

// counted is a counter's value.
func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue()
}

// testReaderPort reads through the query side's port: every field the endpoints need, and the
// port's own not-found error (never the store's) for an unknown cancellation and another
// tenant's; another tenant's collection lists nothing.
func testReaderPort(t *testing.T, s cancellations.Store) {
	in := full(d1, 5)
	upsert(t, s, in, row(d2, "globex", col2, u2, "PREPARATION", 0, 0), row(d3, "acme", col1, "", "PENDING", 1, 2))
	var reader query.CancellationReader = cancellations.NewReader(s, suiteKeys)
	got, err := reader.Cancellation(ctx(t), "acme", d1)
	if err != nil {
		t.Fatal(err)
	}
	r := stored(in)
	want := query.CancellationView{DocumentID: d1, Tenant: "acme", CollectionID: col1, UserUUID: u1, Company: comp,
		InsuranceID: "ins-" + d1, Status: "CLOSED", IsSignedAndSealed: true, CreatedAt: r.RequestedAt, SignedAt: &r.SignedAt,
		UpdatedAt: r.UpdatedAt}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("view\n got %#v\nwant %#v", got, want)
	}
	for _, tc := range [][2]string{{"acme", d2}, {"globex", d1}, {"acme", "missing"}} {
		if _, err := reader.Cancellation(ctx(t), tc[0], tc[1]); !errors.Is(err, query.ErrNotFound) {
			t.Fatalf("Cancellation(%s, %s): %v, want query.ErrNotFound", tc[0], tc[1], err)
		}
		if _, err := reader.SignedDocument(ctx(t), tc[0], tc[1]); !errors.Is(err, query.ErrNotFound) {
			t.Fatalf("SignedDocument(%s, %s): %v, want query.ErrNotFound", tc[0], tc[1], err)
		}
	}
	list, err := reader.CollectionCancellations(ctx(t), "acme", col1)
	if err != nil || len(list) != 2 || !reflect.DeepEqual(list[0], want) || list[1].DocumentID != d3 || list[1].SignedAt != nil {
		t.Fatalf("CollectionCancellations = %#v, %v", list, err)
	}
	for _, tc := range [][2]string{{"globex", col1}, {"acme", col2}, {"acme", "missing"}} {
		if list, err := reader.CollectionCancellations(ctx(t), tc[0], tc[1]); err != nil || len(list) != 0 {
			t.Fatalf("CollectionCancellations(%s, %s) = %v, %v; want none", tc[0], tc[1], list, err)
		}
	}
}

// testReaderSignedDocument: a document opens with its keys; an erased subject's is
// query.ErrNoSignedDocument; a lost key is an error of its own, never an absence.
func testReaderSignedDocument(t *testing.T, s cancellations.Store) {
	keys := keystore.NewMemory()
	for _, r := range []cancellations.Row{row(d1, "acme", col1, u1, "CLOSED", 0, 4), row(d2, "acme", col2, u2, "CLOSED", 0, 4)} {
		r.IsSignedAndSealed = true
		upsert(t, s, r)
		upsertDocs(t, s, cancellations.Document{DocumentID: r.DocumentID, Tenant: "acme",
			Content: sealDoc(t, keys, r.CollectionID, r.UserUUID, pdf), Revision: 4})
	}
	reader := cancellations.NewReader(s, keys)
	if got, err := reader.SignedDocument(ctx(t), "acme", d1); err != nil || !bytes.Equal(got, pdf) {
		t.Fatalf("SignedDocument = %q, %v", got, err)
	}
	if err := keys.Destroy(ctx(t), domain.UserSubject(u1)); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.SignedDocument(ctx(t), "acme", d1); !errors.Is(err, query.ErrNoSignedDocument) {
		t.Fatalf("erased subject: %v", err)
	}
	_, err := cancellations.NewReader(s, keystore.NewMemory()).SignedDocument(ctx(t), "acme", d2)
	if !errors.Is(err, eventschema.ErrKeyNotFound) || errors.Is(err, query.ErrNoSignedDocument) || errors.Is(err, query.ErrNotFound) {
		t.Fatalf("a lost key: %v", err)
	}
	// A row marked sealed whose document the store does not have reads as none.
	sealedRow := row(d3, "acme", col1, u1, "CLOSED", 0, 4)
	sealedRow.IsSignedAndSealed = true
	upsert(t, s, sealedRow)
	if _, err := reader.SignedDocument(ctx(t), "acme", d3); !errors.Is(err, query.ErrNoSignedDocument) {
		t.Fatalf("no document row: %v", err)
	}
}

func testReaderListNeedingProvider(t *testing.T, s cancellations.Store) {
	sealedRow := row("k-4", "acme", col1, u1, "CLOSED", 0, 3)
	sealedRow.IsSignedAndSealed = true
	upsert(t, s, row("k-1", "acme", col1, u1, "PENDING", 1, 0), row("k-2", "globex", col2, u2, "PREPARATION", 2, 0),
		row("k-3", "acme", col1, u1, "CANCELED", 0, 0), sealedRow, row("k-5", "acme", col1, u1, "CLOSED", 3, 2))
	var open openCancellations = cancellations.NewReader(s, suiteKeys)
	ids, last, err := open.ListNeedingProvider(ctx(t), time.Time{}, "", 0)
	if err != nil || !slices.Equal(ids, []string{"k-1", "k-2", "k-5"}) || !last.Equal(base.Add(3*time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("ListNeedingProvider = %v, %v, %v", ids, last, err)
	}
	if ids, last, err = open.ListNeedingProvider(ctx(t), time.Time{}, "", 1); err != nil || !slices.Equal(ids, []string{"k-1"}) {
		t.Fatalf("ListNeedingProvider(1) = %v, %v", ids, err)
	}
	// The page after it starts at the id and the time it returned.
	if ids, last, err = open.ListNeedingProvider(ctx(t), last, ids[0], 1); err != nil || !slices.Equal(ids, []string{"k-2"}) {
		t.Fatalf("ListNeedingProvider(1) after k-1 = %v, %v", ids, err)
	}
	if ids, _, err = open.ListNeedingProvider(ctx(t), last, ids[0], 0); err != nil || !slices.Equal(ids, []string{"k-5"}) {
		t.Fatalf("ListNeedingProvider after k-2 = %v, %v", ids, err)
	}
	if ids, last, err = open.ListNeedingProvider(ctx(t), base.Add(3*time.Minute), "k-5", 1); err != nil || len(ids) != 0 || !last.IsZero() {
		t.Fatalf("ListNeedingProvider after the newest = %v, %v, %v", ids, last, err)
	}
}

// openCancellations is the connectors' port (connectors/worker.OpenCancellations), restated
// here as the worker declares it: the reader must satisfy it by its shape alone.
type openCancellations interface {
	ListNeedingProvider(ctx context.Context, afterRequestedAt time.Time, afterID string, limit int) (ids []string, lastRequestedAt time.Time, err error)
}

// testReaderUserCancellationIDs lists every cancellation of a user, final ones included, through
// pages, for its erasure to withdraw those the event store shows live; another tenant's and
// another user's are not listed.
func testReaderUserCancellationIDs(t *testing.T, s cancellations.Store) {
	var rows []cancellations.Row
	var want []string
	statuses := cancellation.AllStatuses()
	for i := range 1203 { // past two of the reader's pages
		id := fmt.Sprintf("k-%04d", i)
		rows = append(rows, row(id, "acme", []string{col1, col2}[i%2], u1, string(statuses[i%len(statuses)]), i, 0))
		want = append(want, id) // oldest first
	}
	rows = append(rows, row("k-other-user", "acme", col1, u2, "PREPARATION", 1, 0), row("k-other-tenant", "globex", col1, u1, "PREPARATION", 1, 0))
	upsert(t, s, rows...)
	reader := cancellations.NewReader(s, suiteKeys)
	got, err := reader.UserCancellationIDs(ctx(t), "acme", u1)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("UserCancellationIDs = %d ids (%v), want %d", len(got), err, len(want))
	}
	if none, err := reader.UserCancellationIDs(ctx(t), "acme", "u-none"); err != nil || len(none) != 0 {
		t.Fatalf("a user without cancellations: %v, %v", none, err)
	}
	if none, err := reader.UserCancellationIDs(ctx(t), "initech", u1); err != nil || len(none) != 0 {
		t.Fatalf("another tenant: %v, %v", none, err)
	}
}
