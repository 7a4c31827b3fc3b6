package eventschema_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/eventschema"
)

// fuzzMaxPayload bounds the payloads the fuzz targets try: a stored event is a few KiB.
const fuzzMaxPayload = 64 << 10

// storedExamples are the stored examples of every type and version (testdata/examples), as
// (type, version, payload).
func storedExamples(tb testing.TB) []struct {
	typ     string
	version int
	payload []byte
} {
	tb.Helper()
	files, err := filepath.Glob("testdata/examples/*.json")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no stored examples: %v", err)
	}
	var out []struct {
		typ     string
		version int
		payload []byte
	}
	for _, f := range files {
		m := exampleName.FindStringSubmatch(strings.TrimSuffix(filepath.Base(f), ".json"))
		if m == nil {
			tb.Fatalf("%s: name is not <type>.v<version>[.<variant>].json", f)
		}
		version, _ := strconv.Atoi(m[2])
		raw, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, struct {
			typ     string
			version int
			payload []byte
		}{m[1], version, raw})
	}
	return out
}

// FuzzDecode feeds arbitrary envelopes (type, schema version, payload) to the registry, as a
// damaged or forged store or topic would: Upcast, Decode and AuditSummary never panic; what
// Decode accepts is an event of the envelope's type, which Encode handles without panicking;
// and a payload valid against the schema of its version decodes (and, of the current version,
// re-encodes), unless its personal member is sealed or erased,
// which Decode refuses with ErrSealed, or a string in it is not of its format (see below).
func FuzzDecode(f *testing.F) {
	for _, ex := range storedExamples(f) {
		f.Add(ex.typ, ex.version, ex.payload)
	}
	f.Add("collection.started", 1, []byte(`{"input":{"SWEDISH_PERSONAL_NUMBER":1}}`))
	f.Add("collection.status-changed", 1, []byte(`{"instructions":{"requestId":"x"}}`))
	f.Add("collection.started", 0, []byte(`{}`))
	f.Add("collection.started", 99, []byte(`{}`))
	f.Add("no.such-type", 1, []byte(`{}`))
	f.Add("user.created", 1, []byte(`null`))
	f.Add("user.created", 1, []byte(`{"personal":{"$sealed":"x"}}`))
	f.Add("collection.insurances-collected", 1, []byte(`{"insurances":[`+strings.Repeat(`{},`, 1000)+`{}]}`))
	f.Add("collection.started", 3, []byte(strings.Repeat(`{"a":`, 500)+`1`+strings.Repeat(`}`, 500)))
	f.Add("collection.started", 4, []byte("{\"company\":\"\xff\xfe\",\"company\":\"x\"}"))
	reg, err := eventschema.NewRegistry()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, typ string, version int, payload []byte) {
		if len(payload) > fuzzMaxPayload {
			return
		}
		env := eventschema.Envelope{EventID: "e", Type: typ, SchemaVersion: version, Stream: "s", Payload: payload}
		_, _ = reg.Upcast(typ, version, payload)
		_, _, _ = reg.AuditSummary(env)
		e, err := reg.Decode(env)
		if err == nil {
			if e == nil || e.EventType() != typ {
				t.Fatalf("%s v%d decoded as %v", typ, version, e)
			}
			_, _, _, _ = reg.Encode(e)
		}
		if reg.Validate(typ, version, payload) != nil {
			return
		}
		if eventschema.PersonalSealed(payload) || eventschema.PersonalErased(payload) {
			if !errors.Is(err, eventschema.ErrSealed) {
				t.Fatalf("%s v%d with a sealed personal member: Decode = %v, want ErrSealed", typ, version, err)
			}
			return
		}
		// The schemas' string formats ("format": "date-time", base64 content) are annotations
		// the validator does not assert, so a schema-valid payload may hold a time or bytes the
		// decoder cannot read: refused, as it must be. Any other refusal is a schema that does
		// not say what the decoder needs.
		var (
			timeErr   *time.ParseError
			base64Err base64.CorruptInputError
		)
		if errors.As(err, &timeErr) || errors.As(err, &base64Err) {
			return
		}
		if err != nil {
			t.Fatalf("%s v%d %s is valid against its schema but does not decode: %v", typ, version, payload, err)
		}
		// Only a payload of the current version must re-encode: the old schemas are looser than
		// today's in places (collection.started v1 took any string as a personal number, v4 takes
		// twelve digits), which the stored examples do not exercise.
		if current, _ := reg.CurrentVersion(typ); version == current {
			if _, _, _, err := reg.Encode(e); err != nil {
				t.Fatalf("%s v%d %s is valid against its schema but does not re-encode: %v", typ, version, payload, err)
			}
		}
	})
}

// FuzzFromMessage feeds arbitrary Kafka message values to FromMessage, as a consumer meets
// them: it never panics, what it accepts has an id, a type and a stream and travels back
// through ToMessage unchanged, and the registry decodes it without panicking.
func FuzzFromMessage(f *testing.F) {
	reg, err := eventschema.NewRegistry()
	if err != nil {
		f.Fatal(err)
	}
	for i, ex := range storedExamples(f) {
		if i%4 != 0 {
			continue
		}
		msg, err := eventschema.ToMessage(eventschema.Envelope{EventID: "0197c0a1-2222-7e5f-8a9b-000000000002", Type: ex.typ,
			SchemaVersion: ex.version, Tenant: "acme", Stream: "collection-0197c0a1-2222-7e5f-8a9b-000000000002", Revision: 3,
			Position: 17, CorrelationID: "c", Actor: "client:acme", Payload: ex.payload})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(msg.Value)
	}
	f.Add([]byte(`{"eventId":"e","type":"t","stream":"s","occurredAt":"10000-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"eventId":"e","type":"t","stream":"s","revision":-1}`))
	f.Add([]byte(`{"eventId":"e","type":"t","stream":"s","payload":nul}`))
	f.Add([]byte(`{"eventId":"e","type":"t","stream":"s","eventId":"f"}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		if len(value) > fuzzMaxPayload {
			return
		}
		env, err := eventschema.FromMessage(value)
		// The reference: encoding/json's Unmarshal and the same three required members.
		var ref eventschema.Envelope
		refErr := json.Unmarshal(value, &ref)
		refOK := refErr == nil && ref.EventID != "" && ref.Type != "" && ref.Stream != ""
		if (err == nil) != refOK {
			t.Fatalf("FromMessage(%q): %v; encoding/json: %v, %+v", value, err, refErr, ref)
		}
		if err != nil {
			return
		}
		// Time zones are compared by offset: each decoder makes its own *time.Location.
		sameTime := env.OccurredAt.Equal(ref.OccurredAt) && env.OccurredAt.Format(time.RFC3339Nano) == ref.OccurredAt.Format(time.RFC3339Nano)
		untimed := env
		untimed.OccurredAt, ref.OccurredAt = time.Time{}, time.Time{}
		if !sameTime || !reflect.DeepEqual(untimed, ref) {
			t.Fatalf("FromMessage(%q) = %+v; encoding/json decodes %+v", value, env, ref)
		}
		if env.EventID == "" || env.Type == "" || env.Stream == "" {
			t.Fatalf("accepted %q without an id, type or stream", value)
		}
		_, _ = reg.Decode(env)
		msg, err := eventschema.ToMessage(env)
		if err != nil {
			t.Fatalf("accepted %q but cannot send it on: %v", value, err)
		}
		again, err := eventschema.FromMessage(msg.Value)
		if err != nil || again.EventID != env.EventID || again.Type != env.Type || again.Stream != env.Stream ||
			again.SchemaVersion != env.SchemaVersion || again.Tenant != env.Tenant || again.Revision != env.Revision ||
			again.Position != env.Position || !again.OccurredAt.Equal(env.OccurredAt) || again.Actor != env.Actor ||
			again.CorrelationID != env.CorrelationID || again.CausationID != env.CausationID || !sameJSON(again.Payload, env.Payload) {
			t.Fatalf("%q travelled as %q and came back as %+v, %v", value, msg.Value, again, err)
		}
		if string(msg.Key) != env.Stream || msg.Topic != eventschema.Topic(eventschema.Category(env.Stream)) {
			t.Fatalf("message of %+v: topic %s, key %q", env, msg.Topic, msg.Key)
		}
	})
}

// FuzzToMessage compares ToMessage's encoding of an envelope with json.Marshal's, the reference:
// both refuse the same envelopes, and what ToMessage writes decodes (with encoding/json) to what
// json.Marshal's text decodes to, the payload as the same JSON value.
func FuzzToMessage(f *testing.F) {
	for i, ex := range storedExamples(f) {
		if i%4 != 0 {
			continue
		}
		f.Add("0197c0a1-2222-7e5f-8a9b-000000000002", ex.typ, ex.version, "acme", "collection-0197c0a1", uint64(3), uint64(17),
			int64(1767225600123456789), "c", "", "client:acme", []byte(ex.payload))
	}
	f.Add("e<>&\u2028", "t\x00", -1, "a\xff\xfe", "s\"q", uint64(1<<63), uint64(0), int64(-62135596800000000), "", "z", "", []byte(" {\"a\" : [1, 2e5, \"<&>\"] } "))
	f.Add("e", "t", 1, "a", "s", uint64(1), uint64(1), int64(0), "", "", "", []byte(`{"a":1}{"b":2}`))
	f.Add("e", "t", 1, "a", "s", uint64(1), uint64(1), int64(0), "", "", "", []byte(`{"a":1,"a":2,"s":"\xff"}`))
	f.Add("e", "t", 1, "a", "s", uint64(1), uint64(1), int64(0), "", "", "", []byte(nil))
	f.Add("e", "t", 1, "a", "s", uint64(1), uint64(1), int64(0), "", "", "", []byte(`nul`))
	f.Fuzz(func(t *testing.T, id, typ string, version int, tenant, stream string, revision, position uint64, at int64,
		correlation, causation, actor string, payload []byte) {
		if len(payload) > fuzzMaxPayload {
			return
		}
		// Years beyond 9999 too (time.Unix of the nanoseconds reaches only 1678–2262).
		occurred := time.Unix(at/1000, at%1000*1e6).UTC()
		if at%7 == 0 {
			occurred = occurred.In(time.FixedZone("", int(at%50_000)))
		}
		e := eventschema.Envelope{EventID: id, Type: typ, SchemaVersion: version, Tenant: tenant, Stream: stream,
			Revision: revision, Position: position, OccurredAt: occurred, CorrelationID: correlation,
			CausationID: causation, Actor: actor, Payload: payload}
		ref, refErr := json.Marshal(e)
		msg, err := eventschema.ToMessage(e)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("ToMessage(%+v): %v; json.Marshal: %v", e, err, refErr)
		}
		if err != nil {
			return
		}
		var got, want eventschema.Envelope
		if err := json.Unmarshal(msg.Value, &got); err != nil {
			t.Fatalf("ToMessage wrote %q, which encoding/json does not decode: %v", msg.Value, err)
		}
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatalf("json.Marshal wrote %q, which it does not decode: %v", ref, err)
		}
		if !sameJSON(got.Payload, want.Payload) {
			t.Fatalf("payload %q came out as %q, json.Marshal's as %q", payload, got.Payload, want.Payload)
		}
		if !got.OccurredAt.Equal(want.OccurredAt) || got.OccurredAt.Format(time.RFC3339Nano) != want.OccurredAt.Format(time.RFC3339Nano) {
			t.Fatalf("occurredAt %v came out as %v, json.Marshal's as %v", occurred, got.OccurredAt, want.OccurredAt)
		}
		got.Payload, want.Payload, got.OccurredAt, want.OccurredAt = nil, nil, time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ToMessage wrote %q, decoding to %+v; json.Marshal wrote %q, decoding to %+v", msg.Value, got, ref, want)
		}
	})
}

// sameJSON reports whether a and b are the same JSON value (a payload may travel with other
// whitespace and escapes than it came with); no text (an absent payload) is null, as it is sent.
func sameJSON(a, b []byte) bool {
	decode := func(raw []byte) (any, error) {
		if len(raw) == 0 {
			raw = []byte("null")
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}
	va, errA := decode(a)
	vb, errB := decode(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}
