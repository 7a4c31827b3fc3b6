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
