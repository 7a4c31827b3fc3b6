// Package historytest is the contract suite of the event-history (audit) read model. Every
// Store adapter runs it; it covers the store on its own and the Projector writing through it.
package historytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/eventhistory"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// Open returns a fresh, empty store for one test.
type Open = func(t *testing.T) eventhistory.Store

// Run runs the whole suite against the adapter that open builds.
func Run(t *testing.T, open Open) {
	readdbtest.Suite[eventhistory.Store]{
		{"RoundTripEveryField", testRoundTrip},
		{"OldestFirst", testOrdering},
		{"InsertIsIdempotent", testIdempotent},
		{"AfterRevisionAndLimit", testAfterRevisionAndLimit},
		{"TenantAndStreamIsolation", testIsolation},
		{"Reset", testReset},
		{"NoSummaryRoundTrip", testNoSummary},
		{"ProjectorStoresSummariesOnly", testProjectorStoresSummaries},
		{"ProjectorEveryCategoryAndRedelivery", testProjectorEveryCategory},
		{"ProjectorSummarisesOldVersions", testProjectorUpcasts},
		{"ProjectorKeepsUnknownTypesAsEnvelopes", testProjectorUnknownType},
		{"ProjectorKeepsInstructionsOut", testProjectorKeepsInstructionsOut},
		{"ReaderThroughItsPort", testReader},
		{"PersonalDataRoundTrip", testPersonalDataRoundTrip},
		{"ProjectorRecordsWhosePersonalData", testProjectorRecordsWhosePersonalData},
		{"ReaderMarksProtectedData", testReaderMarksProtectedData},
	}.Run(t, open)
}

func ctx(t *testing.T) context.Context { return readdbtest.Context(t) }

// suiteKeys opens and seals the events of every test of the suite.
var suiteKeys = keystore.NewMemory()

var base = time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)

func row(tenant, stream string, rev uint64) eventhistory.Row {
	return eventhistory.Row{
		Tenant: tenant, Stream: stream, Revision: rev, Position: 100 + rev,
		EventID: fmt.Sprintf("evt-%s-%d", stream, rev), Type: collection.EventStatusChanged, SchemaVersion: 1,
		OccurredAt: base.Add(time.Duration(rev) * time.Second), CorrelationID: "corr-1",
		CausationID: fmt.Sprintf("cause-%d", rev), Actor: "client:" + tenant,
		Summary: json.RawMessage(fmt.Sprintf(`{"from":"RUNNING","to":"LOGIN","n":%d}`, rev)),
	}
}

func insert(t *testing.T, s eventhistory.Store, rows ...eventhistory.Row) {
	t.Helper()
	if err := s.Insert(ctx(t), rows); err != nil {
		t.Fatalf("Insert: %v", err)
	}
}

func list(t *testing.T, s eventhistory.Store, tenant, stream string, after *uint64, limit int) []eventhistory.Row {
	t.Helper()
	rows, err := s.List(ctx(t), tenant, stream, after, limit)
	if err != nil {
		t.Fatalf("List(%s, %s): %v", tenant, stream, err)
	}
	return rows
}

func revisions(rows []eventhistory.Row) []uint64 {
	out := []uint64{}
	for _, r := range rows {
		out = append(out, r.Revision)
	}
	return out
}

func assertRevisions(t *testing.T, rows []eventhistory.Row, want ...uint64) {
	t.Helper()
	if want == nil {
		want = []uint64{}
	}
	if got := revisions(rows); !reflect.DeepEqual(got, want) {
		t.Fatalf("revisions = %v, want %v", got, want)
	}
}

// jsonEqual compares summaries by meaning: stores may re-encode JSON.
func jsonEqual(t *testing.T, got, want json.RawMessage) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("stored summary is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("expected summary is not JSON: %v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}

func assertRow(t *testing.T, got, want eventhistory.Row) {
	t.Helper()
	if (got.Summary == nil) != (want.Summary == nil) || (want.Summary != nil && !jsonEqual(t, got.Summary, want.Summary)) {
		t.Fatalf("summary = %s, want %s", got.Summary, want.Summary)
	}
	got.Summary, want.Summary = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("row mismatch\n got: %#v\nwant: %#v", got, want)
	}
}

func testRoundTrip(t *testing.T, s eventhistory.Store) {
	in := row("acme", "collection-c1", 3)
	in.OccurredAt = time.Date(2026, 1, 2, 3, 4, 5, 678_912_345, time.FixedZone("CET", 3600))
	in.SchemaVersion = 2
	in.Position = 1<<40 + 7
	in.Summary = json.RawMessage(`{"msg":"Öppna – 'q' \"dq\" \\ <b>&","list":[1,2.5,null,true],"nested":{"a":{}}}`)
	insert(t, s, in)
	got := list(t, s, "acme", "collection-c1", nil, 0)
	if len(got) != 1 {
		t.Fatalf("List returned %d rows", len(got))
	}
	want := in
	want.OccurredAt = time.Date(2026, 1, 2, 2, 4, 5, 678_000_000, time.UTC)
	if got[0].OccurredAt.Location() != time.UTC {
		t.Errorf("OccurredAt not in UTC: %v", got[0].OccurredAt.Location())
	}
	assertRow(t, got[0], want)
}

func testOrdering(t *testing.T, s eventhistory.Store) {
	insert(t, s, row("acme", "collection-c1", 2), row("acme", "collection-c1", 0))
	insert(t, s, row("acme", "collection-c1", 10), row("acme", "collection-c1", 1))
	assertRevisions(t, list(t, s, "acme", "collection-c1", nil, 0), 0, 1, 2, 10)
}

func testIdempotent(t *testing.T, s eventhistory.Store) {
	batch := []eventhistory.Row{row("acme", "collection-c1", 0), row("acme", "collection-c1", 1)}
	insert(t, s, batch...)
	insert(t, s, batch...)
	insert(t, s, row("acme", "collection-c1", 1), row("acme", "collection-c1", 2), row("acme", "collection-c1", 2))
	got := list(t, s, "acme", "collection-c1", nil, 0)
	assertRevisions(t, got, 0, 1, 2)
	assertRow(t, got[1], row("acme", "collection-c1", 1))
}

func ptr(v uint64) *uint64 { return &v }

func testAfterRevisionAndLimit(t *testing.T, s eventhistory.Store) {
	var rows []eventhistory.Row
	for rev := range uint64(6) {
		rows = append(rows, row("acme", "collection-c1", rev))
	}
	insert(t, s, rows...)
	assertRevisions(t, list(t, s, "acme", "collection-c1", nil, 0), 0, 1, 2, 3, 4, 5)
	assertRevisions(t, list(t, s, "acme", "collection-c1", ptr(0), 0), 1, 2, 3, 4, 5)
	assertRevisions(t, list(t, s, "acme", "collection-c1", ptr(3), 0), 4, 5)
	assertRevisions(t, list(t, s, "acme", "collection-c1", ptr(5), 0))
	assertRevisions(t, list(t, s, "acme", "collection-c1", nil, 2), 0, 1)
	assertRevisions(t, list(t, s, "acme", "collection-c1", ptr(1), 3), 2, 3, 4)
	// Paging through with the last revision seen visits every event once.
	var seen []uint64
	var after *uint64
	for {
		page := list(t, s, "acme", "collection-c1", after, 4)
		if len(page) == 0 {
			break
		}
		seen = append(seen, revisions(page)...)
		after = ptr(page[len(page)-1].Revision)
	}
	if !reflect.DeepEqual(seen, []uint64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("paging saw %v", seen)
	}
}

func testIsolation(t *testing.T, s eventhistory.Store) {
	insert(t, s, row("acme", "collection-a", 0), row("acme", "collection-a", 1),
		row("other", "collection-b", 0), row("acme", "collection-ab", 0))
	assertRevisions(t, list(t, s, "other", "collection-a", nil, 0))
	assertRevisions(t, list(t, s, "", "collection-a", nil, 0))
	assertRevisions(t, list(t, s, "acme", "collection-b", nil, 0))
	assertRevisions(t, list(t, s, "acme", "collection-unknown", nil, 0))
	got := list(t, s, "acme", "collection-a", nil, 0)
	assertRevisions(t, got, 0, 1)
	for _, r := range got {
		if r.Stream != "collection-a" || r.Tenant != "acme" {
			t.Fatalf("List returned %s of %s", r.Stream, r.Tenant)
		}
	}
	assertRevisions(t, list(t, s, "other", "collection-b", nil, 0), 0)
}

func testReset(t *testing.T, s eventhistory.Store) {
	insert(t, s, row("acme", "collection-c1", 0), row("acme", "collection-c1", 1))
	if err := s.Reset(ctx(t)); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	assertRevisions(t, list(t, s, "acme", "collection-c1", nil, 0))
	insert(t, s, row("acme", "collection-c1", 0))
	assertRevisions(t, list(t, s, "acme", "collection-c1", nil, 0), 0)
}

func testNoSummary(t *testing.T, s eventhistory.Store) {
	in := row("acme", "consent-k1", 0)
	in.Type, in.Summary = "consent.granted", nil
	insert(t, s, in)
	got := list(t, s, "acme", "consent-k1", nil, 0)
	if len(got) != 1 || got[0].Summary != nil {
		t.Fatalf("a row without a summary came back as %+v", got)
	}
	assertRow(t, got[0], in)
}

// The test persona and values the audit history must never show.
const (
	personalNumber  = "199001010017"
	personName      = "Tolvan Tolvansson"
	insuranceNumber = "H-4471-2703"
	requestHash     = "hmac-sha256:9f2c4e1d"
	accountNumber   = "SE4550000000058398257466"
	fileName        = "Tolvan_Tolvansson_pension.pdf"
)

var neverShown = []string{personalNumber, "Tolvan", insuranceNumber, requestHash, "9f2c4e1d", accountNumber,
	"10523.75", "189.5", "Hemförsäkring ABC123", fileName, "personal"}

// assertNothingShown fails if any stored summary shows a value the audit history must not show.
func assertNothingShown(t *testing.T, rows []eventhistory.Row, more ...string) {
	t.Helper()
	for _, r := range rows {
		for _, v := range append(neverShown, more...) {
			if bytes.Contains(r.Summary, []byte(v)) {
				t.Fatalf("%s/%d (%s) shows %q: %s", r.Stream, r.Revision, r.Type, v, r.Summary)
			}
		}
		if r.Summary == nil {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(r.Summary, &fields); err != nil || fields == nil {
			t.Fatalf("%s/%d summary is not a JSON object: %v: %s", r.Stream, r.Revision, err, r.Summary)
		}
	}
}

func handle(t *testing.T, p *eventhistory.Projector, batch []eventschema.Envelope) {
	t.Helper()
	if err := p.Handle(ctx(t), batch); err != nil {
		t.Fatalf("Handle: %v", err)
	}
}

// wantRow is the row an envelope must project to: its envelope and its type's audit summary.
func wantRow(t *testing.T, reg *eventschema.Registry, env eventschema.Envelope) eventhistory.Row {
	t.Helper()
	summary, version, err := reg.AuditSummary(env)
	if err != nil {
		t.Fatal(err)
	}
	out := eventhistory.Row{
		Tenant: env.Tenant, Stream: env.Stream, Revision: env.Revision, Position: env.Position,
		EventID: env.EventID, Type: env.Type, SchemaVersion: version, OccurredAt: env.OccurredAt,
		CorrelationID: env.CorrelationID, CausationID: env.CausationID, Actor: env.Actor, Summary: summary,
	}
	if eventschema.PlainPersonal(env.Payload) {
		out.PersonalData = eventhistory.PersonalPlain // the log appends without sealing
	}
	return out
}

// testProjectorStoresSummaries feeds events whose public parts carry collected values, a
// fingerprint and a file name: the history keeps each event's envelope and audit summary only.
func testProjectorStoresSummaries(t *testing.T, s eventhistory.Store) {
	log := eventlog.New(t)
	p := eventhistory.NewProjector(log.Registry(), s)
	if p.Name() != eventhistory.ProjectorName {
		t.Fatalf("Name = %q", p.Name())
	}
	stream := collection.StreamName("c-1")
	str := func(s string) *string { return &s }
	num := func(f float64) *float64 { return &f }
	pdf := collection.NewDocument("d-1", collection.DocumentUploadedPDF, "application/pdf", fileName, []byte("%PDF-1.4 "+personName))
	pdf.At = base
	envs := []eventschema.Envelope{
		log.Append("acme", stream, base, collection.Started{
			CollectionID: "c-1", ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", StartedAt: base,
			Personal: &collection.StartedPerson{PersonalNumber: personalNumber, AccountOwnerName: personName, RequestHash: requestHash},
		}),
		log.Append("acme", stream, base, collection.DocumentUploaded{Document: pdf}),
		log.Append("acme", stream, base.Add(time.Second), collection.InsurancesCollected{
			CollectedAt: base.Add(time.Second), InsuranceCount: 1,
			Personal: &collection.InsuranceRecords{
				Insurances: []collection.Insurance{{ID: "ins-1", InsuranceType: "CAR", InsuranceNumber: str(insuranceNumber),
					DisplayName: str("Hemförsäkring ABC123"), Premium: num(189.5)}},
				HolderNames: map[string]string{"ins-1": personName}},
		}),
		log.Append("acme", stream, base.Add(2*time.Second), collection.WealthCollected{
			CollectedAt: base.Add(2 * time.Second), Counts: collection.WealthCounts{CheckingAccounts: 1},
			Personal: &collection.WealthRecords{
				CheckingAccounts: []collection.PSD2Account{{ID: "A1", IBAN: str(accountNumber), Balance: &collection.Money{Amount: 10523.75, Currency: "SEK"}}}},
		}),
	}
	for _, env := range envs {
		if env.Type != collection.EventDocumentUploaded && !bytes.Contains(env.Payload, []byte(personalNumber)) &&
			!bytes.Contains(env.Payload, []byte(insuranceNumber)) && !bytes.Contains(env.Payload, []byte(accountNumber)) {
			t.Fatalf("test setup: the event store payload should hold a value to hide: %s", env.Payload)
		}
	}
	handle(t, p, envs)
	got := list(t, s, "acme", stream, nil, 0)
	assertRevisions(t, got, 0, 1, 2, 3)
	assertNothingShown(t, got)
	for i, env := range envs {
		assertRow(t, got[i], wantRow(t, log.Registry(), env))
	}
	if !jsonEqual(t, got[2].Summary, json.RawMessage(`{"counts":{"insurances":1},"collectedAt":"2026-03-04T05:06:08.891Z"}`)) {
		t.Fatalf("insurances summary = %s", got[2].Summary)
	}
}

func testProjectorEveryCategory(t *testing.T, s eventhistory.Store) {
	log := eventlog.New(t)
	p := eventhistory.NewProjector(log.Registry(), s)
	cs, cl := collection.StreamName("c-1"), client.StreamName("acme")
	keyHash := client.HashAPIKey("secret")
	batch := []eventschema.Envelope{
		log.Append("acme", cl, base, client.Registered{ClientID: "acme", Name: "Acme AB", RegisteredAt: base}),
		log.Append("acme", cs, base, collection.Started{
			CollectionID: "c-1", ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductWealth,
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", StartedAt: base,
			Personal: &collection.StartedPerson{PersonalNumber: personalNumber}}),
		log.Append("acme", cl, base, client.APIKeyIssued{KeyID: "k1", KeyHash: keyHash, IssuedAt: base}),
		log.Append("acme", cs, base, collection.Claimed{WorkerID: "w1", ClaimedAt: base}),
		log.Append("acme", cs, base, collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusLogin,
			ExtraInformation: map[string]any{"MESSAGE": "hej"}, ChangedAt: base}),
		log.Append("acme", cl, base, client.APIKeyRevoked{KeyID: "k1", RevokedAt: base}),
	}
	handle(t, p, batch)
	handle(t, p, batch)      // redelivery
	handle(t, p, batch[2:5]) // partial redelivery
	assertRevisions(t, list(t, s, "acme", cs, nil, 0), 0, 1, 2)
	assertRevisions(t, list(t, s, "acme", cl, nil, 0), 0, 1, 2)
	got := list(t, s, "acme", cl, nil, 0)
	for i, typ := range []string{client.EventRegistered, client.EventAPIKeyIssued, client.EventAPIKeyRevoked} {
		if got[i].Type != typ {
			t.Fatalf("client row %d has type %s, want %s", i, got[i].Type, typ)
		}
	}
	assertNothingShown(t, got, keyHash, "Acme AB")
	assertNothingShown(t, list(t, s, "acme", cs, nil, 0), "hej", "w1")
	st := list(t, s, "acme", cs, ptr(1), 1)
	if len(st) != 1 || !jsonEqual(t, st[0].Summary, json.RawMessage(`{"from":"RUNNING","to":"LOGIN","changedAt":"2026-03-04T05:06:07.891Z"}`)) {
		t.Fatalf("status change stored as %v", st)
	}
}

// testProjectorUpcasts stores a collection.started of schema version 1, whose personal number
// sits in its input map rather than in "personal": it is summarised as the current version.
func testProjectorUpcasts(t *testing.T, s eventhistory.Store) {
	log := eventlog.New(t)
	p := eventhistory.NewProjector(log.Registry(), s)
	v1 := log.AppendRaw(eventschema.Envelope{
		Type: collection.EventStarted, SchemaVersion: 1, Tenant: "acme", Stream: collection.StreamName("c-v1"),
		OccurredAt: base,
		Payload: []byte(`{"collectionId":"c-v1","clientId":"acme","company":"se-demo-insurer",` +
			`"loginMethod":"BANKID","apiVersion":"2025-01-01","startedAt":"2026-01-02T03:04:05.678Z",` +
			`"input":{"SWEDISH_PERSONAL_NUMBER":"` + personalNumber + `","ACCOUNT_OWNER_NAME":"` + personName + `"}}`),
	})
	handle(t, p, []eventschema.Envelope{v1})
	got := list(t, s, "acme", v1.Stream, nil, 0)
	assertRevisions(t, got, 0)
	assertNothingShown(t, got)
	if current, _ := log.Registry().CurrentVersion(collection.EventStarted); got[0].SchemaVersion != current {
		t.Fatalf("stored schema version %d, want the current %d (the summary is of the upcast event)", got[0].SchemaVersion, current)
	}
	want := `{"company":"se-demo-insurer","product":"INSURANCE","loginMethod":"BANKID","apiVersion":"2025-01-01",` +
		`"hasUserUuid":false,"startedAt":"2026-01-02T03:04:05.678Z"}`
	if !jsonEqual(t, got[0].Summary, json.RawMessage(want)) {
		t.Fatalf("summary = %s, want %s", got[0].Summary, want)
	}
}

// testProjectorUnknownType: a type or schema version a newer build wrote is kept as its envelope
// alone, whatever its payload holds; a payload of a known type that does not decode stops the
// projection rather than being stored.
func testProjectorUnknownType(t *testing.T, s eventhistory.Store) {
	log := eventlog.New(t)
	p := eventhistory.NewProjector(log.Registry(), s)
	future := log.AppendRaw(eventschema.Envelope{
		Type: "consent.granted", SchemaVersion: 3, Tenant: "acme", Stream: "consent-k1", OccurredAt: base,
		Payload: []byte(`{"consentId":"k1","scope":["AIS"],"personal":{"email":"tolvan@example.se"}}`),
	})
	newer := log.AppendRaw(eventschema.Envelope{
		Type: collection.EventClaimed, SchemaVersion: 9, Tenant: "acme", Stream: collection.StreamName("c-9"),
		OccurredAt: base, Payload: []byte(`{"workerId":"w9","personal":{"name":"` + personName + `"}}`),
	})
	handle(t, p, []eventschema.Envelope{future, newer})
	got := list(t, s, "acme", "consent-k1", nil, 0)
	if len(got) != 1 || got[0].SchemaVersion != 3 || got[0].Type != "consent.granted" || got[0].Summary != nil {
		t.Fatalf("unknown type stored as %+v", got)
	}
	got = list(t, s, "acme", newer.Stream, nil, 0)
	if len(got) != 1 || got[0].SchemaVersion != 9 || got[0].Summary != nil {
		t.Fatalf("newer schema version stored as %+v", got)
	}

	bad := log.AppendRaw(eventschema.Envelope{Type: collection.EventClaimed, SchemaVersion: 1, Tenant: "acme",
		Stream: collection.StreamName("c-bad"), OccurredAt: base, Payload: []byte(`["not","an","object"]`)})
	if err := p.Handle(ctx(t), []eventschema.Envelope{bad}); err == nil {
		t.Fatal("a payload that does not decode was stored")
	}
}

// testProjectorKeepsInstructionsOut: the requests a client-side login hands to the client carry
// the user's device bearer token in their headers and personal data in their URLs and bodies.
// Neither the current writer's event (collection.status-changed v2, instructions in
// "personal") nor one written as version 1 (instructions in the public part, moved by the
// upcaster) shows them; the history counts them, so auditors see that they were issued.
func testProjectorKeepsInstructionsOut(t *testing.T, s eventhistory.Store) {
	const token, host, marker = "device-bearer-7f3a9c", "bank.example", "body-marker-5d1e"
	secrets := []string{token, host, marker, "Authorization", "Run the requests"}
	body := `{"personalNumber":"` + personalNumber + `","m":"` + marker + `"}`
	instructions := []collection.Instruction{
		{RequestID: "r1", Method: "POST", URL: "https://" + host + "/eid/start?pnr=" + personalNumber,
			Headers: map[string]string{"Authorization": "Bearer " + token}, Body: &body},
		{RequestID: "r2", Method: "GET", URL: "https://" + host + "/eid/collect"},
	}

	log := eventlog.New(t)
	p := eventhistory.NewProjector(log.Registry(), s)
	// The event as the domain decides it today.
	current := collection.StreamName("c-v2")
	agg := collection.Kind.New()
	if err := domain.Rehydrate(agg,
		collection.Started{CollectionID: "c-v2", ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
			LoginMethod: "SWEDISH_MOBILE_EID_SAME_DEVICE_CLIENT_SIDE", APIVersion: "2026-04-01", StartedAt: base},
		collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusLogin, ChangedAt: base},
	); err != nil {
		t.Fatal(err)
	}
	if err := agg.ChangeStatusWith(collection.StatusWaitingForUserAction,
		collection.StatusDetails{Message: "Run the requests", Instructions: instructions}, base); err != nil {
		t.Fatalf("ChangeStatusWith: %v", err)
	}
	decided := agg.Recorded()
	if len(decided) != 1 {
		t.Fatalf("ChangeStatusWith recorded %v", decided)
	}
	v2 := log.Append("acme", current, base, decided[0])
	// The same as written before the instructions moved into "personal".
	v1Payload, err := json.Marshal(map[string]any{"from": "LOGIN", "to": "WAITING_FOR_USER_ACTION", "message": "Run the requests",
		"instructions": instructions, "changedAt": "2026-03-04T05:06:07.891Z"})
	if err != nil {
		t.Fatal(err)
	}
	v1 := log.AppendRaw(eventschema.Envelope{Type: collection.EventStatusChanged, SchemaVersion: 1, Tenant: "acme",
		Stream: collection.StreamName("c-v1"), OccurredAt: base, Payload: v1Payload})
	for _, env := range []eventschema.Envelope{v2, v1} {
		if !bytes.Contains(env.Payload, []byte(token)) {
			t.Fatalf("test setup: the event store payload should hold the token: %s", env.Payload)
		}
	}

	handle(t, p, []eventschema.Envelope{v2, v1})
	for _, env := range []eventschema.Envelope{v2, v1} {
		got := list(t, s, "acme", env.Stream, nil, 0)
		if len(got) != 1 {
			t.Fatalf("%s: %d rows", env.Stream, len(got))
		}
		assertNothingShown(t, got, secrets...)
		want := `{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","instructionCount":2,"changedAt":"2026-03-04T05:06:07.891Z"}`
		if got[0].SchemaVersion != 2 || !jsonEqual(t, got[0].Summary, json.RawMessage(want)) {
			t.Errorf("%s stored as v%d %s, want v2 %s", env.Stream, got[0].SchemaVersion, got[0].Summary, want)
		}
	}
}

// testReader reads through the query side's port: the envelope and the summary of each event of
// the tenant's stream, in order, paged, and nothing of another tenant's.
func testReader(t *testing.T, s eventhistory.Store) {
	a0, a1, a2 := row("acme", "collection-a", 0), row("acme", "collection-a", 1), row("acme", "collection-a", 2)
	a2.Summary = nil
	insert(t, s, a0, a1, a2, row("other", "collection-b", 0))
	var reader query.HistoryReader = eventhistory.NewReader(s, suiteKeys)
	got, err := reader.List(ctx(t), "acme", "collection-a", nil, 0)
	if err != nil || len(got) != 3 {
		t.Fatalf("List = %v, %v", got, err)
	}
	for i, r := range []eventhistory.Row{a0, a1, a2} {
		g := got[i]
		if (g.Summary == nil) != (r.Summary == nil) || (r.Summary != nil && !jsonEqual(t, g.Summary, r.Summary)) {
			t.Fatalf("event %d summary = %s, want %s", i, g.Summary, r.Summary)
		}
		g.Summary = nil
		want := query.HistoryEvent{EventID: r.EventID, Type: r.Type, SchemaVersion: r.SchemaVersion, Tenant: r.Tenant,
			Stream: r.Stream, Revision: r.Revision, Position: r.Position, OccurredAt: r.OccurredAt,
			CorrelationID: r.CorrelationID, CausationID: r.CausationID, Actor: r.Actor}
		if !reflect.DeepEqual(g, want) {
			t.Fatalf("event %d = %#v\nwant %#v", i, g, want)
		}
	}
	page, err := reader.List(ctx(t), "acme", "collection-a", ptr(0), 1)
	if err != nil || len(page) != 1 || page[0].Revision != 1 {
		t.Fatalf("page after 0 = %v, %v", page, err)
	}
	if page, err := reader.List(ctx(t), "acme", "collection-a", ptr(math.MaxUint64), 0); err != nil || len(page) != 0 {
		t.Fatalf("page after the last possible revision = %v, %v", page, err)
	}
	if other, err := reader.List(ctx(t), "other", "collection-a", nil, 0); err != nil || len(other) != 0 {
		t.Fatalf("another tenant's stream = %v, %v", other, err)
	}
}

// testPersonalDataRoundTrip: whose personal data an event held is stored with its row.
func testPersonalDataRoundTrip(t *testing.T, s eventhistory.Store) {
	sealed, plain, none := row("acme", "collection-c1", 0), row("acme", "collection-c1", 1), row("acme", "collection-c1", 2)
	sealed.PersonalData, sealed.DataSubject = eventhistory.PersonalSealed, "user-6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	plain.PersonalData = eventhistory.PersonalPlain
	erased := row("acme", "collection-c1", 3)
	erased.PersonalData = eventhistory.PersonalErased
	insert(t, s, sealed, plain, none, erased)
	got := list(t, s, "acme", "collection-c1", nil, 0)
	assertRevisions(t, got, 0, 1, 2, 3)
	for i, want := range []eventhistory.Row{sealed, plain, none, erased} {
		assertRow(t, got[i], want)
	}
}

// testProjectorRecordsWhosePersonalData: the projector takes events as the event store holds
// them, sealed, and records under which subject each held personal data, one written before
// sealing as plain, one appended after its subject's erasure (the erased marker) as erased, and
// one without personal data as nothing; the summaries are those of the events' public parts. It
// opens nothing: a key store that lost every key changes none of it.
func testProjectorRecordsWhosePersonalData(t *testing.T, s eventhistory.Store) {
	log := eventlog.New(t)
	keys := keystore.NewMemory()
	p := eventhistory.NewProjector(log.Registry(), s)
	stream := collection.StreamName("c-whose")
	started := log.Append("acme", stream, base, collection.Started{
		CollectionID: "c-whose", ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", UserUUID: "u-whose",
		StartedAt: base, Personal: &collection.StartedPerson{PersonalNumber: personalNumber, AccountOwnerName: personName, RequestHash: requestHash}})
	sealedStarted := started
	var err error
	if sealedStarted.Payload, _, err = eventschema.SealPersonal(ctx(t), keys, "user-u-whose", started.Payload); err != nil {
		t.Fatal(err)
	}
	plainData := log.Append("acme", stream, base.Add(time.Second), collection.InsurancesCollected{CollectedAt: base.Add(time.Second),
		InsuranceCount: 1, Personal: &collection.InsuranceRecords{Insurances: []collection.Insurance{{ID: "ins-1", InsuranceType: "CAR"}},
			HolderNames: map[string]string{"ins-1": personName}}})
	claimed := log.Append("acme", stream, base.Add(2*time.Second), collection.Claimed{WorkerID: "w1", ClaimedAt: base.Add(2 * time.Second)})
	late := log.Append("acme", stream, base.Add(3*time.Second), collection.StatusChanged{From: collection.StatusRunning,
		To: collection.StatusWaitingForUserAction, ChangedAt: base.Add(3 * time.Second),
		Personal: &collection.StatusPersonal{QRStartSecret: "qr-secret"}})
	erasedLate := late
	if err := keys.Destroy(ctx(t), "user-u-whose"); err != nil {
		t.Fatal(err)
	}
	if erasedLate.Payload, _, err = eventschema.SealPersonal(ctx(t), keys, "user-u-whose", late.Payload); err != nil {
		t.Fatal(err)
	}
	keys.Forget() // nothing is opened: no key is needed
	batch := []eventschema.Envelope{sealedStarted, plainData, claimed, erasedLate}
	handle(t, p, batch)
	got := list(t, s, "acme", stream, nil, 0)
	assertRevisions(t, got, 0, 1, 2, 3)
	assertNothingShown(t, got)
	lateWithout := late
	if lateWithout.Payload, err = eventschema.WithoutPersonal(late.Payload); err != nil {
		t.Fatal(err)
	}
	want := []eventhistory.Row{wantRow(t, log.Registry(), started), wantRow(t, log.Registry(), plainData),
		wantRow(t, log.Registry(), claimed), wantRow(t, log.Registry(), lateWithout)}
	want[0].PersonalData, want[0].DataSubject = eventhistory.PersonalSealed, "user-u-whose"
	want[3].PersonalData = eventhistory.PersonalErased
	for i := range want {
		assertRow(t, got[i], want[i])
	}
}

// testReaderMarksProtectedData: the summary of an event that held personal data says so, as
// sealed, as erased from the moment its subject's key is destroyed, or as unsealed for one
// written before sealing, and shows none of it; other events are not marked; a subject the key
// store does not know is an error, never "erased".
func testReaderMarksProtectedData(t *testing.T, s eventhistory.Store) {
	keys := keystore.NewMemory()
	if _, err := keys.GetOrCreate(ctx(t), "user-u-marked"); err != nil {
		t.Fatal(err)
	}
	sealed, plain, none := row("acme", "collection-m", 0), row("acme", "collection-m", 1), row("acme", "collection-m", 2)
	sealed.PersonalData, sealed.DataSubject = eventhistory.PersonalSealed, "user-u-marked"
	plain.PersonalData = eventhistory.PersonalPlain
	unknownType := row("acme", "collection-m", 3)
	unknownType.Summary, unknownType.PersonalData, unknownType.DataSubject = nil, eventhistory.PersonalSealed, "user-u-marked"
	lost := row("acme", "collection-lost", 0)
	lost.PersonalData, lost.DataSubject = eventhistory.PersonalSealed, "user-u-lost"
	// An event appended after its subject's erasure is erased from the start, whatever the key
	// store says of anyone.
	late := row("acme", "collection-late", 0)
	late.PersonalData = eventhistory.PersonalErased
	insert(t, s, sealed, plain, none, unknownType, lost, late)
	reader := eventhistory.NewReader(s, keys)
	marks := func() []string {
		t.Helper()
		events, err := reader.List(ctx(t), "acme", "collection-m", nil, 0)
		if err != nil || len(events) != 4 {
			t.Fatalf("List = %v, %v", events, err)
		}
		var out []string
		for _, e := range events {
			if e.Summary == nil {
				out = append(out, "no summary")
				continue
			}
			var fields map[string]any
			if err := json.Unmarshal(e.Summary, &fields); err != nil {
				t.Fatalf("summary %s: %v", e.Summary, err)
			}
			if fields["from"] != "RUNNING" || bytes.Contains(e.Summary, []byte("personal")) || bytes.Contains(e.Summary, []byte("u-marked")) {
				t.Fatalf("summary %s lost its members or shows too much", e.Summary)
			}
			mark, _ := fields[eventschema.ProtectedDataMember].(string)
			out = append(out, mark)
		}
		return out
	}
	if got, want := marks(), []string{"sealed", "unsealed", "", "no summary"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("marks = %q, want %q", got, want)
	}
	if err := keys.Destroy(ctx(t), "user-u-marked"); err != nil {
		t.Fatal(err)
	}
	if got, want := marks(), []string{"erased", "unsealed", "", "no summary"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("marks after the erasure = %q, want %q", got, want)
	}
	if _, err := reader.List(ctx(t), "acme", "collection-lost", nil, 0); !errors.Is(err, eventschema.ErrKeyNotFound) {
		t.Fatalf("a subject the key store does not know: %v", err)
	}
	events, err := reader.List(ctx(t), "acme", "collection-late", nil, 0)
	if err != nil || len(events) != 1 {
		t.Fatalf("List = %v, %v", events, err)
	}
	var fields map[string]any
	if err := json.Unmarshal(events[0].Summary, &fields); err != nil || fields[eventschema.ProtectedDataMember] != eventschema.ProtectedDataErased {
		t.Fatalf("the summary of an event appended after the erasure: %s (%v)", events[0].Summary, err)
	}
}
