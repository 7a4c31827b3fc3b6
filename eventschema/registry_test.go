package eventschema_test

import (
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

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
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
// validates against its schema and decodes (upcast) into today's domain event.
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
		if err := r.Validate(typ, version, raw); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		env := eventschema.Envelope{EventID: "e", Type: typ, SchemaVersion: version, Stream: "s", Payload: raw}
		e, err := r.Decode(env)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if e.EventType() != typ {
			t.Errorf("%s decoded as %s", f, e.EventType())
		}
		// What an old version decodes to must also be writable as the current version.
		if _, _, _, err := r.Encode(e); err != nil {
			t.Errorf("%s: decoded event does not re-encode: %v", f, err)
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
	if _, err := r.Upcast(collection.EventStarted, 3, json.RawMessage(`{}`)); err == nil {
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
	_, version, payload, err := r.Encode(collection.InsurancesCollected{CollectedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Insurances: []collection.Insurance{{ID: "ins-1"}, {ID: "ins-2", InsuranceType: "HOME"}}})
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
	if got := e.(collection.InsurancesCollected).Insurances; got[0].InsuranceType != "" || got[1].InsuranceType != "HOME" {
		t.Fatalf("decoded %+v", got)
	}
	if err := r.Validate(collection.EventInsurancesCollected, 1,
		[]byte(`{"insurances":[{"id":"i","insuranceType":""}],"collectedAt":"2026-01-02T03:04:05Z"}`)); err == nil {
		t.Fatal(`an empty insuranceType is valid; unknown must be absent`)
	}
}
