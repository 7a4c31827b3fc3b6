package eventschema_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

// TestOpenPersonalPartsIsEachOfItsFunctions: OpenPersonalParts answers, for every stored example
// plain, sealed, sealed under an erased subject, with the erased marker, and for payloads without
// a personal member, with null, or not JSON at all, what OpenPersonal, InspectPersonal,
// PersonalErased and WithoutPersonal answer one by one.
func TestOpenPersonalPartsIsEachOfItsFunctions(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	if err := keys.Destroy(ctx, "user-gone"); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	payloads := map[string][]byte{
		"none":       []byte(`{"a":1}`),
		"null":       []byte(`{"personal":null,"a":1}`),
		"first":      []byte(`{"personal":{"x":"y"}, "a":1}`),
		"only":       []byte(`{ "personal" : {"x":"y"} }`),
		"last":       []byte(`{"a":1 , "personal":{"x":"y"}}`),
		"not json":   []byte(`not json`),
		"array":      []byte(`[1,2]`),
		"marker":     []byte(`{"a":1,"personal":{"erased":true}}`),
		"bad sealed": []byte(`{"a":1,"personal":{"sealed":{"v":1,"subject":"s"`),
		"escaped":    []byte(`{"a":1,"p\u0065rsonal":{"erased":true},"b":2}`),
		"duplicate":  []byte(`{"a":1,"a":2,"personal":{"erased":true}}`),
		"twice":      []byte(`{"personal":{"x":1},"personal":{"erased":true}}`),
		"bad before": []byte(`{"a":tru,"personal":{"erased":true}}`),
		"bad after":  []byte(`{"personal":{"erased":true},"a":tru}`),
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		payloads[name] = raw
		for i, subject := range []string{"collection-c1", "user-gone"} {
			sealed, _, err := eventschema.SealPersonal(ctx, keys, subject, raw)
			if err != nil {
				t.Fatal(err)
			}
			payloads[name+".sealed"+strconv.Itoa(i)] = sealed
		}
	}
	// A sealed member whose subject was erased after sealing.
	sealed, _, err := eventschema.SealPersonal(ctx, keys, "user-later", []byte(`{"b":2,"personal":{"x":"y"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Destroy(ctx, "user-later"); err != nil {
		t.Fatal(err)
	}
	payloads["erased later"] = sealed

	for name, payload := range payloads {
		parts, err := eventschema.OpenPersonalParts(ctx, keys, payload)
		opened, erased, oerr := eventschema.OpenPersonal(ctx, keys, payload)
		if (err == nil) != (oerr == nil) {
			t.Errorf("%s: error %v, OpenPersonal's %v", name, err, oerr)
			continue
		}
		if err != nil {
			continue
		}
		if !bytes.Equal(parts.Opened, opened) || parts.Erased != erased {
			t.Errorf("%s: opened %s %v, OpenPersonal's %s %v", name, parts.Opened, parts.Erased, opened, erased)
		}
		subject, isSealed, plain := eventschema.InspectPersonal(payload)
		if parts.Subject != subject || parts.Sealed != isSealed || parts.Plain != plain {
			t.Errorf("%s: %q %v %v, InspectPersonal's %q %v %v", name, parts.Subject, parts.Sealed, parts.Plain, subject, isSealed, plain)
		}
		if marker := eventschema.PersonalErased(payload); parts.Marker != marker {
			t.Errorf("%s: marker %v, PersonalErased's %v", name, parts.Marker, marker)
		}
		if parts.Sealed || parts.Marker {
			public, err := eventschema.WithoutPersonal(payload)
			if err != nil || !bytes.Equal(parts.Public(), public) {
				t.Errorf("%s: public %s, WithoutPersonal's %s %v", name, parts.Public(), public, err)
			}
		} else if parts.Public() != nil {
			t.Errorf("%s: public %s of a payload neither sealed nor marked", name, parts.Public())
		}
		// Inspect, without a key, is the same but for what opening adds.
		scan, err := eventschema.ScanPersonal(payload)
		if err != nil {
			t.Errorf("%s: scan: %v after OpenPersonalParts succeeded", name, err)
			continue
		}
		inspected, want := scan.Inspect(), parts
		want.Opened, want.Erased = nil, false
		if inspected.Subject != want.Subject || inspected.Sealed != want.Sealed || inspected.Plain != want.Plain ||
			inspected.Marker != want.Marker || !bytes.Equal(inspected.Public(), want.Public()) || inspected.Opened != nil {
			t.Errorf("%s: inspected %+v, want %+v", name, inspected, want)
		}
	}
}

// TestAuditSummaryOpenedIsAuditSummary: the audit summary of every stored example, sealed, built
// from the event decoded opened is the one AuditSummary builds of the payload without its
// personal member (as the audit history has always summarised sealed events), or not built.
func TestAuditSummaryOpenedIsAuditSummary(t *testing.T) {
	ctx := context.Background()
	r := registry(t)
	keys := keystore.NewMemory()
	files, err := filepath.Glob("testdata/examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	type example struct {
		name string
		raw  []byte
	}
	var examples []example
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		examples = append(examples, example{strings.TrimSuffix(filepath.Base(f), ".json"), raw})
	}
	// A status whose instructions are counted in its personal part only, which the summary of
	// the payload without it does not see.
	examples = append(examples, example{"collection.status-changed.v2.no-ids",
		[]byte(`{"from":"LOGIN","to":"WAITING_FOR_USER_ACTION","changedAt":"2026-01-02T03:04:05.000Z",` +
			`"personal":{"instructions":[{"requestId":"r1","method":"GET","url":"https://company.example/x"}]}}`)})
	built := 0
	for _, ex := range examples {
		f, raw := ex.name, ex.raw
		m := exampleName.FindStringSubmatch(f)
		version, _ := strconv.Atoi(m[2])
		sealed, _, err := eventschema.SealPersonal(ctx, keys, "collection-c1", raw)
		if err != nil {
			t.Fatal(err)
		}
		parts, err := eventschema.OpenPersonalParts(ctx, keys, sealed)
		if err != nil {
			t.Fatal(err)
		}
		if !parts.Sealed {
			continue
		}
		env := eventschema.Envelope{EventID: "e", Type: m[1], SchemaVersion: version, Stream: "s", Payload: parts.Opened}
		ev, err := r.Decode(env)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got, gotVersion, ok, err := r.AuditSummaryOpened(env, ev)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if current, _ := r.CurrentVersion(m[1]); !ok {
			if version == current {
				t.Errorf("%s: no summary of the current version", f)
			}
			continue
		}
		built++
		env.Payload = parts.Public()
		want, wantVersion, err := r.AuditSummary(env)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(got, want) || gotVersion != wantVersion {
			t.Errorf("%s: summary %s v%d, AuditSummary's %s v%d", f, got, gotVersion, want, wantVersion)
		}
	}
	if built == 0 {
		t.Fatal("no example summarised opened")
	}
}
