// Package historytest is the contract suite of the event-history (audit) read model. Every
// Store adapter runs it; it covers the store on its own and the Projector writing through it.
package historytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/eventhistory"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb/readdbtest"
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
		{"ProjectorStripsPersonalData", testProjectorStripsPersonal},
		{"ProjectorEveryCategoryAndRedelivery", testProjectorEveryCategory},
		{"ProjectorUpcastsBeforeStripping", testProjectorUpcasts},
		{"ProjectorKeepsUnknownTypes", testProjectorUnknownType},
		{"ProjectorKeepsInstructionsOut", testProjectorKeepsInstructionsOut},
	}.Run(t, open)
}

func ctx(t *testing.T) context.Context { return readdbtest.Context(t) }

var base = time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)

func row(tenant, stream string, rev uint64) eventhistory.Row {
	return eventhistory.Row{
		Tenant: tenant, Stream: stream, Revision: rev, Position: 100 + rev,
		EventID: fmt.Sprintf("evt-%s-%d", stream, rev), Type: collection.EventStatusChanged, SchemaVersion: 1,
		OccurredAt: base.Add(time.Duration(rev) * time.Second), CorrelationID: "corr-1",
		CausationID: fmt.Sprintf("cause-%d", rev), Actor: "client:" + tenant,
		Payload: json.RawMessage(fmt.Sprintf(`{"from":"RUNNING","to":"LOGIN","n":%d}`, rev)),
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

// jsonEqual compares payloads by meaning: stores may re-encode JSON.
func jsonEqual(t *testing.T, got, want json.RawMessage) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("stored payload is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("expected payload is not JSON: %v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}

func assertRow(t *testing.T, got, want eventhistory.Row) {
	t.Helper()
	if !jsonEqual(t, got.Payload, want.Payload) {
		t.Fatalf("payload = %s, want %s", got.Payload, want.Payload)
	}
	got.Payload, want.Payload = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("row mismatch\n got: %#v\nwant: %#v", got, want)
	}
}

func testRoundTrip(t *testing.T, s eventhistory.Store) {
	in := row("acme", "collection-c1", 3)
	in.OccurredAt = time.Date(2026, 1, 2, 3, 4, 5, 678_912_345, time.FixedZone("CET", 3600))
	in.SchemaVersion = 2
	in.Position = 1<<40 + 7
	in.Payload = json.RawMessage(`{"msg":"Öppna – 'q' \"dq\" \\ <b>&","list":[1,2.5,null,true],"nested":{"a":{}}}`)
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

const (
	personalNumber = "199001010017"
	personName     = "Tolvan Tolvansson"
)

// assertNoPersonalData fails if any stored payload still carries the test persona's data or a
// "personal" field.
func assertNoPersonalData(t *testing.T, rows []eventhistory.Row) {
	t.Helper()
	for _, r := range rows {
		if bytes.Contains(r.Payload, []byte(personalNumber)) || bytes.Contains(r.Payload, []byte("Tolvan")) {
			t.Fatalf("%s/%d (%s) keeps personal data: %s", r.Stream, r.Revision, r.Type, r.Payload)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(r.Payload, &fields); err != nil {
			t.Fatalf("%s/%d payload: %v", r.Stream, r.Revision, err)
		}
		if _, ok := fields["personal"]; ok {
			t.Fatalf("%s/%d keeps a personal field: %s", r.Stream, r.Revision, r.Payload)
		}
	}
}

func handle(t *testing.T, p *eventhistory.Projector, batch []eventschema.Envelope) {
	t.Helper()
	if err := p.Handle(ctx(t), batch); err != nil {
		t.Fatalf("Handle: %v", err)
	}
}

func withoutPersonal(t *testing.T, payload json.RawMessage) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "personal")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func testProjectorStripsPersonal(t *testing.T, s eventhistory.Store) {
	log := eventlog.New(t)
	p := eventhistory.NewProjector(log.Registry(), s)
	if p.Name() != eventhistory.ProjectorName {
		t.Fatalf("Name = %q", p.Name())
	}
	stream := collection.StreamName("c-1")
	started := log.Append("acme", stream, base, collection.Started{
		CollectionID: "c-1", ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", RequestHash: "9f2c", StartedAt: base,
		Personal: &collection.StartedPerson{PersonalNumber: personalNumber, AccountOwnerName: personName},
	})
	if !bytes.Contains(started.Payload, []byte(personalNumber)) {
		t.Fatalf("test setup: the event store payload should hold the personal number: %s", started.Payload)
	}
	collected := log.Append("acme", stream, base.Add(time.Second), collection.InsurancesCollected{
		CollectedAt: base.Add(time.Second),
		Insurances:  []collection.Insurance{{ID: "ins-1", InsuranceType: "HOME"}},
		Personal:    &collection.InsurancesPersons{HolderNames: map[string]string{"ins-1": personName}},
	})
	handle(t, p, []eventschema.Envelope{started, collected})
	got := list(t, s, "acme", stream, nil, 0)
	assertRevisions(t, got, 0, 1)
	assertNoPersonalData(t, got)
	for i, env := range []eventschema.Envelope{started, collected} {
		want := eventhistory.Row{
			Tenant: env.Tenant, Stream: env.Stream, Revision: env.Revision, Position: env.Position,
			EventID: env.EventID, Type: env.Type, SchemaVersion: env.SchemaVersion, OccurredAt: env.OccurredAt,
			CorrelationID: env.CorrelationID, CausationID: env.CausationID, Actor: env.Actor,
			Payload: withoutPersonal(t, env.Payload),
		}
		assertRow(t, got[i], want)
	}
}

func testProjectorEveryCategory(t *testing.T, s eventhistory.Store) {
	log := eventlog.New(t)
	p := eventhistory.NewProjector(log.Registry(), s)
	cs, cl := collection.StreamName("c-1"), client.StreamName("acme")
	batch := []eventschema.Envelope{
		log.Append("acme", cl, base, client.Registered{ClientID: "acme", Name: "Acme AB", RegisteredAt: base}),
		log.Append("acme", cs, base, collection.Started{
			CollectionID: "c-1", ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductWealth,
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", StartedAt: base,
			Personal: &collection.StartedPerson{PersonalNumber: personalNumber}}),
		log.Append("acme", cl, base, client.APIKeyIssued{KeyID: "k1", KeyHash: client.HashAPIKey("secret"), IssuedAt: base}),
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
	assertNoPersonalData(t, list(t, s, "acme", cs, nil, 0))
	st := list(t, s, "acme", cs, ptr(1), 1)
	if len(st) != 1 || !jsonEqual(t, st[0].Payload, batch[4].Payload) {
		t.Fatalf("status change stored as %v", st)
	}
}

// testProjectorUpcasts stores a collection.started of schema version 1, whose personal number
// sits in its input map rather than in "personal": only upcasting first removes it.
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
	assertNoPersonalData(t, got)
	if got[0].SchemaVersion != 2 {
		t.Fatalf("stored schema version %d, want the current 2 (payload is upcast)", got[0].SchemaVersion)
	}
	want := `{"collectionId":"c-v1","clientId":"acme","company":"se-demo-insurer","product":"INSURANCE",` +
		`"loginMethod":"BANKID","apiVersion":"2025-01-01","requestHash":"","startedAt":"2026-01-02T03:04:05.678Z"}`
	if !jsonEqual(t, got[0].Payload, json.RawMessage(want)) {
		t.Fatalf("payload = %s, want %s", got[0].Payload, want)
	}
}

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
	if len(got) != 1 || got[0].SchemaVersion != 3 || strings.Contains(string(got[0].Payload), "tolvan") ||
		!jsonEqual(t, got[0].Payload, json.RawMessage(`{"consentId":"k1","scope":["AIS"]}`)) {
		t.Fatalf("unknown type stored as %+v", got)
	}
	got = list(t, s, "acme", newer.Stream, nil, 0)
	if len(got) != 1 || got[0].SchemaVersion != 9 {
		t.Fatalf("newer schema version stored as %+v", got)
	}
	assertNoPersonalData(t, got)

	bad := log.AppendRaw(eventschema.Envelope{Type: "consent.granted", SchemaVersion: 1, Tenant: "acme",
		Stream: "consent-k2", OccurredAt: base, Payload: []byte(`["not","an","object"]`)})
	if err := p.Handle(ctx(t), []eventschema.Envelope{bad}); err == nil {
		t.Fatal("a payload that is not a JSON object was stored")
	}
}

// testProjectorKeepsInstructionsOut: the requests a client-side login hands to the client carry
// the user's device bearer token in their headers and personal data in their URLs and bodies.
// Neither the current writer's event (collection.status-changed v2, instructions in
// "personal") nor one written as version 1 (instructions in the public part, moved by the
// upcaster) leaves them in the history; the request ids stay, so auditors see that they were
// issued.
func testProjectorKeepsInstructionsOut(t *testing.T, s eventhistory.Store) {
	const token, host, marker = "device-bearer-7f3a9c", "bank.example", "body-marker-5d1e"
	secrets := []string{token, host, marker, "Authorization", personalNumber}
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
	agg, err := collection.Rehydrate([]domain.Event{
		collection.Started{CollectionID: "c-v2", ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
			LoginMethod: "SWEDISH_MOBILE_EID_SAME_DEVICE_CLIENT_SIDE", APIVersion: "2026-04-01", StartedAt: base},
		collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusLogin, ChangedAt: base},
	})
	if err != nil {
		t.Fatal(err)
	}
	decided, err := agg.ChangeStatusWith(collection.StatusWaitingForUserAction,
		collection.StatusDetails{Message: "Run the requests", Instructions: instructions}, base)
	if err != nil || len(decided) != 1 {
		t.Fatalf("ChangeStatusWith = %v, %v", decided, err)
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
		assertNoPersonalData(t, got)
		for _, secret := range secrets {
			if bytes.Contains(got[0].Payload, []byte(secret)) {
				t.Errorf("%s (stored as v%d) keeps %q: %s", env.Stream, env.SchemaVersion, secret, got[0].Payload)
			}
		}
		want := `{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","message":"Run the requests",` +
			`"instructionRequestIds":["r1","r2"],"changedAt":"2026-03-04T05:06:07.891Z"}`
		if got[0].SchemaVersion != 2 || !jsonEqual(t, got[0].Payload, json.RawMessage(want)) {
			t.Errorf("%s stored as v%d %s, want v2 %s", env.Stream, got[0].SchemaVersion, got[0].Payload, want)
		}
	}
}
