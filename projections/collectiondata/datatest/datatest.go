// Package datatest is the contract suite of the collection-data read model. Every Store adapter
// runs it; it covers the store on its own, the Projector writing through it (with real envelopes
// encoded by the schema registry) and the Reader reading from it through the query side's port.
package datatest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// Open returns a fresh, empty store for one test.
type Open = func(t *testing.T) collectiondata.Store

// Run runs the whole suite against the adapter that open builds.
func Run(t *testing.T, open Open) {
	readdbtest.Suite[collectiondata.Store]{
		{"RoundTripEveryField", testRoundTrip},
		{"UnknownStaysAbsent", testUnknownStaysAbsent},
		{"RowWithoutData", testRowWithoutData},
		{"GetMany", testGetMany},
		{"StaleAndEqualRevisionsIgnored", testStaleRevisions},
		{"BatchWithSeveralRevisionsOfOneKey", testBatchDuplicates},
		{"TenantIsolation", testTenantIsolation},
		{"Documents", testDocuments},
		{"Reset", testReset},
		{"ProjectorInsuranceLife", testProjectorInsuranceLife},
		{"ProjectorWealthLife", testProjectorWealthLife},
		{"ProjectorAccumulatesDataEvents", testProjectorAccumulates},
		{"ProjectorRecordsThePSD2ProductsRead", testProjectorPSD2Read},
		{"ProjectorRedeliveryIsIdempotent", testProjectorRedelivery},
		{"ProjectorIgnoresOtherCategoriesAndOrphans", testProjectorIgnores},
		{"ProjectorKeepsUnknownAbsent", testProjectorUnknown},
		{"ProjectorEmptyPersonalValuesAreUnknown", testProjectorEmptyPersonal},
		{"ReaderThroughItsPort", testReader},
		{"ErasePersonal", testErasePersonal},
		{"ProjectorErasesOnUserDeleted", testProjectorErasesOnUserDeleted},
	}.Run(t, open)
}

func ctx(t *testing.T) context.Context { return readdbtest.Context(t) }

// base is a fixed instant with sub-millisecond digits, to prove the store keeps ms precision.
var base = time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

func sp(s string) *string             { return &s }
func fp(f float64) *float64           { return &f }
func bp(b bool) *bool                 { return &b }
func sek(a float64) *collection.Money { return &collection.Money{Amount: a, Currency: "SEK"} }

func row(id, tenant string, rev uint64) collectiondata.Row {
	return collectiondata.Row{
		CollectionID: id, Tenant: tenant, Company: "se-demo-insurer", Product: "INSURANCE",
		Status: "COMPLETED", UpdatedAt: base.Add(time.Duration(rev) * time.Second), Revision: rev,
	}
}

// full is a row with every field of every item set, personal data included.
func full(id, tenant string, rev uint64) collectiondata.Row {
	r := row(id, tenant, rev)
	r.Product, r.Company = "WEALTH", "se-demo-pension"
	r.Content = collectiondata.Content{
		Insurances: []collection.Insurance{{ID: "ins-1", InsuranceType: "HOME", InsuranceNumber: sp("H-1"),
			DisplayName: sp("Hemförsäkring \"Bas\" – 'å'"), Premium: fp(123.45), PremiumFrequency: sp("MONTHLY"),
			Currency: sp("SEK"), RenewalDate: sp("2026-12-01"), StartDate: sp("2020-01-01")}},
		Pensions: []collection.Pension{{ID: "P1", Name: sp("ITP1"), PensionType: sp("OCCUPATIONAL"),
			PolicyNumber: sp("ITP-0001"), Value: sek(512345.5), MonthlyPayout: sek(0), PayoutStartDate: sp("2055-01-01"),
			OtherInsuredPerson: bp(false)}},
		Investments: []collection.Investment{{ID: "I1", Name: sp("ISK"), InvestmentType: sp("ISK"),
			AccountNumber: sp("1234"), Value: sek(100000), Holdings: []collection.Holding{
				{Name: "Global Index", ISIN: sp("SE0000000001"), Quantity: fp(12.5), Value: sek(4000)}}}},
		Loans: []collection.Loan{{ID: "L1", Name: sp("Bolån"), LoanType: sp("MORTGAGE"), Outstanding: sek(2100000),
			InterestRate: fp(3.42), MonthlyPayment: sek(9000)}},
		Savings: []collection.Saving{{ID: "S1", Name: sp("Sparkonto"), Balance: sek(25000), InterestRate: fp(2)}},
		CheckingAccounts: []collection.PSD2Account{{ID: "A1", Name: sp("Lönekonto"), IBAN: sp("SE4550000000058398257466"),
			BBAN: sp("50000000058398257466"), Currency: sp("SEK"), Balance: sek(10523.75), AvailableBalance: sek(10000)}},
		SavingsAccounts: []collection.PSD2Account{{ID: "A2", Balance: sek(1)}},
		CreditCards: []collection.PSD2CreditCard{{ID: "C1", Name: sp("Kort"), MaskedPAN: sp("**** 1234"),
			Currency: sp("SEK"), Balance: sek(-500), CreditLimit: sek(30000)}},
	}
	r.Personal = collectiondata.Personal{
		HolderNames:        map[string]string{"ins-1": "Tolvan Tolvansson"},
		InsuredPersonNames: map[string]string{"P1": "Tolvan Tolvansson"},
		PersonalInformation: &collection.PersonalInformation{PersonalNumber: sp("191212121212"),
			Name: sp("Tolvan Tolvansson"), FirstName: sp("Tolvan"), LastName: sp("Tolvansson"),
			Address: &collection.Address{Street: sp("Gatan 1"), PostalCode: sp("11122"), City: sp("Stockholm"), Country: sp("SE")},
			Email:   sp("tolvan@example.se"), PhoneNumber: sp("46701234567")},
	}
	return r
}

// stored is what a row looks like after a round trip: times in UTC at ms precision.
func stored(r collectiondata.Row) collectiondata.Row {
	r.UpdatedAt = r.UpdatedAt.UTC().Truncate(time.Millisecond)
	return r
}

func upsert(t *testing.T, s collectiondata.Store, rows []collectiondata.Row, docs ...collectiondata.Document) {
	t.Helper()
	if err := s.Upsert(ctx(t), rows, docs); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func get(t *testing.T, s collectiondata.Store, tenant, id string) collectiondata.Row {
	t.Helper()
	r, err := s.Get(ctx(t), tenant, id)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", tenant, id, err)
	}
	return r
}

func assertEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s mismatch\n got: %#v\nwant: %#v", what, got, want)
	}
}

func testRoundTrip(t *testing.T, s collectiondata.Store) {
	in := full("c-1", "acme", 7)
	in.UpdatedAt = time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	upsert(t, s, []collectiondata.Row{in})
	got := get(t, s, "acme", "c-1")
	if got.UpdatedAt.Location() != time.UTC || !got.UpdatedAt.Equal(time.Date(2026, 1, 2, 2, 4, 5, 678_000_000, time.UTC)) {
		t.Errorf("UpdatedAt = %v, want UTC at ms precision", got.UpdatedAt)
	}
	assertEqual(t, "row", got, stored(in))

	// Ids and tenants are bound into queries by some adapters: quoting must hold.
	odd := full(`c-'quote"\back`, `t'en\ant`, 1)
	upsert(t, s, []collectiondata.Row{odd})
	assertEqual(t, "odd row", get(t, s, odd.Tenant, odd.CollectionID), stored(odd))
	if _, err := s.Get(ctx(t), "acme", odd.CollectionID); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get with another tenant: %v", err)
	}
}

// testUnknownStaysAbsent: a data point nobody reported comes back nil, never 0 or "", and a
// reported zero or false comes back as a zero or false, not as unknown.
func testUnknownStaysAbsent(t *testing.T, s collectiondata.Store) {
	in := row("c-sparse", "acme", 3)
	in.Content = collectiondata.Content{
		Insurances: []collection.Insurance{{ID: "ins-1", InsuranceType: "CAR"}, {ID: "ins-2", InsuranceType: "HOME", Premium: fp(0)}},
		Pensions: []collection.Pension{{ID: "P-unknown"}, {ID: "P-false", OtherInsuredPerson: bp(false)},
			{ID: "P-true", OtherInsuredPerson: bp(true), Value: sek(0)}},
		Investments: []collection.Investment{{ID: "I1", Holdings: []collection.Holding{{Name: "X"}}}},
		Loans:       []collection.Loan{{ID: "L1", InterestRate: fp(0)}},
	}
	in.Personal = collectiondata.Personal{PersonalInformation: &collection.PersonalInformation{Name: sp("Tolvan")}}
	upsert(t, s, []collectiondata.Row{in})
	got := get(t, s, "acme", "c-sparse")
	assertEqual(t, "sparse row", got, stored(in))

	ins := got.Content.Insurances[0]
	if ins.InsuranceNumber != nil || ins.DisplayName != nil || ins.Premium != nil || ins.PremiumFrequency != nil ||
		ins.Currency != nil || ins.RenewalDate != nil || ins.StartDate != nil {
		t.Fatalf("unknown insurance data points came back known: %#v", ins)
	}
	if p := got.Content.Insurances[1].Premium; p == nil || *p != 0 {
		t.Fatalf("a known premium of 0 came back as %v", p)
	}
	if got.Content.Pensions[0].OtherInsuredPerson != nil {
		t.Fatal("otherInsuredPerson without a conclusion came back as a value")
	}
	if o := got.Content.Pensions[1].OtherInsuredPerson; o == nil || *o {
		t.Fatalf("otherInsuredPerson false came back as %v", o)
	}
	pi := got.Personal.PersonalInformation
	if pi == nil || pi.PersonalNumber != nil || pi.Address != nil || pi.Email != nil || *pi.Name != "Tolvan" {
		t.Fatalf("personal information = %#v", pi)
	}
	if got.Personal.HolderNames != nil || got.Personal.InsuredPersonNames != nil {
		t.Fatalf("absent names came back as %#v", got.Personal)
	}
	// The view keeps them unknown too.
	v := collectiondata.View(got)
	if v.Insurances[0].HolderName != nil || v.Pensions[0].InsuredPersonName != nil || v.Pensions[0].Value != nil {
		t.Fatalf("view invented data points: %#v", v)
	}
}

func testRowWithoutData(t *testing.T, s collectiondata.Store) {
	in := row("c-empty", "acme", 0)
	in.Status = "RUNNING"
	upsert(t, s, []collectiondata.Row{in})
	got := get(t, s, "acme", "c-empty")
	assertEqual(t, "empty row", got, stored(in))
	if !reflect.DeepEqual(got.Content, collectiondata.Content{}) || !got.Personal.IsZero() || got.Personal.PersonalInformation != nil {
		t.Fatalf("a row without data came back with some: %#v", got)
	}
}

func testGetMany(t *testing.T, s collectiondata.Store) {
	got, err := s.GetMany(ctx(t), nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("GetMany(nil) = %v, %v; want empty", got, err)
	}
	a, b := full("c-a", "acme", 0), row("c-b", "other", 4)
	upsert(t, s, []collectiondata.Row{a, b})
	got, err = s.GetMany(ctx(t), []string{"c-a", "c-b", "c-unknown"})
	if err != nil {
		t.Fatalf("GetMany: %v", err)
	}
	assertEqual(t, "GetMany", got, map[string]collectiondata.Row{"c-a": stored(a), "c-b": stored(b)})

	// Many ids at once (more than one IN chunk of either adapter).
	var rows []collectiondata.Row
	var ids []string
	for i := range 1203 {
		id := fmt.Sprintf("bulk-%04d", i)
		rows = append(rows, row(id, "acme", uint64(i%5)))
		ids = append(ids, id)
	}
	upsert(t, s, rows)
	got, err = s.GetMany(ctx(t), ids)
	if err != nil {
		t.Fatalf("GetMany bulk: %v", err)
	}
	if len(got) != len(ids) || got["bulk-1202"].Revision != 1202%5 {
		t.Fatalf("GetMany bulk returned %d rows (bulk-1202 at %d)", len(got), got["bulk-1202"].Revision)
	}
}

func doc(collectionID, tenant, id string, rev uint64, content string) collectiondata.Document {
	d := collectiondata.Document{
		CollectionID: collectionID, DocumentID: id, Tenant: tenant, Kind: collection.DocumentFrenchCareerStatement,
		ContentType: "application/pdf", FileName: "releve.pdf", Size: int64(len(content)),
		SHA256: fmt.Sprintf("%064x", rev), At: base.Add(time.Duration(rev) * time.Minute), Revision: rev,
	}
	if content != "" {
		d.Content = []byte(content)
	}
	return d
}

// storedDoc is what a document looks like after a round trip: whether it has content is told
// whether or not the content is read.
func storedDoc(d collectiondata.Document, withContent bool) collectiondata.Document {
	d.At = d.At.UTC().Truncate(time.Millisecond)
	d.HasContent = len(d.Content) > 0
	if !withContent {
		d.Content = nil
	}
	return d
}

func getDoc(t *testing.T, s collectiondata.Store, tenant, collectionID, id string) collectiondata.Document {
	t.Helper()
	d, err := s.Document(ctx(t), tenant, collectionID, id)
	if err != nil {
		t.Fatalf("Document(%s, %s, %s): %v", tenant, collectionID, id, err)
	}
	return d
}

func testStaleRevisions(t *testing.T, s collectiondata.Store) {
	current := full("c-1", "acme", 5)
	upsert(t, s, []collectiondata.Row{current}, doc("c-1", "acme", "d-1", 5, "%PDF-current"))

	older := row("c-1", "acme", 3)
	older.Status = "LOGIN"
	equal := row("c-1", "acme", 5)
	equal.Status = "FAILED"
	upsert(t, s, []collectiondata.Row{older}, doc("c-1", "acme", "d-1", 3, "%PDF-older"))
	upsert(t, s, []collectiondata.Row{equal}, doc("c-1", "acme", "d-1", 5, "%PDF-equal"))
	assertEqual(t, "row", get(t, s, "acme", "c-1"), stored(current))
	assertEqual(t, "document", getDoc(t, s, "acme", "c-1", "d-1"), storedDoc(doc("c-1", "acme", "d-1", 5, "%PDF-current"), true))

	// Revision 0 (collection.started) is a revision like any other.
	zero := row("c-0", "acme", 0)
	upsert(t, s, []collectiondata.Row{zero})
	again := row("c-0", "acme", 0)
	again.Status = "FAILED"
	upsert(t, s, []collectiondata.Row{again})
	assertEqual(t, "revision-0 row", get(t, s, "acme", "c-0"), stored(zero))

	newer := full("c-1", "acme", 9)
	newer.Content.Loans = nil
	upsert(t, s, []collectiondata.Row{newer}, doc("c-1", "acme", "d-1", 9, "%PDF-newer"))
	assertEqual(t, "newer row", get(t, s, "acme", "c-1"), stored(newer))
	assertEqual(t, "newer document", getDoc(t, s, "acme", "c-1", "d-1"), storedDoc(doc("c-1", "acme", "d-1", 9, "%PDF-newer"), true))
}

func testBatchDuplicates(t *testing.T, s collectiondata.Store) {
	r5, r7, r7dup, r6 := row("c-1", "acme", 5), full("c-1", "acme", 7), row("c-1", "acme", 7), row("c-1", "acme", 6)
	r7dup.Status = "FAILED"
	d7 := doc("c-1", "acme", "d-1", 7, "%PDF-7")
	upsert(t, s, []collectiondata.Row{r5, r7, r7dup, r6},
		doc("c-1", "acme", "d-1", 5, "%PDF-5"), d7, doc("c-1", "acme", "d-1", 7, "%PDF-7-dup"), doc("c-1", "acme", "d-1", 6, "%PDF-6"))
	assertEqual(t, "row", get(t, s, "acme", "c-1"), stored(r7))
	assertEqual(t, "document", getDoc(t, s, "acme", "c-1", "d-1"), storedDoc(d7, true))
	docs, err := s.Documents(ctx(t), "acme", "c-1")
	if err != nil || len(docs) != 1 {
		t.Fatalf("Documents = %v, %v; want one", docs, err)
	}
}

func testTenantIsolation(t *testing.T, s collectiondata.Store) {
	upsert(t, s, []collectiondata.Row{full("c-acme", "acme", 2), full("c-other", "other", 2)},
		doc("c-acme", "acme", "d-1", 2, "%PDF-acme"))
	if _, err := s.Get(ctx(t), "other", "c-acme"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get of another tenant's collection: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx(t), "acme", "c-unknown"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get of an unknown collection: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx(t), "", "c-acme"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get with an empty tenant: err = %v, want ErrNotFound", err)
	}
	if docs, err := s.Documents(ctx(t), "other", "c-acme"); err != nil || len(docs) != 0 {
		t.Fatalf("Documents of another tenant's collection = %v, %v", docs, err)
	}
	if _, err := s.Document(ctx(t), "other", "c-acme", "d-1"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Document of another tenant's collection: err = %v, want ErrNotFound", err)
	}
	if got := get(t, s, "other", "c-other"); got.Tenant != "other" {
		t.Fatalf("Get returned tenant %q", got.Tenant)
	}
}

func testDocuments(t *testing.T, s collectiondata.Store) {
	// Binary content: NUL bytes, bytes that are not UTF-8, and a size over one network packet.
	binary := make([]byte, 200_000)
	for i := range binary {
		binary[i] = byte(i * 7)
	}
	binary[0], binary[1] = 0x00, 0xff
	later := doc("c-1", "acme", "d-later", 4, "")
	later.Content = binary
	later.Size = int64(len(binary))
	earlier := doc("c-1", "acme", "d-earlier", 2, "%PDF-1.7 earlier")
	earlier.FileName = "" // the company gave no name
	erased := doc("c-1", "acme", "d-erased", 3, "")
	elsewhere := doc("c-2", "acme", "d-x", 1, "%PDF-other collection")
	upsert(t, s, []collectiondata.Row{row("c-1", "acme", 4), row("c-2", "acme", 1)}, later, earlier, erased, elsewhere)

	docs, err := s.Documents(ctx(t), "acme", "c-1")
	if err != nil {
		t.Fatalf("Documents: %v", err)
	}
	assertEqual(t, "documents (oldest first, without content)", docs,
		[]collectiondata.Document{storedDoc(earlier, false), storedDoc(erased, false), storedDoc(later, false)})

	got := getDoc(t, s, "acme", "c-1", "d-later")
	assertEqual(t, "binary document", got, storedDoc(later, true))
	assertEqual(t, "document without file name", getDoc(t, s, "acme", "c-1", "d-earlier"), storedDoc(earlier, true))
	if got := getDoc(t, s, "acme", "c-1", "d-erased"); got.Content != nil {
		t.Fatalf("a document without content came back with %d bytes", len(got.Content))
	}
	if _, err := s.Document(ctx(t), "acme", "c-1", "d-x"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("a document of another collection: err = %v, want ErrNotFound", err)
	}
	if docs, err := s.Documents(ctx(t), "acme", "c-unknown"); err != nil || len(docs) != 0 {
		t.Fatalf("Documents of an unknown collection = %v, %v", docs, err)
	}
}

func testReset(t *testing.T, s collectiondata.Store) {
	upsert(t, s, []collectiondata.Row{full("c-1", "acme", 5)}, doc("c-1", "acme", "d-1", 5, "%PDF"))
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if _, err := s.Get(ctx(t), "acme", "c-1"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Get after Reset: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Document(ctx(t), "acme", "c-1", "d-1"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("Document after Reset: err = %v, want ErrNotFound", err)
	}
	// A rebuild writes revisions from 0 again.
	again := row("c-1", "acme", 0)
	d := doc("c-1", "acme", "d-1", 0, "%PDF-again")
	upsert(t, s, []collectiondata.Row{again}, d)
	assertEqual(t, "row after reset", get(t, s, "acme", "c-1"), stored(again))
	assertEqual(t, "document after reset", getDoc(t, s, "acme", "c-1", "d-1"), storedDoc(d, true))
}

// stream appends events of one collection to a log.
type stream struct {
	log    *eventlog.Log
	tenant string
	id     string
	t0     time.Time
	envs   []eventschema.Envelope
}

func newStream(log *eventlog.Log, tenant, id string, t0 time.Time) *stream {
	return &stream{log: log, tenant: tenant, id: id, t0: t0}
}

func (s *stream) add(at time.Duration, ev domain.Event) eventschema.Envelope {
	env := s.log.Append(s.tenant, collection.StreamName(s.id), s.t0.Add(at), ev)
	s.envs = append(s.envs, env)
	return env
}

func (s *stream) start(product collection.Product, company string) {
	s.add(0, collection.Started{CollectionID: s.id, ClientID: s.tenant, Company: company, Product: product,
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", StartedAt: s.t0,
		Personal: &collection.StartedPerson{PersonalNumber: "199001010017", AccountOwnerName: "Tolvan Tolvansson", RequestHash: "9f2c"}})
	s.add(100*time.Millisecond, collection.Claimed{WorkerID: "w1", ClaimedAt: s.t0.Add(100 * time.Millisecond)})
}

func (s *stream) status(at time.Duration, from, to collection.Status) {
	s.add(at, collection.StatusChanged{From: from, To: to, ChangedAt: s.t0.Add(at)})
}

// insuranceLife is an insurance collection that records its data in two events.
func insuranceLife(log *eventlog.Log, tenant, id string, t0 time.Time) (*stream, collectiondata.Row) {
	s := newStream(log, tenant, id, t0)
	s.start(collection.ProductInsurance, "se-demo-insurer")
	s.status(time.Second, collection.StatusRunning, collection.StatusLogin)
	s.add(2*time.Second, collection.StatusChanged{From: collection.StatusLogin, To: collection.StatusLogin,
		Message: "new EID order", ChangedAt: t0.Add(2 * time.Second)}) // staying in LOGIN changes nothing here
	s.status(3*time.Second, collection.StatusLogin, collection.StatusCollecting)
	s.add(4*time.Second, collection.InsurancesCollected{CollectedAt: t0.Add(4 * time.Second), InsuranceCount: 1,
		Personal: &collection.InsuranceRecords{
			Insurances:  []collection.Insurance{{ID: "ins-1", InsuranceType: "HOME", Premium: fp(100), Currency: sp("SEK")}},
			HolderNames: map[string]string{"ins-1": "Tolvan Tolvansson"}}})
	s.add(5*time.Second, collection.InsurancesCollected{CollectedAt: t0.Add(5 * time.Second), InsuranceCount: 1,
		Personal: &collection.InsuranceRecords{Insurances: []collection.Insurance{{ID: "ins-2", InsuranceType: "CAR", DisplayName: sp("Bil")}}}})
	s.status(6*time.Second, collection.StatusCollecting, collection.StatusCompleted)
	want := collectiondata.Row{
		CollectionID: id, Tenant: tenant, Company: "se-demo-insurer", Product: "INSURANCE", Status: "COMPLETED",
		Content: collectiondata.Content{Insurances: []collection.Insurance{
			{ID: "ins-1", InsuranceType: "HOME", Premium: fp(100), Currency: sp("SEK")},
			{ID: "ins-2", InsuranceType: "CAR", DisplayName: sp("Bil")},
		}},
		Personal:  collectiondata.Personal{HolderNames: map[string]string{"ins-1": "Tolvan Tolvansson"}},
		UpdatedAt: t0.Add(6 * time.Second).Truncate(time.Millisecond),
		Revision:  uint64(len(s.envs) - 1),
	}
	return s, want
}

// wealthLife is a French pension-information collection: the client's uploaded PDF, two
// wealth events, the career statement, and completion.
func wealthLife(log *eventlog.Log, tenant, id string, t0 time.Time) (*stream, collectiondata.Row, collectiondata.Document) {
	s := newStream(log, tenant, id, t0)
	s.start(collection.ProductWealth, "fr-demo-pension-info")
	s.add(150*time.Millisecond, collection.DocumentUploaded{Document: withTime(
		collection.NewDocument("d-upload", collection.DocumentUploadedPDF, "application/pdf", "lettre.pdf", []byte("%PDF-uploaded")), t0)})
	s.status(time.Second, collection.StatusRunning, collection.StatusCollecting)
	s.add(2*time.Second, collection.WealthCollected{CollectedAt: t0.Add(2 * time.Second), Counts: collection.WealthCounts{Pensions: 2},
		Personal: &collection.WealthRecords{
			Pensions: []collection.Pension{
				{ID: "P1", Name: sp("Retraite de base"), Value: &collection.Money{Amount: 1000, Currency: "EUR"}, OtherInsuredPerson: bp(false)},
				{ID: "P2", OtherInsuredPerson: bp(true)},
			},
			PersonalInformation: &collection.PersonalInformation{PersonalNumber: sp("1850275123456"), Name: sp("Jean Dupont")},
			InsuredPersonNames:  map[string]string{"P1": "Jean Dupont", "P2": "Marie Dupont"},
		}})
	s.add(3*time.Second, collection.WealthCollected{CollectedAt: t0.Add(3 * time.Second), Counts: collection.WealthCounts{Pensions: 1, Investments: 1},
		Personal: &collection.WealthRecords{
			Pensions:    []collection.Pension{{ID: "P3"}},
			Investments: []collection.Investment{{ID: "I1", Name: sp("PER")}},
			PersonalInformation: &collection.PersonalInformation{
				Email: sp("jean@example.fr"), Address: &collection.Address{City: sp("Paris")}}}})
	content := []byte("%PDF-1.7 relevé de carrière")
	statement := withTime(collection.NewDocument("d-career", collection.DocumentFrenchCareerStatement, "application/pdf",
		"releve-de-carriere.pdf", content), t0.Add(4*time.Second))
	s.add(4*time.Second, collection.DocumentCollected{Document: statement})
	s.status(5*time.Second, collection.StatusCollecting, collection.StatusCompleted)
	want := collectiondata.Row{
		CollectionID: id, Tenant: tenant, Company: "fr-demo-pension-info", Product: "WEALTH", Status: "COMPLETED",
		Content: collectiondata.Content{
			Pensions: []collection.Pension{
				{ID: "P1", Name: sp("Retraite de base"), Value: &collection.Money{Amount: 1000, Currency: "EUR"}, OtherInsuredPerson: bp(false)},
				{ID: "P2", OtherInsuredPerson: bp(true)},
				{ID: "P3"},
			},
			Investments: []collection.Investment{{ID: "I1", Name: sp("PER")}},
		},
		Personal: collectiondata.Personal{
			InsuredPersonNames: map[string]string{"P1": "Jean Dupont", "P2": "Marie Dupont"},
			PersonalInformation: &collection.PersonalInformation{PersonalNumber: sp("1850275123456"), Name: sp("Jean Dupont"),
				Email: sp("jean@example.fr"), Address: &collection.Address{City: sp("Paris")}},
		},
		UpdatedAt: t0.Add(5 * time.Second).Truncate(time.Millisecond),
		Revision:  uint64(len(s.envs) - 1),
	}
	wantDoc := collectiondata.Document{
		CollectionID: id, DocumentID: "d-career", Tenant: tenant, Kind: collection.DocumentFrenchCareerStatement,
		ContentType: "application/pdf", FileName: "releve-de-carriere.pdf", Size: int64(len(content)),
		SHA256: statement.Personal.SHA256, At: t0.Add(4 * time.Second).Truncate(time.Millisecond), Content: content,
		HasContent: true, Revision: uint64(len(s.envs) - 2),
	}
	return s, want, wantDoc
}

func withTime(d collection.Document, at time.Time) collection.Document {
	d.At = at.UTC()
	return d
}

func handle(t *testing.T, p *collectiondata.Projector, batch []eventschema.Envelope) {
	t.Helper()
	if err := p.Handle(ctx(t), batch); err != nil {
		t.Fatalf("Handle: %v", err)
	}
}

func testProjectorInsuranceLife(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	if p.Name() != collectiondata.ProjectorName {
		t.Fatalf("Name = %q", p.Name())
	}
	life, want := insuranceLife(log, "acme", "c-ins", base)
	handle(t, p, life.envs)
	assertEqual(t, "row", get(t, s, "acme", "c-ins"), want)
	if _, err := s.Get(ctx(t), "other", "c-ins"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("another tenant sees the collection: %v", err)
	}
}

func testProjectorWealthLife(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	life, want, wantDoc := wealthLife(log, "acme", "c-fr", base)
	handle(t, p, life.envs)
	assertEqual(t, "row", get(t, s, "acme", "c-fr"), want)
	docs, err := s.Documents(ctx(t), "acme", "c-fr")
	if err != nil {
		t.Fatalf("Documents: %v", err)
	}
	// The client's own upload is input, not collected data.
	assertEqual(t, "documents", docs, []collectiondata.Document{storedDoc(wantDoc, false)})
	assertEqual(t, "career statement", getDoc(t, s, "acme", "c-fr", "d-career"), wantDoc)
}

// testProjectorAccumulates checks the fold rules one event at a time: lists grow, an item
// reported again is replaced where it stood, and a later event that does not mention a data
// point leaves it.
func testProjectorAccumulates(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	st := newStream(log, "acme", "c-acc", base)
	st.start(collection.ProductWealth, "se-demo-bank")
	st.status(time.Second, collection.StatusRunning, collection.StatusCollecting)
	handle(t, p, st.envs)
	if got := get(t, s, "acme", "c-acc"); got.Status != "COLLECTING" || !reflect.DeepEqual(got.Content, collectiondata.Content{}) {
		t.Fatalf("before data: %#v", got)
	}

	first := st.add(2*time.Second, collection.WealthCollected{CollectedAt: base.Add(2 * time.Second),
		Personal: &collection.WealthRecords{
			CheckingAccounts: []collection.PSD2Account{{ID: "A1", Balance: sek(10)}, {ID: "A2"}},
			CreditCards:      []collection.PSD2CreditCard{{ID: "C1"}},
			PersonalInformation: &collection.PersonalInformation{
				PersonalNumber: sp("199001010017"), Address: &collection.Address{Street: sp("Gatan 1"), City: sp("Lund")}}}})
	second := st.add(3*time.Second, collection.WealthCollected{CollectedAt: base.Add(3 * time.Second),
		Personal: &collection.WealthRecords{
			CheckingAccounts: []collection.PSD2Account{{ID: "A1", Balance: sek(20), Name: sp("Lön")}},
			SavingsAccounts:  []collection.PSD2Account{{ID: "A3"}},
			Loans:            []collection.Loan{{ID: "L1"}},
			Savings:          []collection.Saving{{ID: "S1"}},
			PersonalInformation: &collection.PersonalInformation{
				Name: sp("Tolvan"), Address: &collection.Address{City: sp("Malmö")}}}})
	third := st.add(4*time.Second, collection.WealthCollected{CollectedAt: base.Add(4 * time.Second),
		Personal: &collection.WealthRecords{CreditCards: []collection.PSD2CreditCard{{ID: "C2"}}}}) // no personal information: none of it is lost
	handle(t, p, []eventschema.Envelope{first})
	handle(t, p, []eventschema.Envelope{second, third})

	got := get(t, s, "acme", "c-acc")
	assertEqual(t, "content", got.Content, collectiondata.Content{
		CheckingAccounts: []collection.PSD2Account{{ID: "A1", Balance: sek(20), Name: sp("Lön")}, {ID: "A2"}},
		SavingsAccounts:  []collection.PSD2Account{{ID: "A3"}},
		CreditCards:      []collection.PSD2CreditCard{{ID: "C1"}, {ID: "C2"}},
		Loans:            []collection.Loan{{ID: "L1"}},
		Savings:          []collection.Saving{{ID: "S1"}},
	})
	assertEqual(t, "personal", got.Personal, collectiondata.Personal{PersonalInformation: &collection.PersonalInformation{
		PersonalNumber: sp("199001010017"), Name: sp("Tolvan"),
		Address: &collection.Address{Street: sp("Gatan 1"), City: sp("Malmö")}}})
	if got.Status != "COLLECTING" || got.Revision != third.Revision {
		t.Fatalf("status %s at revision %d, want COLLECTING at %d", got.Status, got.Revision, third.Revision)
	}
}

// testProjectorPSD2Read: the PSD2 products read accumulate over the wealth events (sorted, once
// each), survive the store with records and without any (read and found empty is [], not
// unknown), and stay nil (not recorded) for data whose events never said.
func testProjectorPSD2Read(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	checking, cards := consent.ScopeCheckingAccounts, consent.ScopeCreditCards

	withRecords := newStream(log, "acme", "c-read", base)
	withRecords.start(collection.ProductWealth, "se-demo-bank")
	withRecords.add(time.Second, collection.WealthCollected{CollectedAt: base.Add(time.Second), PSD2Read: []consent.Scope{cards},
		Personal: &collection.WealthRecords{CreditCards: []collection.PSD2CreditCard{{ID: "C1"}}}})
	withRecords.add(2*time.Second, collection.WealthCollected{CollectedAt: base.Add(2 * time.Second), PSD2Read: []consent.Scope{checking, cards}})
	withRecords.add(3*time.Second, collection.WealthCollected{CollectedAt: base.Add(3 * time.Second), // not recorded: changes nothing
		Personal: &collection.WealthRecords{Loans: []collection.Loan{{ID: "L1"}}}})

	noneRead := newStream(log, "acme", "c-none", base)
	noneRead.start(collection.ProductWealth, "se-demo-bank")
	noneRead.add(time.Second, collection.WealthCollected{CollectedAt: base.Add(time.Second), PSD2Read: []consent.Scope{}})

	notRecorded := newStream(log, "acme", "c-old", base)
	notRecorded.start(collection.ProductWealth, "se-demo-bank")
	notRecorded.add(time.Second, collection.WealthCollected{CollectedAt: base.Add(time.Second),
		Personal: &collection.WealthRecords{Loans: []collection.Loan{{ID: "L1"}}}})

	handle(t, p, append(append(append([]eventschema.Envelope{}, withRecords.envs...), noneRead.envs...), notRecorded.envs...))
	for id, want := range map[string][]consent.Scope{"c-read": {checking, cards}, "c-none": {}, "c-old": nil} {
		got := get(t, s, "acme", id).Content.PSD2Read
		if (got == nil) != (want == nil) || !slices.Equal(got, want) {
			t.Errorf("%s: PSD2 products read %#v, want %#v", id, got, want)
		}
	}
	if got := get(t, s, "acme", "c-read").Content; len(got.CreditCards) != 1 || len(got.Loans) != 1 {
		t.Errorf("records %+v", got)
	}
}

func testProjectorRedelivery(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	ins, wantIns := insuranceLife(log, "acme", "c-1", base)
	fr, wantFr, wantDoc := wealthLife(log, "other", "c-2", base.Add(time.Minute))
	batch := append(append([]eventschema.Envelope{}, ins.envs...), fr.envs...)
	check := func(when string) {
		t.Helper()
		assertEqual(t, when+": insurance row", get(t, s, "acme", "c-1"), wantIns)
		assertEqual(t, when+": wealth row", get(t, s, "other", "c-2"), wantFr)
		docs, err := s.Documents(ctx(t), "other", "c-2")
		if err != nil || len(docs) != 1 {
			t.Fatalf("%s: documents = %v, %v", when, docs, err)
		}
		assertEqual(t, when+": document", getDoc(t, s, "other", "c-2", "d-career"), wantDoc)
	}
	handle(t, p, batch)
	handle(t, p, batch)
	check("batch twice")
	// An old prefix delivered late (a consumer that lost its offsets) adds nothing twice.
	handle(t, p, ins.envs[:6])
	handle(t, p, fr.envs[:6])
	check("old prefix")
	// Event by event, then again in reverse: still the same.
	for _, e := range batch {
		handle(t, p, []eventschema.Envelope{e})
	}
	for i := len(batch) - 1; i >= 0; i-- {
		handle(t, p, []eventschema.Envelope{batch[i]})
	}
	check("one by one")

	// Overlapping batches on a fresh collection build the same row as one batch.
	log2 := eventlog.New(t)
	again, want := insuranceLife(log2, "acme", "c-3", base)
	p2 := collectiondata.NewProjector(log2.Registry(), s)
	for i := 0; i < len(again.envs); i += 2 {
		handle(t, p2, again.envs[max(0, i-2):min(len(again.envs), i+3)])
	}
	assertEqual(t, "overlapping batches", get(t, s, "acme", "c-3"), want)
}

func testProjectorIgnores(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	handle(t, p, []eventschema.Envelope{
		log.Append("acme", client.StreamName("acme"), base, client.Registered{ClientID: "acme", Name: "Acme AB", RegisteredAt: base}),
		log.Append("acme", client.StreamName("acme"), base, client.APIKeyIssued{KeyID: "k1", KeyHash: client.HashAPIKey("secret"), IssuedAt: base}),
	})
	if got, err := s.GetMany(ctx(t), []string{"acme", "client-acme"}); err != nil || len(got) != 0 {
		t.Fatalf("client events produced rows: %v, %v", got, err)
	}
	// Data whose started event never arrived creates no half row and no document.
	orphan := collection.StreamName("c-orphan")
	handle(t, p, []eventschema.Envelope{
		log.Append("acme", orphan, base, collection.InsurancesCollected{CollectedAt: base, InsuranceCount: 1,
			Personal: &collection.InsuranceRecords{Insurances: []collection.Insurance{{ID: "i", InsuranceType: "HOME"}}}}),
		log.Append("acme", orphan, base, collection.DocumentCollected{Document: withTime(collection.NewDocument(
			"d", collection.DocumentFrenchCareerStatement, "application/pdf", "", []byte("%PDF")), base)}),
	})
	if _, err := s.Get(ctx(t), "acme", "c-orphan"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("orphan data created a row: %v", err)
	}
	if _, err := s.Document(ctx(t), "acme", "c-orphan", "d"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("orphan document was stored: %v", err)
	}
	// An event type this build does not know is skipped, not a failure.
	handle(t, p, []eventschema.Envelope{log.AppendRaw(eventschema.Envelope{Type: "collection.something-new",
		SchemaVersion: 1, Tenant: "acme", Stream: orphan, OccurredAt: base, Payload: []byte(`{}`)})})
}

// testProjectorUnknownStaysAbsent: data points the company did not report stay unknown from
// the encoded event through the store to the query view.
func testProjectorUnknown(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	st := newStream(log, "acme", "c-sparse", base)
	st.start(collection.ProductWealth, "se-demo-pension")
	st.status(time.Second, collection.StatusRunning, collection.StatusCollecting)
	st.add(2*time.Second, collection.WealthCollected{CollectedAt: base.Add(2 * time.Second),
		Personal: &collection.WealthRecords{Pensions: []collection.Pension{{ID: "P1"}, {ID: "P2", Value: &collection.Money{Amount: 0, Currency: "SEK"}}}}})
	st.status(3*time.Second, collection.StatusCollecting, collection.StatusCompletedPartial)
	handle(t, p, st.envs)
	v := collectiondata.View(get(t, s, "acme", "c-sparse"))
	want := query.DataView{CollectionID: "c-sparse", Tenant: "acme", Company: "se-demo-pension", Product: "WEALTH",
		Status: "COMPLETED_PARTIAL", Pensions: []query.PensionView{{Pension: collection.Pension{ID: "P1"}},
			{Pension: collection.Pension{ID: "P2", Value: &collection.Money{Amount: 0, Currency: "SEK"}}}}}
	assertEqual(t, "view", v, want)
}

// testProjectorEmptyPersonalValuesAreUnknown: an empty string or an empty address in a report
// of personal information is unknown, like a missing value: it does not replace what an earlier
// report knew, and a report of nothing but such values leaves the personal information unknown.
func testProjectorEmptyPersonal(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	empty := func() *collection.PersonalInformation {
		return &collection.PersonalInformation{Name: sp(""), Email: sp(""), Address: &collection.Address{City: sp("")}}
	}

	st := newStream(log, "acme", "c-merge", base)
	st.start(collection.ProductWealth, "se-demo-pension")
	st.add(time.Second, collection.WealthCollected{CollectedAt: base.Add(time.Second), Personal: &collection.WealthRecords{
		PersonalInformation: &collection.PersonalInformation{Name: sp("Jean Dupont"), Address: &collection.Address{City: sp("Paris")}}}})
	st.add(2*time.Second, collection.WealthCollected{CollectedAt: base.Add(2 * time.Second),
		Personal: &collection.WealthRecords{PersonalInformation: empty()}})
	st.status(3*time.Second, collection.StatusRunning, collection.StatusCompleted)
	handle(t, p, st.envs)
	assertEqual(t, "merged personal information", get(t, s, "acme", "c-merge").Personal.PersonalInformation,
		&collection.PersonalInformation{Name: sp("Jean Dupont"), Address: &collection.Address{City: sp("Paris")}})

	only := newStream(log, "acme", "c-empty-personal", base)
	only.start(collection.ProductWealth, "se-demo-pension")
	only.add(time.Second, collection.WealthCollected{CollectedAt: base.Add(time.Second),
		Personal: &collection.WealthRecords{PersonalInformation: empty()}})
	only.status(2*time.Second, collection.StatusRunning, collection.StatusCompleted)
	handle(t, p, only.envs)
	if got := get(t, s, "acme", "c-empty-personal").Personal.PersonalInformation; got != nil {
		t.Fatalf("nothing known came back as %#v", got)
	}
}

func testReader(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	life, _, wantDoc := wealthLife(log, "acme", "c-fr", base)
	handle(t, p, life.envs)
	ins, _ := insuranceLife(log, "acme", "c-ins", base)
	handle(t, p, ins.envs)
	var r query.DataReader = collectiondata.NewReader(s)

	v, err := r.GetData(ctx(t), "acme", "c-fr")
	if err != nil {
		t.Fatalf("GetData: %v", err)
	}
	assertEqual(t, "pensions", v.Pensions, []query.PensionView{
		{Pension: collection.Pension{ID: "P1", Name: sp("Retraite de base"), Value: &collection.Money{Amount: 1000, Currency: "EUR"},
			OtherInsuredPerson: bp(false)}, InsuredPersonName: sp("Jean Dupont")},
		{Pension: collection.Pension{ID: "P2", OtherInsuredPerson: bp(true)}, InsuredPersonName: sp("Marie Dupont")},
		{Pension: collection.Pension{ID: "P3"}},
	})
	assertEqual(t, "personal information", v.PersonalInformation, &collection.PersonalInformation{
		PersonalNumber: sp("1850275123456"), Name: sp("Jean Dupont"), Email: sp("jean@example.fr"),
		Address: &collection.Address{City: sp("Paris")}})
	if v.Company != "fr-demo-pension-info" || v.Product != "WEALTH" || v.Status != "COMPLETED" || v.Insurances != nil {
		t.Fatalf("view = %#v", v)
	}
	// The data names the career statement, so that a client learns from it that the PDF exists.
	assertEqual(t, "career statement", v.CareerStatement, &query.DocumentInfo{Kind: wantDoc.Kind,
		ContentType: wantDoc.ContentType, FileName: wantDoc.FileName, Size: wantDoc.Size, At: wantDoc.At})
	vi, err := r.GetData(ctx(t), "acme", "c-ins")
	if err != nil || len(vi.Insurances) != 2 || vi.Insurances[0].HolderName == nil ||
		*vi.Insurances[0].HolderName != "Tolvan Tolvansson" || vi.Insurances[1].HolderName != nil || vi.PersonalInformation != nil ||
		vi.CareerStatement != nil {
		t.Fatalf("insurance view = %#v, %v", vi, err)
	}

	d, err := r.GetDocument(ctx(t), "acme", "c-fr", collection.DocumentFrenchCareerStatement)
	if err != nil {
		t.Fatalf("GetDocument: %v", err)
	}
	assertEqual(t, "document", d, query.DocumentView{DocumentID: wantDoc.DocumentID, Kind: wantDoc.Kind,
		ContentType: wantDoc.ContentType, FileName: wantDoc.FileName, Size: wantDoc.Size, SHA256: wantDoc.SHA256,
		At: wantDoc.At, Content: wantDoc.Content})

	// A newer statement wins over the older one.
	newer := doc("c-fr", "acme", "d-newer", 50, "%PDF-newer")
	newer.At = base.Add(time.Hour)
	upsert(t, s, nil, newer)
	if d, err := r.GetDocument(ctx(t), "acme", "c-fr", collection.DocumentFrenchCareerStatement); err != nil || d.DocumentID != "d-newer" {
		t.Fatalf("GetDocument after a newer statement = %s, %v", d.DocumentID, err)
	}
	if v, err := r.GetData(ctx(t), "acme", "c-fr"); err != nil || v.CareerStatement == nil || v.CareerStatement.Size != newer.Size ||
		!v.CareerStatement.At.Equal(newer.At.Truncate(time.Millisecond)) {
		t.Fatalf("career statement after a newer one = %#v, %v", v.CareerStatement, err)
	}
	// A wealth collection without a statement names none.
	plain, _, _ := wealthLife(log, "acme", "c-no-statement", base)
	var withoutDoc []eventschema.Envelope
	for _, env := range plain.envs {
		if env.Type != collection.EventDocumentCollected {
			withoutDoc = append(withoutDoc, env)
		}
	}
	handle(t, p, withoutDoc)
	if v, err := r.GetData(ctx(t), "acme", "c-no-statement"); err != nil || v.Product != "WEALTH" || v.CareerStatement != nil {
		t.Fatalf("wealth data without a statement = %#v, %v", v, err)
	}

	for name, call := range map[string]func() error{
		"data of another tenant": func() error { _, err := r.GetData(ctx(t), "other", "c-fr"); return err },
		"data of unknown":        func() error { _, err := r.GetData(ctx(t), "acme", "c-unknown"); return err },
		"document of another": func() error {
			_, err := r.GetDocument(ctx(t), "other", "c-fr", collection.DocumentFrenchCareerStatement)
			return err
		},
		"document of another kind": func() error {
			_, err := r.GetDocument(ctx(t), "acme", "c-fr", collection.DocumentUploadedPDF)
			return err
		},
		"no document": func() error {
			_, err := r.GetDocument(ctx(t), "acme", "c-ins", collection.DocumentFrenchCareerStatement)
			return err
		},
	} {
		err := call()
		if !errors.Is(err, query.ErrNotFound) {
			t.Errorf("%s: err = %v, want query.ErrNotFound", name, err)
		}
		if errors.Is(err, readdb.ErrNotFound) {
			t.Errorf("%s: err = %v carries the store's not-found error too", name, err)
		}
	}
	// A statement whose content is gone (erased) is not served.
	erased := doc("c-ins", "acme", "d-erased", 99, "")
	upsert(t, s, nil, erased)
	if _, err := r.GetDocument(ctx(t), "acme", "c-ins", collection.DocumentFrenchCareerStatement); !errors.Is(err, query.ErrNotFound) {
		t.Fatalf("erased document: err = %v, want query.ErrNotFound", err)
	}
}
