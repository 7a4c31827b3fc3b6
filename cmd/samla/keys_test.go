package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

// TestInspectStoredUpcasts pins what the keys report counts of one stored event: the personal
// fields of its type's current version, found by upcasting an older payload, and a sealed or
// erased personal member never read as plain, while what an older version kept outside it is.
func TestInspectStoredUpcasts(t *testing.T) {
	t.Parallel()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := keystore.NewMemory()
	seal := func(t *testing.T, payload []byte) []byte {
		t.Helper()
		out, erased, err := eventschema.SealPersonal(ctx, keys, "collection-c1", payload)
		if err != nil || erased || !eventschema.PersonalSealed(out) {
			t.Fatalf("seal = %s, %v, %v", out, erased, err)
		}
		return out
	}
	erase := func(t *testing.T, payload []byte) []byte {
		t.Helper()
		var f map[string]json.RawMessage
		if err := json.Unmarshal(payload, &f); err != nil {
			t.Fatal(err)
		}
		f[eventschema.PersonalMember] = json.RawMessage(`{"erased":true}`)
		out, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		example       string
		transform     func(*testing.T, []byte) []byte
		sealed, plain bool
		fields        int
	}{
		{name: "v1 started, personal number in input", example: "collection.started.v1.json", plain: true, fields: 2},
		{name: "v1 status change, instructions in public", example: "collection.status-changed.v1.instructions.json", plain: true, fields: 1},
		{name: "v1 status change without instructions", example: "collection.status-changed.v1.json"},
		{name: "v1 insurances outside personal", example: "collection.insurances-collected.v1.json", plain: true, fields: 2},
		{name: "v1 wealth records outside personal", example: "collection.wealth-collected.v1.json", plain: true, fields: 8},
		{name: "current started, plain", example: "collection.started.v4.json", plain: true, fields: 3},
		{name: "current started, sealed", example: "collection.started.v4.json", transform: seal, sealed: true},
		{name: "v2 started, sealed, fingerprint in public", example: "collection.started.v2.json", transform: seal,
			sealed: true, plain: true, fields: 1},
		{name: "v1 insurances, sealed, insurances in public", example: "collection.insurances-collected.v1.json", transform: seal,
			sealed: true, plain: true, fields: 1},
		{name: "v2 started, erased, fingerprint in public", example: "collection.started.v2.json", transform: erase,
			plain: true, fields: 1},
		{name: "current started, erased", example: "collection.started.v4.json", transform: erase},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := storedExample(t, tc.example)
			if tc.transform != nil {
				env.Payload = tc.transform(t, env.Payload)
			}
			sealed, plain, fields, err := inspectStored(reg, env)
			if err != nil || sealed != tc.sealed || plain != tc.plain || fields != tc.fields {
				t.Fatalf("inspectStored(%s) = sealed %v, plain %v, %d fields, %v; want %v, %v, %d",
					env.Payload, sealed, plain, fields, err, tc.sealed, tc.plain, tc.fields)
			}
		})
	}
	if _, _, _, err := inspectStored(reg, eventschema.Envelope{Type: "nobody.knows", SchemaVersion: 1, Payload: []byte(`{}`)}); err == nil {
		t.Fatal("an unknown event type was inspected")
	}
}
