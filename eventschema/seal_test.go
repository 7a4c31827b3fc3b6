package eventschema_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

const (
	personalNumber = "199001010017"
	ownerName      = "Tolvan Tolvansson"
)

var startedPayload = []byte(`{"collectionId":"c1","clientId":"acme","company":"se-demo-insurer","product":"INSURANCE",` +
	`"loginMethod":"M","apiVersion":"2026-04-01","requestHash":"h","startedAt":"2026-01-02T03:04:05.678Z",` +
	`"personal":{"personalNumber":"` + personalNumber + `","accountOwnerName":"` + ownerName + `"}}`)

func TestSealAndOpenPersonal(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	sealed, erased, err := eventschema.SealPersonal(ctx, keys, "collection-c1", startedPayload)
	if err != nil || erased {
		t.Fatalf("seal: erased %v, %v", erased, err)
	}
	for _, secret := range []string{personalNumber, ownerName, "Tolvan"} {
		if bytes.Contains(sealed, []byte(secret)) {
			t.Fatalf("sealed payload holds %q: %s", secret, sealed)
		}
	}
	if !bytes.HasPrefix(sealed, []byte(`{"collectionId":"c1","clientId":"acme",`)) || !eventschema.PersonalSealed(sealed) ||
		eventschema.PlainPersonal(sealed) || !eventschema.PlainPersonal(startedPayload) {
		t.Fatalf("sealed payload %s", sealed)
	}
	var shape struct {
		Personal struct {
			Sealed map[string]any `json:"sealed"`
		} `json:"personal"`
	}
	if err := json.Unmarshal(sealed, &shape); err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{"v", "subject", "keyId", "nonce", "ciphertext"} {
		if _, ok := shape.Personal.Sealed[member]; !ok {
			t.Fatalf("sealed form %v lacks %s", shape.Personal.Sealed, member)
		}
	}
	if shape.Personal.Sealed["subject"] != "collection-c1" {
		t.Fatalf("subject %v", shape.Personal.Sealed["subject"])
	}
	opened, erased, err := eventschema.OpenPersonal(ctx, keys, sealed)
	if err != nil || erased {
		t.Fatalf("open: erased %v, %v", erased, err)
	}
	if !bytes.Equal(opened, startedPayload) {
		t.Fatalf("round trip\n got %s\nwant %s", opened, startedPayload)
	}
	// Two seals of one payload differ (a fresh nonce each time).
	again, _, err := eventschema.SealPersonal(ctx, keys, "collection-c1", startedPayload)
	if err != nil || bytes.Equal(again, sealed) {
		t.Fatalf("sealing twice gave the same bytes (%v)", err)
	}
	// Sealing a sealed payload leaves it as it is.
	if twice, _, err := eventschema.SealPersonal(ctx, keys, "collection-c1", sealed); err != nil || !bytes.Equal(twice, sealed) {
		t.Fatalf("sealed again: %v", err)
	}
}

func sealedStarted(t *testing.T, keys eventschema.Keys, subject string) []byte {
	t.Helper()
	sealed, _, err := eventschema.SealPersonal(context.Background(), keys, subject, startedPayload)
	if err != nil {
		t.Fatal(err)
	}
	return sealed
}

// editSealed rewrites one member of the sealed form.
func editSealed(t *testing.T, payload []byte, edit func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	edit(m["personal"].(map[string]any)["sealed"].(map[string]any))
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOpenFailsLoudly(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	sealed := sealedStarted(t, keys, "collection-c1")
	if _, err := keys.GetOrCreate(ctx, "collection-c2"); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"tampered ciphertext": editSealed(t, sealed, func(s map[string]any) {
			ct, _ := base64.StdEncoding.DecodeString(s["ciphertext"].(string))
			ct[3] ^= 1
			s["ciphertext"] = base64.StdEncoding.EncodeToString(ct)
		}),
		"another subject's key": editSealed(t, sealed, func(s map[string]any) { s["subject"] = "collection-c2" }),
		"moved to another subject with its key id": editSealed(t, sealed, func(s map[string]any) {
			k, _ := keys.Get(ctx, "collection-c2")
			s["subject"], s["keyId"] = "collection-c2", k.ID()
		}),
		"another key id": editSealed(t, sealed, func(s map[string]any) { s["keyId"] = "k-other" }),
		"short nonce":    editSealed(t, sealed, func(s map[string]any) { s["nonce"] = "AAAA" }),
		"future version": editSealed(t, sealed, func(s map[string]any) { s["v"] = 2 }),
		"compression":    editSealed(t, sealed, func(s map[string]any) { s["compression"] = "deflate" }),
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			out, erased, err := eventschema.OpenPersonal(ctx, keys, payload)
			if !errors.Is(err, eventschema.ErrSealBroken) || erased || out != nil {
				t.Fatalf("open = %s, erased %v, %v; want ErrSealBroken", out, erased, err)
			}
		})
	}
	t.Run("lost key", func(t *testing.T) {
		keys.Forget()
		out, erased, err := eventschema.OpenPersonal(ctx, keys, sealed)
		if !errors.Is(err, eventschema.ErrKeyNotFound) || erased || out != nil {
			t.Fatalf("open with a lost key = %s, erased %v, %v", out, erased, err)
		}
	})
	t.Run("closed key store", func(t *testing.T) {
		closed := keystore.NewMemory()
		payload := sealedStarted(t, closed, "collection-c1")
		_ = closed.Close()
		if _, _, err := eventschema.OpenPersonal(ctx, closed, payload); err == nil {
			t.Fatal("opened with a closed key store")
		}
		if _, _, err := eventschema.SealPersonal(ctx, closed, "collection-c1", startedPayload); err == nil {
			t.Fatal("sealed with a closed key store")
		}
	})
}

func TestErasedSubject(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	sealed := sealedStarted(t, keys, "user-u1")
	if err := keys.Destroy(ctx, "user-u1"); err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"2026-04-01","clientId":"acme","collectionId":"c1","company":"se-demo-insurer",` +
		`"loginMethod":"M","product":"INSURANCE","requestHash":"h","startedAt":"2026-01-02T03:04:05.678Z"}`
	opened, erased, err := eventschema.OpenPersonal(ctx, keys, sealed)
	if err != nil || !erased || string(opened) != want {
		t.Fatalf("open of an erased subject = %s, erased %v, %v", opened, erased, err)
	}
	// A late event of an erased subject is appended without its personal data, never under a
	// new key, and says so: its personal member is the erased marker, which opens as erased.
	late, erased, err := eventschema.SealPersonal(ctx, keys, "user-u1", startedPayload)
	wantLate := strings.Replace(string(startedPayload), `{"personalNumber":"`+personalNumber+`","accountOwnerName":"`+ownerName+`"}`,
		`{"erased":true}`, 1)
	if err != nil || !erased || string(late) != wantLate {
		t.Fatalf("seal for an erased subject = %s, erased %v, %v", late, erased, err)
	}
	if !eventschema.PersonalErased(late) || eventschema.PlainPersonal(late) || eventschema.PersonalSealed(late) {
		t.Fatalf("the erased marker reads as erased %v, plain %v, sealed %v", eventschema.PersonalErased(late),
			eventschema.PlainPersonal(late), eventschema.PersonalSealed(late))
	}
	if again, _, err := eventschema.SealPersonal(ctx, keys, "user-u1", late); err != nil || !bytes.Equal(again, late) {
		t.Fatalf("sealing the marker again = %s, %v", again, err)
	}
	opened, erased, err = eventschema.OpenPersonal(ctx, keys, late)
	if err != nil || !erased || string(opened) != want {
		t.Fatalf("open of the erased marker = %s, erased %v, %v", opened, erased, err)
	}
	if eventschema.PersonalErased(sealed) || eventschema.PersonalErased(startedPayload) {
		t.Fatal("a sealed or a plain member reads as the erased marker")
	}
	if _, err := eventschema.Seal(ctx, keys, "user-u1", []byte("x")); !errors.Is(err, eventschema.ErrSubjectErased) {
		t.Fatalf("Seal for an erased subject: %v", err)
	}
}

func TestPlainPayloadsPassThrough(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	for _, payload := range []string{
		string(startedPayload),
		`{"workerId":"w1","claimedAt":"2026-01-02T03:04:05Z"}`,
		`{"from":"LOGIN","to":"LOGIN","personal":null}`,
		`{"note":"the word \"sealed\" in a public member","personal":{"qrStartSecret":"s"}}`,
	} {
		out, erased, err := eventschema.OpenPersonal(ctx, keys, []byte(payload))
		if err != nil || erased || string(out) != payload {
			t.Fatalf("open %s = %s, %v, %v", payload, out, erased, err)
		}
	}
	if v, erased, err := eventschema.Open(ctx, keys, []byte("%PDF-1.4 plain")); err != nil || erased || string(v) != "%PDF-1.4 plain" {
		t.Fatalf("open of a plain value = %q, %v, %v", v, erased, err)
	}
	// A payload without personal data seals to itself.
	plain := []byte(`{"workerId":"w1","claimedAt":"2026-01-02T03:04:05Z"}`)
	if out, _, err := eventschema.SealPersonal(ctx, keys, "collection-c1", plain); err != nil || !bytes.Equal(out, plain) {
		t.Fatalf("seal without personal data = %s, %v", out, err)
	}
}

// TestSealedDocumentStaysSmall: a document's base64 content, sealed and base64-encoded again,
// must stay about the size it was, so that a 10 MiB PDF still fits the Kafka log's messages.
func TestSealedDocumentStaysSmall(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	pdf := make([]byte, 2<<20)
	if _, err := rand.Read(pdf); err != nil { // incompressible, as a PDF's streams are
		t.Fatal(err)
	}
	payload := []byte(`{"documentId":"d1","personal":{"content":"` + base64.StdEncoding.EncodeToString(pdf) + `"}}`)
	sealed, _, err := eventschema.SealPersonal(ctx, keys, "collection-c1", payload)
	if err != nil {
		t.Fatal(err)
	}
	if ratio := float64(len(sealed)) / float64(len(payload)); ratio > 1.05 {
		t.Fatalf("sealed %d bytes from %d: ratio %.2f", len(sealed), len(payload), ratio)
	}
	opened, _, err := eventschema.OpenPersonal(ctx, keys, sealed)
	if err != nil || !bytes.Equal(opened, payload) {
		t.Fatalf("round trip of a large document: %v", err)
	}
	v, err := eventschema.Seal(ctx, keys, "collection-c1", pdf)
	if err != nil {
		t.Fatal(err)
	}
	if ratio := float64(len(v)) / float64(len(pdf)); ratio > 1.4 {
		t.Fatalf("a sealed value of %d bytes takes %d", len(pdf), len(v))
	}
	back, _, err := eventschema.Open(ctx, keys, v)
	if err != nil || !bytes.Equal(back, pdf) {
		t.Fatalf("value round trip: %v", err)
	}
}

// TestEveryStoredExampleDecodesSealed: every stored example, sealed as the repository stores it,
// is refused by Decode until it is opened, and decodes opened to what the plain example decodes to.
func TestEveryStoredExampleDecodesSealed(t *testing.T) {
	ctx := context.Background()
	r := registry(t)
	keys := keystore.NewMemory()
	files, err := filepath.Glob("testdata/examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		m := exampleName.FindStringSubmatch(strings.TrimSuffix(filepath.Base(f), ".json"))
		typ := m[1]
		version, _ := strconv.Atoi(m[2])
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		env := eventschema.Envelope{EventID: "e", Type: typ, SchemaVersion: version, Stream: "s", Payload: raw}
		want, err := r.Decode(env)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		sealed, _, err := eventschema.SealPersonal(ctx, keys, "collection-c1", raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if eventschema.PersonalSealed(sealed) {
			if _, err := r.Decode(eventschema.Envelope{EventID: "e", Type: typ, SchemaVersion: version, Stream: "s", Payload: sealed}); !errors.Is(err, eventschema.ErrSealed) {
				t.Errorf("%s: decode of a sealed payload: %v", f, err)
			}
		}
		opened, _, err := eventschema.OpenPersonal(ctx, keys, sealed)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := r.Validate(typ, version, opened); err != nil {
			t.Errorf("%s: opened payload: %v", f, err)
		}
		env.Payload = opened
		got, err := r.Decode(env)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: opened decodes to\n%#v\nwant %#v", f, got, want)
		}
	}
}

// TestEveryStoredExampleDecodesErased: an event appended after its subject was erased carries
// the erased marker, which no decoder takes for personal data; opened, it decodes as the event
// without its personal data.
func TestEveryStoredExampleDecodesErased(t *testing.T) {
	ctx := context.Background()
	r := registry(t)
	keys := keystore.NewMemory()
	if err := keys.Destroy(ctx, "user-u1"); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		m := exampleName.FindStringSubmatch(strings.TrimSuffix(filepath.Base(f), ".json"))
		typ := m[1]
		version, _ := strconv.Atoi(m[2])
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		late, erased, err := eventschema.SealPersonal(ctx, keys, "user-u1", raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if erased != eventschema.PersonalErased(late) || (erased && eventschema.PlainPersonal(late)) {
			t.Fatalf("%s: erased %v, marker %v", f, erased, eventschema.PersonalErased(late))
		}
		env := eventschema.Envelope{EventID: "e", Type: typ, SchemaVersion: version, Stream: "s", Payload: late}
		if _, err := r.Decode(env); erased && !errors.Is(err, eventschema.ErrSealed) {
			t.Errorf("%s: decode of the erased marker: %v", f, err)
		}
		opened, openedErased, err := eventschema.OpenPersonal(ctx, keys, late)
		if err != nil || openedErased != erased {
			t.Fatalf("%s: open: erased %v, %v", f, openedErased, err)
		}
		env.Payload = opened
		if _, err := r.Decode(env); err != nil {
			t.Errorf("%s: the opened marker does not decode: %v", f, err)
		}
	}
}

func TestKeyNeverPrintsItsMaterial(t *testing.T) {
	material := bytes.Repeat([]byte{0xAB}, eventschema.KeySize)
	k, err := eventschema.NewKey("k1", material)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{k.String(), k.GoString(), k.LogValue().String()} {
		if strings.Contains(strings.ToLower(s), "ab") && strings.Contains(s, "171") {
			t.Fatalf("key prints its material: %s", s)
		}
	}
	if _, err := eventschema.NewKey("k1", material[:16]); err == nil {
		t.Fatal("a 128-bit key was accepted")
	}
}

// TestInspectPersonalNeedsNoKey: what a payload holds of personal data, and under which subject,
// is told from the sealed form alone.
func TestInspectPersonalNeedsNoKey(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	sealed, _, err := eventschema.SealPersonal(ctx, keys, "user-u1", startedPayload)
	if err != nil {
		t.Fatal(err)
	}
	keys.Forget() // a lost key store: inspecting opens nothing
	for _, tc := range []struct {
		name          string
		payload       string
		subject       string
		sealed, plain bool
	}{
		{"sealed", string(sealed), "user-u1", true, false},
		{"plain", string(startedPayload), "", false, true},
		{"none", `{"collectionId":"c1"}`, "", false, false},
		{"null", `{"collectionId":"c1","personal":null}`, "", false, false},
		{"erased marker", `{"collectionId":"c1","personal":{"erased":true}}`, "", false, false},
		{"not an object", `[1]`, "", false, false},
	} {
		subject, isSealed, plain := eventschema.InspectPersonal(json.RawMessage(tc.payload))
		if subject != tc.subject || isSealed != tc.sealed || plain != tc.plain {
			t.Errorf("%s: InspectPersonal = %q, %v, %v; want %q, %v, %v", tc.name, subject, isSealed, plain, tc.subject, tc.sealed, tc.plain)
		}
	}
}

// TestWithoutPersonal: the personal member is cut out wherever it stands, and nothing else of the
// payload changes.
func TestWithoutPersonal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"personal":{"x":"y"},"b":2}`, `{"a":1,"b":2}`},
		{`{"personal":{"sealed":{"v":1}},"a":1}`, `{"a":1}`},
		{`{"a":1,"personal":{"erased":true}}`, `{"a":1}`},
		{`{"personal":null}`, `{}`},
		{`{ "a" : 1 , "personal" : { "x" : [1,2] } , "b" : "personal" }`, `{ "a" : 1 , "b" : "personal" }`},
		{` { "personal" : 1 , "a" : 1 }`, ` { "a" : 1 }`},
		{`{"a":{"personal":1}}`, `{"a":{"personal":1}}`},
		{`{}`, `{}`},
	} {
		out, err := eventschema.WithoutPersonal(json.RawMessage(tc.in))
		if err != nil || string(out) != tc.want {
			t.Errorf("WithoutPersonal(%s) = %s, %v; want %s", tc.in, out, err, tc.want)
		}
		if !json.Valid(out) {
			t.Errorf("WithoutPersonal(%s) = %s, not JSON", tc.in, out)
		}
	}
	if _, err := eventschema.WithoutPersonal(json.RawMessage(`[1]`)); err == nil {
		t.Error("WithoutPersonal of an array: no error")
	}
}
