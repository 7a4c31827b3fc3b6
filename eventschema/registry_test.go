package eventschema_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

func registry(t *testing.T) *eventschema.Registry {
	t.Helper()
	r, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var exampleName = regexp.MustCompile(`^(.+)\.v(\d+)(\.[a-z0-9-]+)?$`)

// TestEveryStoredExampleDecodes proves that every type and schema version ever written still
// validates against its schema and decodes (upcast) into today's domain event, in each of the
// forms a reader meets it in: plain (written before sealing, or opened), and sealed under a data
// subject that was then erased, which a reader gets without its personal member.
func TestEveryStoredExampleDecodes(t *testing.T) {
	r := registry(t)
	files, err := filepath.Glob("testdata/examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, f := range files {
		// <type>.v<version>[.<variant>].json
		m := exampleName.FindStringSubmatch(strings.TrimSuffix(filepath.Base(f), ".json"))
		if m == nil {
			t.Fatalf("%s: name is not <type>.v<version>[.<variant>].json", f)
		}
		typ := m[1]
		version, _ := strconv.Atoi(m[2])
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		erased := sealedThenErased(t, raw)
		for _, form := range []struct {
			name    string
			payload []byte
		}{{"plain", raw}, {"sealed then erased", erased}} {
			if err := r.Validate(typ, version, form.payload); err != nil {
				t.Errorf("%s, %s: %v", f, form.name, err)
				continue
			}
			env := eventschema.Envelope{EventID: "e", Type: typ, SchemaVersion: version, Stream: "s", Payload: form.payload}
			e, err := r.Decode(env)
			if err != nil {
				t.Errorf("%s, %s: %v", f, form.name, err)
				continue
			}
			if e.EventType() != typ {
				t.Errorf("%s, %s: decoded as %s", f, form.name, e.EventType())
			}
			// What an old version decodes to must also be writable as the current version.
			if _, _, _, err := r.Encode(e); err != nil {
				t.Errorf("%s, %s: decoded event does not re-encode: %v", f, form.name, err)
			}
			if _, _, err := r.AuditSummary(env); err != nil {
				t.Errorf("%s, %s: no audit summary: %v", f, form.name, err)
			}
		}
		covered[fmt.Sprintf("%s.v%d", typ, version)] = true
	}
	for _, typ := range r.Types() {
		cur, _ := r.CurrentVersion(typ)
		for v := 1; v <= cur; v++ {
			if !covered[fmt.Sprintf("%s.v%d", typ, v)] {
				t.Errorf("no stored example of %s v%d", typ, v)
			}
		}
	}
}

// sealedThenErased is payload as a reader gets it when its personal member was sealed under a
// subject whose key was then destroyed: opened, without personal data. A payload without a
// personal member is returned as it is.
func sealedThenErased(t *testing.T, payload []byte) []byte {
	t.Helper()
	ctx := context.Background()
	keys := keystore.NewMemory()
	sealed, _, err := eventschema.SealPersonal(ctx, keys, "user-erased", payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Destroy(ctx, "user-erased"); err != nil {
		t.Fatal(err)
	}
	opened, erased, err := eventschema.OpenPersonal(ctx, keys, sealed)
	if err != nil {
		t.Fatal(err)
	}
	if eventschema.PlainPersonal(payload) && (!erased || eventschema.PlainPersonal(opened) || eventschema.PersonalSealed(opened)) {
		t.Fatalf("sealed then erased, %s reads as %s (erased %v)", payload, opened, erased)
	}
	return opened
}

func TestUpcastCollectionStartedV1(t *testing.T) {
	r := registry(t)
	raw, err := os.ReadFile("testdata/examples/collection.started.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := r.Decode(eventschema.Envelope{EventID: "e", Type: collection.EventStarted, SchemaVersion: 1, Stream: "s", Payload: raw})
	if err != nil {
		t.Fatal(err)
	}
	want := collection.Started{
		CollectionID: "0190f4a2-7c1e-7b3a-9a51-2f1e3d4c5b6a", ClientID: "acme", Company: "se-demo-insurer",
		Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
		APIVersion: "2025-01-01", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC),
		Personal: &collection.StartedPerson{PersonalNumber: "199001010017", AccountOwnerName: "Tolvan Tolvansson"},
	}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("upcast v1\n got %#v\nwant %#v", e, want)
	}
}

// TestUpcastCollectionStatusChangedV1: version 1 kept the instructions (whose headers carry the
// user's device bearer token) in the public part; read today they sit in the personal part,
// beside any QR secret, with only their request ids public, and nothing else changes.
func TestUpcastCollectionStatusChangedV1(t *testing.T) {
	r := registry(t)
	decode := func(t *testing.T, payload []byte) collection.StatusChanged {
		t.Helper()
		e, err := r.Decode(eventschema.Envelope{EventID: "e", Type: collection.EventStatusChanged, SchemaVersion: 1, Stream: "s", Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		return e.(collection.StatusChanged)
	}
	upcast := func(t *testing.T, payload []byte) map[string]any {
		t.Helper()
		out, err := r.Upcast(collection.EventStatusChanged, 1, payload)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(collection.EventStatusChanged, 2, out); err != nil {
			t.Fatalf("upcast payload breaks v2: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	changedAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	t.Run("instructions move into personal", func(t *testing.T) {
		raw, err := os.ReadFile("testdata/examples/collection.status-changed.v1.instructions.json")
		if err != nil {
			t.Fatal(err)
		}
		body := "{}"
		want := collection.StatusChanged{From: collection.StatusLogin, To: collection.StatusWaitingForUserAction,
			InstructionRequestIDs: []string{"r1"}, ChangedAt: changedAt,
			Personal: &collection.StatusPersonal{Instructions: []collection.Instruction{{RequestID: "r1", Method: "POST",
				URL: "https://company.example/login/eid/start", Headers: map[string]string{"Content-Type": "application/json"}, Body: &body}}}}
		if got := decode(t, raw); !reflect.DeepEqual(got, want) {
			t.Fatalf("upcast v1\n got %#v\nwant %#v", got, want)
		}
		m := upcast(t, raw)
		if _, ok := m["instructions"]; ok {
			t.Fatalf("instructions left in the public part: %v", m)
		}
	})
	t.Run("beside the QR secret, keeping every other field", func(t *testing.T) {
		raw := []byte(`{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","message":"m","extraInformation":{"N":12345678901234567890},` +
			`"instructions":[{"requestId":"r1","method":"GET","url":"https://company.example/a","headers":{"Authorization":"Bearer t"}},` +
			`{"requestId":"r2","method":"GET","url":"https://company.example/b"}],` +
			`"changedAt":"2026-01-02T03:04:05.000Z","personal":{"qrStartSecret":"s"}}`)
		got := upcast(t, raw)
		want := map[string]any{"from": "LOGIN", "to": "WAITING_FOR_USER_ACTION", "message": "m",
			"extraInformation": map[string]any{"N": 12345678901234567890.0}, "changedAt": "2026-01-02T03:04:05.000Z",
			"instructionRequestIds": []any{"r1", "r2"},
			"personal": map[string]any{"qrStartSecret": "s", "instructions": []any{
				map[string]any{"requestId": "r1", "method": "GET", "url": "https://company.example/a", "headers": map[string]any{"Authorization": "Bearer t"}},
				map[string]any{"requestId": "r2", "method": "GET", "url": "https://company.example/b"}}}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("upcast\n got %v\nwant %v", got, want)
		}
		if e := decode(t, raw); e.Personal == nil || e.Personal.QRStartSecret != "s" || len(e.Personal.Instructions) != 2 {
			t.Fatalf("decoded %#v", e)
		}
	})
	t.Run("without instructions nothing changes", func(t *testing.T) {
		for _, name := range []string{"collection.status-changed.v1.json", "collection.status-changed.v1.eid-order.json",
			"collection.status-changed.v1.input.json"} {
			raw, err := os.ReadFile("testdata/examples/" + name)
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			if got := upcast(t, raw); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: upcast\n got %v\nwant %v", name, got, want)
			}
		}
		got := upcast(t, []byte(`{"from":"LOGIN","to":"LOGIN","instructions":[],"changedAt":"2026-01-02T03:04:05.000Z"}`))
		if !reflect.DeepEqual(got, map[string]any{"from": "LOGIN", "to": "LOGIN", "changedAt": "2026-01-02T03:04:05.000Z"}) {
			t.Fatalf("empty instructions upcast to %v", got)
		}
	})
	t.Run("v2 refuses instructions in the public part", func(t *testing.T) {
		raw, err := os.ReadFile("testdata/examples/collection.status-changed.v1.instructions.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(collection.EventStatusChanged, 2, raw); err == nil {
			t.Fatal("a v2 payload with public instructions is valid")
		}
	})
	t.Run("the current writer records v2", func(t *testing.T) {
		body := `{"personalNumber":"199001010017"}`
		ev := collection.StatusChanged{From: collection.StatusLogin, To: collection.StatusWaitingForUserAction,
			InstructionRequestIDs: []string{"r1"}, ChangedAt: changedAt,
			Personal: &collection.StatusPersonal{Instructions: []collection.Instruction{{RequestID: "r1", Method: "POST",
				URL: "https://company.example/x", Headers: map[string]string{"Authorization": "Bearer device-token"}, Body: &body}}}}
		_, version, payload, err := r.Encode(ev)
		if err != nil || version != 2 {
			t.Fatalf("Encode = v%d, %v", version, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "personal")
		public, _ := json.Marshal(m)
		for _, secret := range []string{"device-token", "company.example", "199001010017"} {
			if strings.Contains(string(public), secret) {
				t.Errorf("public part %s contains %q", public, secret)
			}
		}
	})
}

func TestEncodeRefusesWhatBreaksTheSchema(t *testing.T) {
	r := registry(t)
	_, _, _, err := r.Encode(collection.StatusChanged{From: "RUNNING", To: "NOT_A_STATUS", ChangedAt: time.Now()})
	if err == nil {
		t.Fatal("an unknown status was encoded")
	}
	_, _, _, err = r.Encode(collection.Started{CollectionID: "c", ClientID: "acme", Company: "x", Product: "INSURANCE",
		LoginMethod: "M", StartedAt: time.Now(), Personal: &collection.StartedPerson{PersonalNumber: "123"}})
	if err == nil {
		t.Fatal("a personal number that is not 12 digits was encoded")
	}
	if _, err := r.Decode(eventschema.Envelope{Type: "nope", SchemaVersion: 1}); !errors.Is(err, eventschema.ErrUnknownType) {
		t.Fatalf("unknown type: %v", err)
	}
	if _, err := r.Upcast(collection.EventStarted, 5, json.RawMessage(`{}`)); err == nil {
		t.Fatal("a future schema version was accepted")
	}
}

func TestTopicRules(t *testing.T) {
	env := eventschema.Envelope{EventID: "e1", Type: collection.EventClaimed, SchemaVersion: 1, Tenant: "acme",
		Stream: "collection-0190f4a2-7c1e", Revision: 3, Position: 42, Payload: json.RawMessage(`{}`)}
	m, err := eventschema.ToMessage(env)
	if err != nil {
		t.Fatal(err)
	}
	if m.Topic != "samla.collection.events" || string(m.Key) != env.Stream {
		t.Fatalf("topic %s key %s", m.Topic, m.Key)
	}
	if m.Headers[eventschema.HeaderPosition] != "42" || m.Headers[eventschema.HeaderTenant] != "acme" ||
		m.Headers[eventschema.HeaderType] != collection.EventClaimed || m.Headers[eventschema.HeaderSchemaVersion] != "1" {
		t.Fatalf("headers %v", m.Headers)
	}
	back, err := eventschema.FromMessage(m.Value)
	if err != nil {
		t.Fatal(err)
	}
	if back.Stream != env.Stream || back.Revision != 3 || back.Position != 42 {
		t.Fatalf("round trip %#v", back)
	}
	if _, err := eventschema.FromMessage([]byte(`{"type":"x"}`)); err == nil {
		t.Fatal("an envelope without id and stream was accepted")
	}
}

// TestUnknownInsuranceTypeIsAbsent: an insurance whose type the company did not report is
// recorded without insuranceType (unknown is absent, never ""), and reads back as unknown;
// events written before, which always carry a type, still validate (TestEveryStoredExampleDecodes).
func TestUnknownInsuranceTypeIsAbsent(t *testing.T) {
	r := registry(t)
	_, version, payload, err := r.Encode(collection.InsurancesCollected{InsuranceCount: 2, CollectedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Personal: &collection.InsuranceRecords{Insurances: []collection.Insurance{{ID: "ins-1"}, {ID: "ins-2", InsuranceType: "HOME"}}}})
	if err != nil {
		t.Fatalf("an insurance of unknown type was refused: %v", err)
	}
	if strings.Contains(string(payload), `"insuranceType":""`) || !strings.Contains(string(payload), `{"id":"ins-1"}`) {
		t.Fatalf("payload = %s, want the unknown type left out", payload)
	}
	e, err := r.Decode(eventschema.Envelope{Type: collection.EventInsurancesCollected, SchemaVersion: version, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.(collection.InsurancesCollected).Insurances(); got[0].InsuranceType != "" || got[1].InsuranceType != "HOME" {
		t.Fatalf("decoded %+v", got)
	}
	if err := r.Validate(collection.EventInsurancesCollected, 1,
		[]byte(`{"insurances":[{"id":"i","insuranceType":""}],"collectedAt":"2026-01-02T03:04:05Z"}`)); err == nil {
		t.Fatal(`an empty insuranceType is valid; unknown must be absent`)
	}
}

// TestWhatIdentifiesAPersonIsPersonal: the current writer keeps request fingerprints,
// Idempotency-Keys, reservation holders, every collected record and documents' file names and
// digests in the personal member; the public part of each event holds none of them.
func TestWhatIdentifiesAPersonIsPersonal(t *testing.T) {
	r := registry(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	plate, address, account := "Bilförsäkring ABC123", "Bolån Tolvgatan 12", "9960-121 212 1"
	doc := collection.NewDocument("d1", collection.DocumentUploadedPDF, "application/pdf", "Tolvan hemförsäkring.pdf", []byte("%PDF-1.4"))
	doc.At = at
	for _, e := range []domain.Event{
		collection.Started{CollectionID: "c1", ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
			LoginMethod: "M", StartedAt: at, Personal: &collection.StartedPerson{PersonalNumber: "199001010017", RequestHash: "fp-start"}},
		collection.InputSupplied{Kind: collection.InputKindCollectionInput, InputTypes: []string{"EMAIL"}, SuppliedAt: at,
			Personal: &collection.SuppliedValues{Inputs: []collection.Input{{Type: "EMAIL", Value: "a@b.se"}},
				IdempotencyKey: "key-tolvan", RequestHash: "fp-input"}},
		collection.InsurancesCollected{InsuranceCount: 1, CollectedAt: at, Personal: &collection.InsuranceRecords{
			Insurances: []collection.Insurance{{ID: "ins-1", DisplayName: &plate}}}},
		collection.WealthCollected{Counts: collection.WealthCounts{Loans: 1, Investments: 1}, CollectedAt: at,
			Personal: &collection.WealthRecords{Loans: []collection.Loan{{ID: "L1", Name: &address}},
				Investments: []collection.Investment{{ID: "I1", AccountNumber: &account}}}},
		collection.DocumentUploaded{Document: doc},
		user.Created{UserUUID: "u1", ClientID: "acme", CreatedAt: at, Personal: &user.CreatedPerson{ExternalID: "x", RequestHash: "fp-user"}},
		user.ExternalIDReserved{ClientID: "acme", ReservedAt: at, Personal: &user.ReservedBy{UserUUID: "holder-uuid", RequestHash: "fp-user"}},
		user.ExternalIDReleased{ReleasedAt: at, Personal: &user.ReleasedBy{UserUUID: "holder-uuid"}},
		consent.Created{ConsentID: "c1", ClientID: "acme", UserUUID: "u1", Company: "se-demo-bank", LoginMethod: "M",
			Scope: consent.AllScopes(), CreatedAt: at, Personal: &consent.CreatedPerson{PersonalNumber: "199001010017", RequestHash: "fp-consent"}},
		consent.AuthorizationStarted{At: at, Deadline: at.Add(time.Minute), BankConsentID: "b1",
			Personal: &consent.AuthorizationPersonal{AutoStartToken: "tok-auto", QRStartToken: "tok-qr", QRStartSecret: "tok-secret"}},
	} {
		_, _, payload, err := r.Encode(e)
		if err != nil {
			t.Fatalf("%s: %v", e.EventType(), err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, eventschema.PersonalMember)
		public, _ := json.Marshal(m)
		for _, secret := range []string{"fp-", "key-tolvan", "ABC123", "Tolvgatan", "9960", "ins-1", "L1", "hemförsäkring",
			doc.Personal.SHA256[:16], "holder-uuid",
			"199001010017", "tok-"} {
			if strings.Contains(string(public), secret) {
				t.Errorf("%s: the public part %s holds %q", e.EventType(), public, secret)
			}
		}
	}
}

// TestUpcastIntoPersonal: events of the versions before keep fingerprints, keys, holders,
// records, file names and digests public; read today they sit in the personal member. Where
// the personal member is gone (erased), a fingerprint, key, file name or digest is dropped
// with it rather than brought back.
func TestUpcastIntoPersonal(t *testing.T) {
	r := registry(t)
	for _, tc := range []struct {
		typ      string
		version  int
		in, want string
	}{
		{collection.EventStarted, 2,
			`{"collectionId":"c","clientId":"a","company":"x","product":"INSURANCE","loginMethod":"M","apiVersion":"v","requestHash":"fp","startedAt":"2026-01-02T03:04:05Z","personal":{"personalNumber":"199001010017"}}`,
			`{"collectionId":"c","clientId":"a","company":"x","product":"INSURANCE","loginMethod":"M","apiVersion":"v","startedAt":"2026-01-02T03:04:05Z","personal":{"personalNumber":"199001010017","requestHash":"fp"}}`},
		{collection.EventStarted, 2,
			`{"collectionId":"c","clientId":"a","company":"x","product":"INSURANCE","loginMethod":"M","apiVersion":"v","requestHash":"fp","startedAt":"2026-01-02T03:04:05Z"}`,
			`{"collectionId":"c","clientId":"a","company":"x","product":"INSURANCE","loginMethod":"M","apiVersion":"v","startedAt":"2026-01-02T03:04:05Z"}`},
		{collection.EventStarted, 1,
			`{"collectionId":"c","clientId":"a","company":"x","loginMethod":"M","apiVersion":"v","startedAt":"2026-01-02T03:04:05Z","input":{"SWEDISH_PERSONAL_NUMBER":"199001010017"}}`,
			`{"collectionId":"c","clientId":"a","company":"x","product":"INSURANCE","loginMethod":"M","apiVersion":"v","startedAt":"2026-01-02T03:04:05Z","personal":{"personalNumber":"199001010017"}}`},
		{collection.EventInputSupplied, 1,
			`{"kind":"COLLECTION_INPUT","suppliedAt":"2026-01-02T03:04:05Z","idempotencyKey":"k","requestHash":"fp","personal":{"inputs":[{"type":"EMAIL","value":"a@b.se"}]}}`,
			`{"kind":"COLLECTION_INPUT","suppliedAt":"2026-01-02T03:04:05Z","personal":{"inputs":[{"type":"EMAIL","value":"a@b.se"}],"idempotencyKey":"k","requestHash":"fp"}}`},
		{collection.EventInputSupplied, 1,
			`{"kind":"COLLECTION_INPUT","suppliedAt":"2026-01-02T03:04:05Z","idempotencyKey":"k","requestHash":"fp"}`,
			`{"kind":"COLLECTION_INPUT","suppliedAt":"2026-01-02T03:04:05Z"}`},
		{user.EventCreated, 1,
			`{"userUuid":"u","clientId":"a","requestHash":"fp","createdAt":"2026-01-02T03:04:05Z","personal":{"externalId":"x"}}`,
			`{"userUuid":"u","clientId":"a","createdAt":"2026-01-02T03:04:05Z","personal":{"externalId":"x","requestHash":"fp"}}`},
		{user.EventCreated, 1,
			`{"userUuid":"u","clientId":"a","requestHash":"fp","createdAt":"2026-01-02T03:04:05Z"}`,
			`{"userUuid":"u","clientId":"a","createdAt":"2026-01-02T03:04:05Z"}`},
		{user.EventExternalIDReserved, 1,
			`{"clientId":"a","userUuid":"u","requestHash":"fp","reservedAt":"2026-01-02T03:04:05Z"}`,
			`{"clientId":"a","reservedAt":"2026-01-02T03:04:05Z","personal":{"userUuid":"u","requestHash":"fp"}}`},
		{user.EventExternalIDReleased, 1,
			`{"userUuid":"u","releasedAt":"2026-01-02T03:04:05Z"}`,
			`{"releasedAt":"2026-01-02T03:04:05Z","personal":{"userUuid":"u"}}`},
		{collection.EventDocumentCollected, 1,
			`{"documentId":"d","kind":"FRENCH_CAREER_STATEMENT","contentType":"application/pdf","fileName":"f.pdf","size":1,"sha256":"` + strings.Repeat("ab", 32) + `","at":"2026-01-02T03:04:05Z","personal":{"content":"JQ=="}}`,
			`{"documentId":"d","kind":"FRENCH_CAREER_STATEMENT","contentType":"application/pdf","size":1,"at":"2026-01-02T03:04:05Z","personal":{"fileName":"f.pdf","sha256":"` + strings.Repeat("ab", 32) + `","content":"JQ=="}}`},
		{collection.EventDocumentUploaded, 1,
			`{"documentId":"d","kind":"UPLOADED_PDF","contentType":"application/pdf","fileName":"f.pdf","size":1,"sha256":"` + strings.Repeat("ab", 32) + `","at":"2026-01-02T03:04:05Z"}`,
			`{"documentId":"d","kind":"UPLOADED_PDF","contentType":"application/pdf","size":1,"at":"2026-01-02T03:04:05Z"}`},
		{collection.EventInsurancesCollected, 1,
			`{"insurances":[{"id":"i1"},{"id":"i2"}],"collectedAt":"2026-01-02T03:04:05Z","personal":{"holderNames":{"i1":"T"}}}`,
			`{"insuranceCount":2,"collectedAt":"2026-01-02T03:04:05Z","personal":{"insurances":[{"id":"i1"},{"id":"i2"}],"holderNames":{"i1":"T"}}}`},
		{collection.EventInsurancesCollected, 1,
			`{"insurances":[{"id":"i1"}],"collectedAt":"2026-01-02T03:04:05Z"}`,
			`{"insuranceCount":1,"collectedAt":"2026-01-02T03:04:05Z","personal":{"insurances":[{"id":"i1"}]}}`},
		{collection.EventInsurancesCollected, 1,
			`{"insurances":[],"collectedAt":"2026-01-02T03:04:05Z"}`,
			`{"insuranceCount":0,"collectedAt":"2026-01-02T03:04:05Z"}`},
		{collection.EventWealthCollected, 1,
			`{"loans":[{"id":"L1"}],"psd2SavingsAccounts":[],"collectedAt":"2026-01-02T03:04:05Z","personal":{"insuredPersonNames":{"P1":"T"}}}`,
			`{"counts":{"pensions":0,"investments":0,"loans":1,"savings":0,"psd2CheckingAccounts":0,"psd2SavingsAccounts":0,"psd2CreditCards":0},` +
				`"collectedAt":"2026-01-02T03:04:05Z","personal":{"loans":[{"id":"L1"}],"insuredPersonNames":{"P1":"T"}}}`},
		{collection.EventWealthCollected, 1,
			`{"collectedAt":"2026-01-02T03:04:05Z"}`,
			`{"counts":{"pensions":0,"investments":0,"loans":0,"savings":0,"psd2CheckingAccounts":0,"psd2SavingsAccounts":0,"psd2CreditCards":0},` +
				`"collectedAt":"2026-01-02T03:04:05Z"}`},
	} {
		got, err := r.Upcast(tc.typ, tc.version, json.RawMessage(tc.in))
		if err != nil {
			t.Errorf("%s v%d: %v", tc.typ, tc.version, err)
			continue
		}
		if !jsonEqual(t, got, []byte(tc.want)) {
			t.Errorf("%s v%d: upcast\n got %s\nwant %s", tc.typ, tc.version, got, tc.want)
		}
		current, _ := r.CurrentVersion(tc.typ)
		if err := r.Validate(tc.typ, current, got); err != nil {
			t.Errorf("%s v%d: upcast payload breaks v%d: %v", tc.typ, tc.version, current, err)
		}
	}
}
