// Package statustest is the contract suite of the collection-status read model. Every Store
// adapter runs it; it covers the store on its own and the Projector writing through it.
package statustest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// Open returns a fresh, empty store for one test.
type Open = func(t *testing.T) collectionstatus.Store

// Run runs the whole suite against the adapter that open builds.
func Run(t *testing.T, open Open) {
	readdbtest.Suite[collectionstatus.Store]{
		{"RoundTripEveryField", testRoundTrip},
		{"ExtraInformationNilEmptyPresent", testExtraInformation},
		{"GetMany", testGetMany},
		{"StaleRevisionIgnored", testStaleRevision},
		{"EqualRevisionIgnored", testEqualRevision},
		{"NewerRevisionReplaces", testNewerRevision},
		{"BatchWithSeveralRevisionsOfOneRow", testBatchDuplicates},
		{"TenantIsolation", testTenantIsolation},
		{"ListNonFinal", testListNonFinal},
		{"ListNonFinalPages", testListNonFinalPages},
		{"ListNonFinalAfterAPosition", testListNonFinalAfterAPosition},
		{"Reset", testReset},
		{"ProjectorWholeLifeInOneBatch", testProjectorWholeLife},
		{"ProjectorRedeliveryIsIdempotent", testProjectorRedelivery},
		{"ProjectorOverlappingBatches", testProjectorOverlap},
		{"ProjectorIgnoresOtherCategories", testProjectorOtherCategories},
		{"ProjectorUpcastsOldStarted", testProjectorOldStarted},
		{"ProjectorUpcastsOldInstructions", testProjectorOldInstructions},
		{"StatusDetailsRoundTrip", testDetailsRoundTrip},
		{"StatusDetailsReplacedAndCleared", testDetailsReplaced},
		{"ProjectorStatusDetails", testProjectorDetails},
		{"ProjectorAcceptedInputKeepsTheQRSecret", testProjectorAcceptedInputKeepsTheQRSecret},
		{"StoredRowsHoldNoPlainPersonalData", testStoredRowsHoldNoPlainPersonalData},
		{"ReaderErasedSubjectAndLostKey", testReaderErasedAndLost},
		{"ReaderGetThroughItsPort", testReaderGet},
		{"ReaderListNonFinal", testReaderListNonFinal},
		{"ReaderCollectionUser", testReaderCollectionUser},
		{"ReaderReadYourWrites", testReaderReadYourWrites},
		{"ListByUser", testListByUser},
		{"ListByUserPages", testListByUserPages},
		{"ProjectorListByUser", testProjectorListByUser},
		{"ReaderListByUser", testReaderListByUser},
		{"ErasePersonal", testErasePersonal},
		{"ProjectorErasesOnUserDeleted", testProjectorErasesOnUserDeleted},
		{"ReaderUserNonFinalCollectionIDs", testReaderUserNonFinalCollectionIDs},
	}.Run(t, open)
}

func ctx(t *testing.T) context.Context { return readdbtest.Context(t) }

// suiteKeys seals and opens the rows' personal parts in every test of the suite.
var suiteKeys = keystore.NewMemory()

// sealed is a status's personal part as the projector stores it.
func sealed(r collectionstatus.Row, personal collection.StatusPersonal) []byte {
	plain, err := json.Marshal(personal)
	if err != nil {
		panic(err)
	}
	out, err := eventschema.Seal(context.Background(), suiteKeys, collection.DataSubject(r.CollectionID, r.UserUUID), plain)
	if err != nil {
		panic(err)
	}
	return out
}

// opened is a row's personal part, opened.
func opened(t *testing.T, r collectionstatus.Row) collection.StatusPersonal {
	t.Helper()
	p, erased, err := collectionstatus.OpenPersonal(context.Background(), suiteKeys, r.Personal)
	if err != nil || erased {
		t.Fatalf("open the personal part of %s: erased %v, %v", r.CollectionID, erased, err)
	}
	return p
}

// base is a fixed instant with sub-millisecond digits, to prove the store keeps ms precision.
var base = time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

func row(id, tenant, status string, rev uint64) collectionstatus.Row {
	return collectionstatus.Row{
		CollectionID: id, Tenant: tenant, Company: "se-demo-insurer", Product: "INSURANCE",
		LoginMethod: "SWEDISH_MOBILE_EID_SAME_DEVICE", APIVersion: "2026-04-01",
		UserUUID: "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b", Status: status,
		CreatedAt: base, UpdatedAt: base.Add(time.Duration(rev) * time.Second), Revision: rev,
	}
}

// stored is what a row looks like after a round trip: times in UTC at ms precision, except the
// EID order's start and the deadline, which keep full precision (in UTC); empty detail lists
// come back nil.
func stored(r collectionstatus.Row) collectionstatus.Row {
	r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Millisecond)
	r.UpdatedAt = r.UpdatedAt.UTC().Truncate(time.Millisecond)
	if r.EIDOrder != nil {
		order := *r.EIDOrder
		order.StartedAt = order.StartedAt.UTC()
		r.EIDOrder = &order
	}
	if r.Deadline != nil {
		d := *r.Deadline
		d.DueAt = d.DueAt.UTC()
		r.Deadline = &d
	}
	if len(r.RequiredInputTypes) == 0 {
		r.RequiredInputTypes = nil
	}
	return r
}

func upsert(t *testing.T, s collectionstatus.Store, rows ...collectionstatus.Row) {
	t.Helper()
	if err := s.Upsert(ctx(t), rows); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func get(t *testing.T, s collectionstatus.Store, tenant, id string) collectionstatus.Row {
	t.Helper()
	r, err := s.Get(ctx(t), tenant, id)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", tenant, id, err)
	}
	return r
}

func assertRow(t *testing.T, got, want collectionstatus.Row) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("row mismatch\n got: %#v\nwant: %#v", got, want)
	}
}

func testRoundTrip(t *testing.T, s collectionstatus.Store) {
	in := row("c-1", "acme", "WAITING_FOR_USER_ACTION", 7)
	in.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	in.UpdatedAt = in.CreatedAt.Add(90*time.Second + 123*time.Microsecond)
	in.ExtraInformation = map[string]any{
		"SWEDISH_MOBILE_EID_AUTOSTART_TOKEN": "tok-1",
		"REQUIRED_INPUT_TYPES":               []any{"EMAIL", "MOBILE_PHONE_NUMBER"},
		"INSTRUCTIONS": []any{map[string]any{
			"requestId": "r1", "method": "GET", "url": "https://example.test/a?b=1&c=<d>",
			"headers": map[string]any{"Accept": "application/json"},
		}},
		"ATTEMPTS": 3.0,
		"MESSAGE":  "Öppna BankID-appen – 'citat' \"dubbel\" \\ snedstreck",
	}
	upsert(t, s, in)
	got := get(t, s, "acme", "c-1")
	want := stored(in)
	if got.CreatedAt.Location() != time.UTC || got.UpdatedAt.Location() != time.UTC {
		t.Errorf("times not in UTC: %v, %v", got.CreatedAt.Location(), got.UpdatedAt.Location())
	}
	if !got.CreatedAt.Equal(time.Date(2026, 1, 2, 2, 4, 5, 678_000_000, time.UTC)) {
		t.Errorf("CreatedAt = %v, want ms precision of the input", got.CreatedAt)
	}
	assertRow(t, got, want)

	// Ids and tenants are bound into queries by some adapters: quoting must hold.
	odd := row(`c-'quote"\back`, `t'en\ant`, "RUNNING", 1)
	upsert(t, s, odd)
	assertRow(t, get(t, s, odd.Tenant, odd.CollectionID), stored(odd))
	many, err := s.GetMany(ctx(t), []string{odd.CollectionID, "c-1"})
	if err != nil || len(many) != 2 {
		t.Fatalf("GetMany with quotes = %v, %v", many, err)
	}
	if _, err := s.Get(ctx(t), "acme", odd.CollectionID); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get with another tenant: %v", err)
	}
}

func testExtraInformation(t *testing.T, s collectionstatus.Store) {
	none := row("c-nil", "acme", "RUNNING", 0)
	empty := row("c-empty", "acme", "LOGIN", 1)
	empty.ExtraInformation = map[string]any{}
	present := row("c-present", "acme", "LOGIN", 2)
	present.ExtraInformation = map[string]any{"MESSAGE": "hej"}
	upsert(t, s, none, empty, present)

	if got := get(t, s, "acme", "c-nil"); got.ExtraInformation != nil {
		t.Errorf("nil extra information came back as %#v", got.ExtraInformation)
	}
	if got := get(t, s, "acme", "c-empty"); got.ExtraInformation == nil || len(got.ExtraInformation) != 0 {
		t.Errorf("empty extra information came back as %#v, want an empty non-nil map", got.ExtraInformation)
	}
	assertRow(t, get(t, s, "acme", "c-present"), stored(present))

	// A newer row without extra information clears it.
	cleared := present
	cleared.ExtraInformation, cleared.Status, cleared.Revision = nil, "COLLECTING", 3
	upsert(t, s, cleared)
	assertRow(t, get(t, s, "acme", "c-present"), stored(cleared))
}

func testGetMany(t *testing.T, s collectionstatus.Store) {
	got, err := s.GetMany(ctx(t), nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("GetMany(nil) = %v, %v; want empty", got, err)
	}
	a, b := row("c-a", "acme", "RUNNING", 0), row("c-b", "other", "LOGIN", 4)
	upsert(t, s, a, b)
	got, err = s.GetMany(ctx(t), []string{"c-a", "c-b", "c-unknown"})
	if err != nil {
		t.Fatalf("GetMany: %v", err)
	}
	want := map[string]collectionstatus.Row{"c-a": stored(a), "c-b": stored(b)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetMany = %#v\nwant %#v", got, want)
	}
	// Many ids at once (more than one IN chunk).
	var rows []collectionstatus.Row
	var ids []string
	for i := range 1203 {
		id := fmt.Sprintf("bulk-%04d", i)
		rows = append(rows, row(id, "acme", "RUNNING", uint64(i%5)))
		ids = append(ids, id)
	}
	upsert(t, s, rows...)
	got, err = s.GetMany(ctx(t), ids)
	if err != nil {
		t.Fatalf("GetMany bulk: %v", err)
	}
	if len(got) != len(ids) {
		t.Fatalf("GetMany bulk returned %d rows, want %d", len(got), len(ids))
	}
	if r := got["bulk-1202"]; r.Revision != 1202%5 {
		t.Fatalf("bulk row revision = %d", r.Revision)
	}
}

func testStaleRevision(t *testing.T, s collectionstatus.Store) {
	current := row("c-1", "acme", "COLLECTING", 5)
	upsert(t, s, current)
	old := row("c-1", "acme", "LOGIN", 3)
	old.ExtraInformation = map[string]any{"MESSAGE": "old"}
	upsert(t, s, old)
	assertRow(t, get(t, s, "acme", "c-1"), stored(current))
}

func testEqualRevision(t *testing.T, s collectionstatus.Store) {
	first := row("c-1", "acme", "COLLECTING", 5)
	upsert(t, s, first)
	same := row("c-1", "acme", "FAILED", 5)
	same.ExtraInformation = map[string]any{"MESSAGE": "must not win"}
	upsert(t, s, same)
	assertRow(t, get(t, s, "acme", "c-1"), stored(first))
	// Revision 0 (collection.started) is a revision like any other.
	zero := row("c-0", "acme", "RUNNING", 0)
	upsert(t, s, zero)
	upsert(t, s, row("c-0", "acme", "FAILED", 0))
	assertRow(t, get(t, s, "acme", "c-0"), stored(zero))
}

func testNewerRevision(t *testing.T, s collectionstatus.Store) {
	upsert(t, s, row("c-1", "acme", "RUNNING", 0))
	next := row("c-1", "acme", "COMPLETED", 9)
	upsert(t, s, next)
	assertRow(t, get(t, s, "acme", "c-1"), stored(next))
}

func testBatchDuplicates(t *testing.T, s collectionstatus.Store) {
	a5 := row("c-1", "acme", "LOGIN", 5)
	a7 := row("c-1", "acme", "COLLECTING", 7)
	a7dup := row("c-1", "acme", "FAILED", 7)
	a6 := row("c-1", "acme", "TWO_FACTOR_PENDING", 6)
	upsert(t, s, a5, a7, a7dup, a6)
	assertRow(t, get(t, s, "acme", "c-1"), stored(a7))
}

func testTenantIsolation(t *testing.T, s collectionstatus.Store) {
	upsert(t, s, row("c-acme", "acme", "RUNNING", 0), row("c-other", "other", "RUNNING", 0))
	if _, err := s.Get(ctx(t), "other", "c-acme"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get of another tenant's collection: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx(t), "acme", "c-unknown"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get of an unknown collection: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx(t), "", "c-acme"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get with an empty tenant: err = %v, want ErrNotFound", err)
	}
	if got := get(t, s, "other", "c-other"); got.Tenant != "other" {
		t.Fatalf("Get returned tenant %q", got.Tenant)
	}
}

func testListNonFinal(t *testing.T, s collectionstatus.Store) {
	at := func(r collectionstatus.Row, minutes int) collectionstatus.Row {
		r.CreatedAt = base.Add(time.Duration(minutes) * time.Minute)
		return r
	}
	running := at(row("c-running", "acme", "RUNNING", 0), 3)
	login := at(row("c-login", "other", "LOGIN", 2), 1)
	collecting := at(row("c-collecting", "acme", "COLLECTING", 4), 2)
	completed := at(row("c-completed", "acme", "COMPLETED", 6), 0)
	timeout := at(row("c-timeout", "acme", "COLLECTION_INPUT_TIMEOUT", 3), 4)
	// A collection that was non-final at an older revision and is final now must not appear.
	finishing := at(row("c-finishing", "acme", "COLLECTING", 4), 5)
	upsert(t, s, running, login, collecting, completed, timeout, finishing)
	finished := finishing
	finished.Status, finished.Revision = "FAILED", 5
	upsert(t, s, finished)

	got, err := s.ListNonFinal(ctx(t), nil, 0)
	if err != nil {
		t.Fatalf("ListNonFinal: %v", err)
	}
	want := []collectionstatus.Row{stored(login), stored(collecting), stored(running)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListNonFinal = %s\nwant %s", ids(got), ids(want))
	}
	got, err = s.ListNonFinal(ctx(t), nil, 2)
	if err != nil {
		t.Fatalf("ListNonFinal(2): %v", err)
	}
	if !reflect.DeepEqual(got, want[:2]) {
		t.Fatalf("ListNonFinal(2) = %s\nwant %s", ids(got), ids(want[:2]))
	}
	for _, r := range got {
		st, err := collection.ParseStatus(r.Status)
		if err != nil || st.IsFinal() {
			t.Fatalf("ListNonFinal returned %s in status %s", r.CollectionID, r.Status)
		}
	}
}

func ids(rows []collectionstatus.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s(%s@%d)", r.CollectionID, r.Status, r.Revision)
	}
	return out
}

func testReset(t *testing.T, s collectionstatus.Store) {
	upsert(t, s, row("c-1", "acme", "COLLECTING", 5))
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if _, err := s.Get(ctx(t), "acme", "c-1"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get after Reset: err = %v, want ErrNotFound", err)
	}
	if got, err := s.ListNonFinal(ctx(t), nil, 0); err != nil || len(got) != 0 {
		t.Fatalf("ListNonFinal after Reset = %v, %v", ids(got), err)
	}
	// A rebuild writes revisions from 0 again.
	again := row("c-1", "acme", "RUNNING", 0)
	upsert(t, s, again)
	assertRow(t, get(t, s, "acme", "c-1"), stored(again))
}

// life appends a whole collection's life to log and returns its envelopes and the row it must
// project to.
func life(log *eventlog.Log, tenant, id string, t0 time.Time) ([]eventschema.Envelope, collectionstatus.Row) {
	stream := collection.StreamName(id)
	var envs []eventschema.Envelope
	add := func(at time.Duration, ev interface{ EventType() string }) {
		envs = append(envs, log.Append(tenant, stream, t0.Add(at), ev))
	}
	add(0, collection.Started{
		CollectionID: id, ClientID: tenant, Company: "se-demo-insurer", Product: collection.ProductInsurance,
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01",
		UserUUID: "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b", StartedAt: t0,
		Personal: &collection.StartedPerson{PersonalNumber: "199001010017", AccountOwnerName: "Tolvan Tolvansson", RequestHash: "9f2c"},
	})
	add(100*time.Millisecond, collection.Claimed{WorkerID: "w1", ClaimedAt: t0.Add(100 * time.Millisecond)})
	add(time.Second, collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusLogin,
		ChangedAt: t0.Add(time.Second)})
	add(2*time.Second, collection.StatusChanged{From: collection.StatusLogin, To: collection.StatusWaitingForUserAction,
		ExtraInformation: map[string]any{"SWEDISH_MOBILE_EID_ANIMATED_QR_DATA": "bankid.1.2.3", "MESSAGE": "Scan"},
		ChangedAt:        t0.Add(2 * time.Second)})
	add(5*time.Second, collection.StatusChanged{From: collection.StatusWaitingForUserAction, To: collection.StatusCollecting,
		ChangedAt: t0.Add(5 * time.Second)})
	add(7*time.Second, collection.InsurancesCollected{CollectedAt: t0.Add(7 * time.Second), InsuranceCount: 1,
		Personal: &collection.InsuranceRecords{Insurances: []collection.Insurance{{ID: "ins-1", InsuranceType: "HOME"}},
			HolderNames: map[string]string{"ins-1": "Tolvan Tolvansson"}}})
	add(8*time.Second, collection.StatusChanged{From: collection.StatusCollecting, To: collection.StatusCompleted,
		ExtraInformation: map[string]any{"MESSAGE": "Done"}, ChangedAt: t0.Add(8 * time.Second)})
	want := collectionstatus.Row{
		CollectionID: id, Tenant: tenant, Company: "se-demo-insurer", Product: "INSURANCE",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01",
		UserUUID: "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b", Status: "COMPLETED",
		ExtraInformation: map[string]any{"MESSAGE": "Done"},
		CreatedAt:        t0.Truncate(time.Millisecond), UpdatedAt: t0.Add(8 * time.Second).Truncate(time.Millisecond),
		Revision: 6,
	}
	return envs, want
}

func handle(t *testing.T, p *collectionstatus.Projector, batch []eventschema.Envelope) {
	t.Helper()
	if err := p.Handle(ctx(t), batch); err != nil {
		t.Fatalf("Handle: %v", err)
	}
}

func testProjectorWholeLife(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	p := collectionstatus.NewProjector(log.Registry(), s, suiteKeys)
	if p.Name() != collectionstatus.ProjectorName {
		t.Fatalf("Name = %q", p.Name())
	}
	envs, want := life(log, "acme", "c-life", base)
	handle(t, p, envs)
	assertRow(t, get(t, s, "acme", "c-life"), want)
	if _, err := s.Get(ctx(t), "other", "c-life"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("other tenant sees the collection: %v", err)
	}
	if got, _ := s.ListNonFinal(ctx(t), nil, 0); len(got) != 0 {
		t.Fatalf("completed collection listed as non-final: %v", ids(got))
	}
}

func testProjectorRedelivery(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	p := collectionstatus.NewProjector(log.Registry(), s, suiteKeys)
	envs, want := life(log, "acme", "c-1", base)
	other, wantOther := life(log, "other", "c-2", base.Add(time.Minute))
	batch := append(append([]eventschema.Envelope{}, envs...), other...)
	handle(t, p, batch)
	handle(t, p, batch)
	assertRow(t, get(t, s, "acme", "c-1"), want)
	assertRow(t, get(t, s, "other", "c-2"), wantOther)
	// An old prefix delivered late (a consumer that lost its offsets) moves nothing back.
	handle(t, p, envs[:4])
	assertRow(t, get(t, s, "acme", "c-1"), want)
	// Event by event, then again in reverse: still the same.
	for _, e := range envs {
		handle(t, p, []eventschema.Envelope{e})
	}
	for i := len(envs) - 1; i >= 0; i-- {
		handle(t, p, []eventschema.Envelope{envs[i]})
	}
	assertRow(t, get(t, s, "acme", "c-1"), want)
}

func testProjectorOverlap(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	p := collectionstatus.NewProjector(log.Registry(), s, suiteKeys)
	envs, want := life(log, "acme", "c-1", base)

	handle(t, p, envs[:4]) // started … waiting for user action
	mid := get(t, s, "acme", "c-1")
	if mid.Status != "WAITING_FOR_USER_ACTION" || mid.Revision != 3 ||
		!reflect.DeepEqual(mid.ExtraInformation, map[string]any{"SWEDISH_MOBILE_EID_ANIMATED_QR_DATA": "bankid.1.2.3", "MESSAGE": "Scan"}) {
		t.Fatalf("after 4 events: %#v", mid)
	}
	if got, _ := s.ListNonFinal(ctx(t), nil, 0); len(got) != 1 || got[0].CollectionID != "c-1" {
		t.Fatalf("running collection not listed as non-final: %v", ids(got))
	}

	handle(t, p, envs[2:5]) // overlaps by two, ends at COLLECTING, which has no extra information
	mid = get(t, s, "acme", "c-1")
	if mid.Status != "COLLECTING" || mid.Revision != 4 || mid.ExtraInformation != nil {
		t.Fatalf("after 5 events: %#v", mid)
	}

	handle(t, p, envs[5:6]) // insurances collected: only the revision and time move
	mid = get(t, s, "acme", "c-1")
	if mid.Status != "COLLECTING" || mid.Revision != 5 || !mid.UpdatedAt.Equal(envs[5].OccurredAt) {
		t.Fatalf("after 6 events: %#v", mid)
	}

	handle(t, p, envs)
	assertRow(t, get(t, s, "acme", "c-1"), want)
}

func testProjectorOtherCategories(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	p := collectionstatus.NewProjector(log.Registry(), s, suiteKeys)
	batch := []eventschema.Envelope{
		log.Append("acme", client.StreamName("acme"), base, client.Registered{ClientID: "acme", Name: "Acme AB", RegisteredAt: base}),
		log.Append("acme", client.StreamName("acme"), base, client.APIKeyIssued{KeyID: "k1", KeyHash: client.HashAPIKey("secret"), IssuedAt: base}),
	}
	handle(t, p, batch)
	got, err := s.GetMany(ctx(t), []string{"acme", "client-acme"})
	if err != nil || len(got) != 0 {
		t.Fatalf("client events produced rows: %v, %v", got, err)
	}
	// A status change whose started event never arrived creates no half row.
	orphan := log.Append("acme", collection.StreamName("c-orphan"), base, collection.StatusChanged{
		From: collection.StatusRunning, To: collection.StatusLogin, ChangedAt: base})
	handle(t, p, []eventschema.Envelope{orphan})
	if _, err := s.Get(ctx(t), "acme", "c-orphan"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("orphan status change created a row: %v", err)
	}
}

// testProjectorOldStarted feeds a collection.started written in schema version 1, which the
// projector must upcast on read.
func testProjectorOldStarted(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	p := collectionstatus.NewProjector(log.Registry(), s, suiteKeys)
	started := log.AppendRaw(eventschema.Envelope{
		Type: collection.EventStarted, SchemaVersion: 1, Tenant: "acme", Stream: collection.StreamName("c-v1"),
		OccurredAt: base.Truncate(time.Millisecond),
		Payload: []byte(`{"collectionId":"c-v1","clientId":"acme","company":"se-demo-insurer",` +
			`"loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK","apiVersion":"2025-01-01",` +
			`"startedAt":"2026-01-02T03:04:05.678Z","input":{"SWEDISH_PERSONAL_NUMBER":"199001010017"}}`),
	})
	handle(t, p, []eventschema.Envelope{started})
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	assertRow(t, get(t, s, "acme", "c-v1"), collectionstatus.Row{
		CollectionID: "c-v1", Tenant: "acme", Company: "se-demo-insurer", Product: "INSURANCE",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", APIVersion: "2025-01-01", Status: "RUNNING",
		CreatedAt: at, UpdatedAt: at, Revision: 0,
	})
}

// testProjectorOldInstructions: a collection.status-changed of schema version 1 kept its
// instructions in the public part; upcast, they come from the personal part, and the poll must
// still hand them to the client.
func testProjectorOldInstructions(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	p := collectionstatus.NewProjector(log.Registry(), s, suiteKeys)
	stream := collection.StreamName("c-v1")
	started := log.Append("acme", stream, base, collection.Started{CollectionID: "c-v1", ClientID: "acme",
		Company: "se-demo-insurer", Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_SAME_DEVICE",
		APIVersion: "2026-04-01", StartedAt: base})
	changed := log.AppendRaw(eventschema.Envelope{
		Type: collection.EventStatusChanged, SchemaVersion: 1, Tenant: "acme", Stream: stream, OccurredAt: base,
		Payload: []byte(`{"from":"RUNNING","to":"WAITING_FOR_USER_ACTION","message":"m",` +
			`"instructions":[{"requestId":"r1","method":"POST","url":"https://company.example/eid/start",` +
			`"headers":{"Authorization":"Bearer device-token"},"body":"{}"}],` +
			`"changedAt":"2026-01-02T03:04:05.678Z","personal":{"qrStartSecret":"qr-secret"}}`),
	})
	handle(t, p, []eventschema.Envelope{started, changed})
	got := get(t, s, "acme", "c-v1")
	body := "{}"
	want := []collection.Instruction{{RequestID: "r1", Method: "POST", URL: "https://company.example/eid/start",
		Headers: map[string]string{"Authorization": "Bearer device-token"}, Body: &body}}
	if got.Status != "WAITING_FOR_USER_ACTION" || !reflect.DeepEqual(opened(t, got).Instructions, want) ||
		opened(t, got).QRStartSecret != "qr-secret" || got.Message != "m" {
		t.Fatalf("v1 instructions projected as %#v", got)
	}
}

// withDetails gives a row every status detail, with values that test quoting and precision.
func withDetails(r collectionstatus.Row) collectionstatus.Row {
	body := `{"personalNumber":"19900101-0017","quote":"'\"<>&"}`
	r.RequiredInputTypes = []string{"EMAIL", "MOBILE_PHONE_NUMBER"}
	instructions := []collection.Instruction{
		{RequestID: "r1", Method: "POST", URL: "https://company.example/eid/start?x=1&y='2'",
			Headers: map[string]string{"Content-Type": "application/json", "X-Quote": `a"b\c`}, Body: &body},
		{RequestID: "r2", Method: "GET", URL: "https://company.example/eid/collect"},
	}
	r.Message = "Öppna BankID-appen – 'citat' \"dubbel\" \\ snedstreck"
	r.EIDOrder = &collection.EIDOrder{QRStartToken: "67df3917-fa0d-44e5-b327-edcc928297f8",
		AutoStartToken: "7c40b5c9-fa74-49cf-b98c-bfe651f9a7c6",
		StartedAt:      time.Date(2026, 3, 4, 6, 6, 7, 123_456_789, time.FixedZone("CET", 3600))}
	r.Personal = sealed(r, collection.StatusPersonal{Instructions: instructions, QRStartSecret: "d28db9a7-4cde-429e-a983-359be676944c"})
	r.Deadline = &collection.Deadline{Kind: collection.DeadlineEIDOrder, DueAt: time.Date(2026, 3, 4, 5, 6, 37, 987_654_321, time.UTC)}
	return r
}

func testDetailsRoundTrip(t *testing.T, s collectionstatus.Store) {
	in := withDetails(row("c-details", "acme", "WAITING_FOR_USER_ACTION", 3))
	upsert(t, s, in)
	want := stored(in)
	got := get(t, s, "acme", "c-details")
	assertRow(t, got, want)
	if !got.EIDOrder.StartedAt.Equal(in.EIDOrder.StartedAt) || got.EIDOrder.StartedAt.Nanosecond() != 123_456_789 {
		t.Fatalf("EID order start = %v, want %v at full precision", got.EIDOrder.StartedAt, in.EIDOrder.StartedAt)
	}
	many, err := s.GetMany(ctx(t), []string{"c-details"})
	if err != nil {
		t.Fatalf("GetMany: %v", err)
	}
	assertRow(t, many["c-details"], want)
	listed, err := s.ListNonFinal(ctx(t), nil, 0)
	if err != nil || len(listed) != 1 {
		t.Fatalf("ListNonFinal = %v, %v", ids(listed), err)
	}
	assertRow(t, listed[0], want) // the connectors re-arm deadlines from it

	// Empty lists are no lists; a row without details has none.
	empty := row("c-empty-details", "acme", "LOGIN", 1)
	empty.RequiredInputTypes, empty.Personal = []string{}, []byte{}
	upsert(t, s, empty)
	got = get(t, s, "acme", "c-empty-details")
	if got.RequiredInputTypes != nil || got.Personal != nil || got.EIDOrder != nil || got.Deadline != nil ||
		got.Message != "" {
		t.Fatalf("empty details came back as %#v", got)
	}
}

func testDetailsReplaced(t *testing.T, s collectionstatus.Store) {
	first := withDetails(row("c-1", "acme", "WAITING_FOR_USER_ACTION", 3))
	upsert(t, s, first)

	// Another status with other details replaces every one of them.
	next := row("c-1", "acme", "COLLECTION_INPUT_PENDING", 4)
	next.RequiredInputTypes = []string{"EMAIL"}
	next.Message = "Ange din e-post"
	next.Deadline = &collection.Deadline{Kind: collection.DeadlineCollectionInput, DueAt: base.Add(2 * time.Minute)}
	upsert(t, s, next)
	assertRow(t, get(t, s, "acme", "c-1"), stored(next))

	// An older revision with details cannot bring them back.
	upsert(t, s, withDetails(row("c-1", "acme", "WAITING_FOR_USER_ACTION", 2)))
	assertRow(t, get(t, s, "acme", "c-1"), stored(next))

	// A status without details clears them all.
	done := row("c-1", "acme", "COMPLETED", 5)
	upsert(t, s, done)
	got := get(t, s, "acme", "c-1")
	assertRow(t, got, stored(done))
	if got.Personal != nil || got.EIDOrder != nil {
		t.Fatalf("a final status kept the EID order: %#v", got)
	}
}

// testProjectorDetails feeds real encoded events: the status details come from
// collection.status-changed (the QR secret from its personal member), accepted input clears what
// the status asked for, and the next status replaces the rest.
func testProjectorDetails(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	p := collectionstatus.NewProjector(log.Registry(), s, suiteKeys)
	const id = "c-details"
	stream := collection.StreamName(id)
	t0 := base
	appendEv := func(at time.Duration, ev interface{ EventType() string }) eventschema.Envelope {
		return log.Append("acme", stream, t0.Add(at), ev)
	}
	handle(t, p, []eventschema.Envelope{
		appendEv(0, collection.Started{CollectionID: id, ClientID: "acme", Company: "se-demo-insurer",
			Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01",
			StartedAt: t0}),
		appendEv(time.Second, collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusLogin, ChangedAt: t0.Add(time.Second)}),
	})
	order := &collection.EIDOrder{QRStartToken: "qr-token", AutoStartToken: "auto-token", StartedAt: t0.Add(2*time.Second + 345*time.Millisecond)}
	deadline := &collection.Deadline{Kind: collection.DeadlineEIDOrder, DueAt: t0.Add(32 * time.Second)}
	handle(t, p, []eventschema.Envelope{appendEv(2*time.Second, collection.StatusChanged{
		From: collection.StatusLogin, To: collection.StatusWaitingForUserAction, Message: "Öppna BankID-appen",
		EIDOrder: order, Deadline: deadline, ChangedAt: t0.Add(2 * time.Second),
		Personal: &collection.StatusPersonal{QRStartSecret: "qr-secret"}})})
	got := get(t, s, "acme", id)
	if got.Status != "WAITING_FOR_USER_ACTION" || opened(t, got).QRStartSecret != "qr-secret" || got.Message != "Öppna BankID-appen" ||
		!reflect.DeepEqual(got.EIDOrder, &collection.EIDOrder{QRStartToken: "qr-token", AutoStartToken: "auto-token", StartedAt: order.StartedAt.UTC()}) ||
		got.Deadline == nil || *got.Deadline != (collection.Deadline{Kind: collection.DeadlineEIDOrder, DueAt: deadline.DueAt.UTC()}) ||
		got.RequiredInputTypes != nil || opened(t, got).Instructions != nil {
		t.Fatalf("waiting for user action: %#v", got)
	}

	instructions := []collection.Instruction{{RequestID: "r1", Method: "POST", URL: "https://company.example/login"}}
	handle(t, p, []eventschema.Envelope{appendEv(5*time.Second, collection.StatusChanged{
		From: collection.StatusWaitingForUserAction, To: collection.StatusContactFormPending,
		RequiredInputTypes: []string{"EMAIL", "MOBILE_PHONE_NUMBER"}, InstructionRequestIDs: []string{"r1"},
		Deadline:  &collection.Deadline{Kind: collection.DeadlineContactForm, DueAt: t0.Add(125 * time.Second)},
		ChangedAt: t0.Add(5 * time.Second), Personal: &collection.StatusPersonal{Instructions: instructions}})})
	got = get(t, s, "acme", id)
	if !reflect.DeepEqual(got.RequiredInputTypes, []string{"EMAIL", "MOBILE_PHONE_NUMBER"}) || !reflect.DeepEqual(opened(t, got).Instructions, instructions) ||
		got.EIDOrder != nil || opened(t, got).QRStartSecret != "" || got.Message != "" || got.Deadline.Kind != collection.DeadlineContactForm {
		t.Fatalf("contact form pending: %#v", got)
	}

	supplied := appendEv(6*time.Second, collection.InputSupplied{Kind: collection.InputKindCollectionInput,
		InputTypes: []string{"EMAIL", "MOBILE_PHONE_NUMBER"}, SuppliedAt: t0.Add(6 * time.Second),
		Personal: &collection.SuppliedValues{Inputs: []collection.Input{{Type: "EMAIL", Value: "a@b.se"}, {Type: "MOBILE_PHONE_NUMBER", Value: "46701234567"}},
			IdempotencyKey: "k", RequestHash: "h"}})
	handle(t, p, []eventschema.Envelope{supplied})
	got = get(t, s, "acme", id)
	if got.Status != "CONTACT_FORM_PENDING" || got.RequiredInputTypes != nil || got.Personal != nil ||
		got.Deadline == nil || got.Revision != supplied.Revision || !got.UpdatedAt.Equal(t0.Add(6*time.Second).Truncate(time.Millisecond)) {
		t.Fatalf("after accepted input: %#v", got)
	}

	handle(t, p, []eventschema.Envelope{appendEv(7*time.Second, collection.StatusChanged{
		From: collection.StatusContactFormPending, To: collection.StatusCollecting, ChangedAt: t0.Add(7 * time.Second)})})
	got = get(t, s, "acme", id)
	if got.Status != "COLLECTING" || got.Deadline != nil || got.Message != "" || got.EIDOrder != nil || got.Personal != nil {
		t.Fatalf("collecting: %#v", got)
	}

	// The whole stream again, in one batch, into a fresh row: the same end state.
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatal(err)
	}
	handle(t, p, log.All())
	assertRow(t, get(t, s, "acme", id), got)
}

// testProjectorAcceptedInputKeepsTheQRSecret: accepted input drops the instructions from the
// sealed personal part and keeps the QR secret.
func testProjectorAcceptedInputKeepsTheQRSecret(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	p := collectionstatus.NewProjector(log.Registry(), s, suiteKeys)
	const id = "c-qr-input"
	stream := collection.StreamName(id)
	instructions := []collection.Instruction{{RequestID: "r1", Method: "POST", URL: "https://company.example/login"}}
	handle(t, p, []eventschema.Envelope{
		log.Append("acme", stream, base, collection.Started{CollectionID: id, ClientID: "acme", Company: "se-demo-insurer",
			Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01",
			StartedAt: base}),
		log.Append("acme", stream, base, collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusWaitingForUserAction,
			InstructionRequestIDs: []string{"r1"}, ChangedAt: base,
			Personal: &collection.StatusPersonal{Instructions: instructions, QRStartSecret: "qr-secret"}}),
		log.Append("acme", stream, base, collection.InputSupplied{Kind: collection.InputKindClientResponses,
			RequestIDs: []string{"r1"}, SuppliedAt: base, Personal: &collection.SuppliedValues{}}),
	})
	got := opened(t, get(t, s, "acme", id))
	if got.Instructions != nil || got.QRStartSecret != "qr-secret" {
		t.Fatalf("after accepted input: %#v", got)
	}
}

// secrets are the personal values the tests below project; no stored column may hold them.
var secrets = []string{"device-token", "qr-secret-0001", "company.example", "199001010017"}

// testStoredRowsHoldNoPlainPersonalData: what the projector stores (every column comes back in
// a Row) holds the instructions and the QR secret only sealed.
func testStoredRowsHoldNoPlainPersonalData(t *testing.T, s collectionstatus.Store) {
	log := eventlog.New(t)
	p := collectionstatus.NewProjector(log.Registry(), s, suiteKeys)
	const id = "c-sealed"
	stream := collection.StreamName(id)
	body := `{"personalNumber":"199001010017"}`
	handle(t, p, []eventschema.Envelope{
		log.Append("acme", stream, base, collection.Started{CollectionID: id, ClientID: "acme", Company: "se-demo-insurer",
			Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01",
			UserUUID: "u-sealed", StartedAt: base}),
		log.Append("acme", stream, base, collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusWaitingForUserAction,
			InstructionRequestIDs: []string{"r1"}, ChangedAt: base,
			Personal: &collection.StatusPersonal{QRStartSecret: "qr-secret-0001", Instructions: []collection.Instruction{{RequestID: "r1",
				Method: "POST", URL: "https://company.example/eid", Headers: map[string]string{"Authorization": "Bearer device-token"}, Body: &body}}}}),
	})
	rows, err := s.GetMany(ctx(t), []string{id})
	if err != nil || len(rows) != 1 {
		t.Fatalf("GetMany = %v, %v", rows, err)
	}
	dump := fmt.Sprintf("%#v %s", rows[id], rows[id].Personal)
	for _, secret := range secrets {
		if strings.Contains(dump, secret) {
			t.Fatalf("the stored row holds %q in plain text: %s", secret, dump)
		}
	}
	if subject := eventschema.SealedSubject(rows[id].Personal); subject != "user-u-sealed" {
		t.Fatalf("sealed under %q, want the collection's user", subject)
	}
	view, err := collectionstatus.NewReader(s, suiteKeys).Get(ctx(t), "acme", id)
	if err != nil || view.QRStartSecret != "qr-secret-0001" || len(view.Instructions) != 1 ||
		view.Instructions[0].Headers["Authorization"] != "Bearer device-token" {
		t.Fatalf("read back: %#v, %v", view, err)
	}
}

// testReaderErasedAndLost: an erased subject's status reads without its personal part, and no
// error; a lost key is an error, never an empty status.
func testReaderErasedAndLost(t *testing.T, s collectionstatus.Store) {
	keys := keystore.NewMemory()
	r := withDetails(row("c-erased", "acme", "WAITING_FOR_USER_ACTION", 3))
	r.UserUUID = "u-erased"
	plain, _ := json.Marshal(collection.StatusPersonal{QRStartSecret: "qr"})
	var err error
	if r.Personal, err = eventschema.Seal(ctx(t), keys, "user-u-erased", plain); err != nil {
		t.Fatal(err)
	}
	lost := r
	lost.CollectionID, lost.UserUUID = "c-lost", "u-lost"
	if lost.Personal, err = eventschema.Seal(ctx(t), keys, "user-u-lost", plain); err != nil {
		t.Fatal(err)
	}
	upsert(t, s, r, lost)
	if err := keys.Destroy(ctx(t), "user-u-erased"); err != nil {
		t.Fatal(err)
	}
	reader := collectionstatus.NewReader(s, keys)
	view, err := reader.Get(ctx(t), "acme", "c-erased")
	if err != nil || view.QRStartSecret != "" || view.Instructions != nil || view.Status != "WAITING_FOR_USER_ACTION" || view.EIDOrder == nil {
		t.Fatalf("erased subject: %#v, %v", view, err)
	}
	if _, err := collectionstatus.NewReader(s, keystore.NewMemory()).Get(ctx(t), "acme", "c-lost"); !errors.Is(err, eventschema.ErrKeyNotFound) ||
		errors.Is(err, query.ErrNotFound) {
		t.Fatalf("a lost key: %v", err)
	}
}

// testReaderGet reads through the query side's port: every field the status endpoint needs, and
// the port's own not-found error (never the store's) for an unknown collection and another
// tenant's.
func testReaderGet(t *testing.T, s collectionstatus.Store) {
	in := withDetails(row("c-1", "acme", "WAITING_FOR_USER_ACTION", 3))
	in.ExtraInformation = map[string]any{"MESSAGE": "hej"}
	upsert(t, s, in, row("c-other", "other", "RUNNING", 0))
	var reader query.StatusReader = collectionstatus.NewReader(s, suiteKeys)
	got, err := reader.Get(ctx(t), "acme", "c-1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	r := stored(in)
	want := query.StatusView{
		CollectionID: r.CollectionID, Tenant: r.Tenant, Company: r.Company, Product: r.Product,
		LoginMethod: r.LoginMethod, APIVersion: r.APIVersion, UserUUID: r.UserUUID, Status: r.Status,
		ExtraInformation: r.ExtraInformation, RequiredInputTypes: r.RequiredInputTypes, Message: r.Message,
		EIDOrder: &query.EIDOrderView{QRStartToken: r.EIDOrder.QRStartToken, AutoStartToken: r.EIDOrder.AutoStartToken,
			StartedAt: r.EIDOrder.StartedAt},
		QRStartSecret: opened(t, r).QRStartSecret, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	for _, in := range opened(t, r).Instructions {
		want.Instructions = append(want.Instructions, query.InstructionView{RequestID: in.RequestID, Method: in.Method,
			URL: in.URL, Headers: in.Headers, Body: in.Body})
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Get = %#v\nwant %#v", got, want)
	}
	for _, ref := range [][2]string{{"acme", "c-unknown"}, {"acme", "c-other"}, {"other", "c-1"}, {"", "c-1"}} {
		_, err := reader.Get(ctx(t), ref[0], ref[1])
		if !errors.Is(err, query.ErrNotFound) {
			t.Fatalf("Get(%s, %s): %v, want query.ErrNotFound", ref[0], ref[1], err)
		}
		if errors.Is(err, readdb.ErrNotFound) {
			t.Fatalf("Get(%s, %s): %v carries the store's not-found error too", ref[0], ref[1], err)
		}
	}
}

// activeCollections is the connectors' port (connectors/worker.ActiveCollections), restated
// here as the worker declares it: the reader must satisfy it by its shape alone.
type activeCollections interface {
	ListNonFinal(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) (ids []string, lastCreatedAt time.Time, err error)
}

func testReaderListNonFinal(t *testing.T, s collectionstatus.Store) {
	at := func(r collectionstatus.Row, minutes int) collectionstatus.Row {
		r.CreatedAt = base.Add(time.Duration(minutes) * time.Minute)
		return r
	}
	upsert(t, s, at(row("c-running", "acme", "RUNNING", 0), 3), at(row("c-login", "other", "LOGIN", 2), 1),
		at(row("c-done", "acme", "COMPLETED", 6), 0), at(row("c-collecting", "acme", "COLLECTING", 4), 2))
	var active activeCollections = collectionstatus.NewReader(s, suiteKeys)
	got, last, err := active.ListNonFinal(ctx(t), time.Time{}, "", 0)
	if want := []string{"c-login", "c-collecting", "c-running"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ListNonFinal = %v, %v; want %v", got, err, want)
	}
	if want := stored(at(row("", "", "", 0), 3)).CreatedAt; !last.Equal(want) {
		t.Fatalf("ListNonFinal's last creation = %v, want c-running's %v", last, want)
	}
	got, last, err = active.ListNonFinal(ctx(t), time.Time{}, "", 1)
	if want := []string{"c-login"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ListNonFinal(1) = %v, %v; want %v", got, err, want)
	}
	// The page after it starts at the id and the time it returned.
	got, last, err = active.ListNonFinal(ctx(t), last, got[0], 1)
	if want := []string{"c-collecting"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ListNonFinal(1) after c-login = %v, %v; want %v", got, err, want)
	}
	got, _, err = active.ListNonFinal(ctx(t), last, got[0], 0)
	if want := []string{"c-running"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ListNonFinal after c-collecting = %v, %v; want %v", got, err, want)
	}
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if got, last, err := active.ListNonFinal(ctx(t), time.Time{}, "", 0); err != nil || len(got) != 0 || !last.IsZero() {
		t.Fatalf("ListNonFinal of an empty read model = %v, %v, %v", got, last, err)
	}
}

// collectionUsers is the command side's port (command/httpcmd.CollectionUsers), restated here as
// httpcmd declares it: the reader must satisfy it by its shape alone.
type collectionUsers interface {
	CollectionUser(ctx context.Context, tenant, collectionID string) (userUUID string, found bool, err error)
}

// testReaderCollectionUser tells whose a collection is: its user, "" for a collection made for
// no user, not found for an unknown collection or another tenant's. It opens nothing, so a key
// store without the row's key (an erased user's collection) still answers.
func testReaderCollectionUser(t *testing.T, s collectionstatus.Store) {
	sealedRow := withDetails(userRow("c-user", "acme", listedUser, 1, 3))
	sealedRow.Personal = sealed(sealedRow, collection.StatusPersonal{QRStartSecret: "qr"})
	upsert(t, s, sealedRow, userRow("c-no-user", "acme", "", 2, 0), userRow("c-other", "other", otherUser, 3, 0))
	for _, keys := range []eventschema.Keys{suiteKeys, keystore.NewMemory()} {
		var users collectionUsers = collectionstatus.NewReader(s, keys)
		for _, tc := range []struct {
			tenant, id, user string
			found            bool
		}{
			{"acme", "c-user", listedUser, true},
			{"acme", "c-no-user", "", true},
			{"acme", "c-other", "", false},
			{"other", "c-user", "", false},
			{"acme", "c-unknown", "", false},
			{"", "c-user", "", false},
		} {
			user, found, err := users.CollectionUser(ctx(t), tc.tenant, tc.id)
			if err != nil || user != tc.user || found != tc.found {
				t.Fatalf("CollectionUser(%s, %s) = %q, %v, %v; want %q, %v", tc.tenant, tc.id, user, found, err, tc.user, tc.found)
			}
		}
	}
}
