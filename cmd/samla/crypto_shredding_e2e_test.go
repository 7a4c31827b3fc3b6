package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/pdfletter"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/eventschema"
)

// TestNoPlainPersonalDataOnDisk runs collections of 191212121212 through the embedded service
// (the insurer, the pension company with the account owner's name, a PDF letter upload) and
// then reads the raw bytes of every file of the event store, the Kafka log and the read models:
// none holds the personal number (in either form), the owner's name or the letter, which the
// API still serves in plain text.
func TestNoPlainPersonalDataOnDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	svc := start(t, personaConfig(t, dir))
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}

	const (
		pn     = "191212121212"
		owner  = "Tolvan Tolvansson"
		holder = "Tolvan Tolvansson"
	)
	var letter bytes.Buffer
	if err := pdfletter.WriteSample(&letter, pdfletter.SampleOptions{Holder: holder}); err != nil {
		t.Fatal(err)
	}
	letterB64 := base64.StdEncoding.EncodeToString(letter.Bytes())

	insurer := c.completed(collectionRequest{company: "se-demo-insurer", pn: pn})
	pension := c.completed(collectionRequest{company: "se-demo-pension", pn: pn, ownerName: owner})
	upload := c.completed(collectionRequest{company: "se-demo-insurer", loginMethod: "PDF_UPLOAD",
		extraParams: []map[string]any{{"type": "PdfDocumentParameter", "contentBase64": letterB64, "fileName": "letter.pdf"}}})

	// The API serves the personal data in plain text.
	if code, out, _ := c.data("/collections/"+pension+"/wealth/data", "2026-04-01"); code != 200 ||
		!strings.Contains(mustJSON(t, out), pn) {
		t.Fatalf("pension data = %d %v", code, out)
	}
	if code, out, _ := c.data("/collections/"+insurer+"/insurance/data", "2026-04-01"); code != 200 || !strings.Contains(mustJSON(t, out), "Tolvan") {
		t.Fatalf("insurer data = %d %v", code, out)
	}
	if code, out, _ := c.data("/collections/"+upload+"/insurance/data", "2026-04-01"); code != 200 || !strings.Contains(mustJSON(t, out), holder) {
		t.Fatalf("letter data = %d %v", code, out)
	}
	stop(t, svc) // every file written and closed

	secrets := map[string][]byte{
		"personal number":         []byte(pn),
		"dashed personal number":  []byte("19121212-1212"),
		"short personal number":   []byte("121212-1212"),
		"owner's name":            []byte(owner),
		"owner's last name":       []byte("Tolvansson"),
		"letter's holder":         []byte(holder),
		"letter in base64":        []byte(letterB64[:64]),
		"letter's bytes":          letter.Bytes()[:64],
		"letter's middle":         letter.Bytes()[len(letter.Bytes())/2 : len(letter.Bytes())/2+48],
		"letter's middle, base64": []byte(base64.StdEncoding.EncodeToString(letter.Bytes()[300:348])[4:60]),
	}
	files := 0
	for _, sub := range []string{"eventstore", "kafka", "readmodels"} {
		root := filepath.Join(dir, sub)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			for what, secret := range secrets {
				if bytes.Contains(raw, secret) {
					t.Errorf("%s holds the %s in plain text", path, what)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 5 {
		t.Fatalf("read only %d files: is the data dir where the test thinks?", files)
	}

	// The report finds nothing in plain text, until an event written without sealing (as
	// before crypto-shredding) is there.
	cfg := personaConfig(t, dir)
	report, err := ReportPlainPersonal(context.Background(), cfg)
	if err != nil || report.Plain != 0 || report.Sealed < 6 {
		t.Fatalf("report = %+v, %v", report, err)
	}
	appendUnsealed(t, filepath.Join(dir, "eventstore", "events.db"))
	report, err = ReportPlainPersonal(context.Background(), cfg)
	if err != nil || report.Plain != 1 || report.ByType[collection.EventStarted] != 1 || report.PlainFields != 2 {
		t.Fatalf("report after an unsealed event = %+v, %v", report, err)
	}

	// Events of older schema versions are counted as the registry upcasts them: the personal
	// number and name in a v1 collection.started's input (2 fields), the instructions in a v1
	// collection.status-changed's public part (1) and the insurances a v1 collection kept
	// outside its personal member, beside the holders' names (2).
	appendStoredExamples(t, filepath.Join(dir, "eventstore", "events.db"), "collection-c-v1",
		"collection.started.v1.json", "collection.status-changed.v1.instructions.json",
		"collection.insurances-collected.v1.json")
	report, err = ReportPlainPersonal(context.Background(), cfg)
	if err != nil || report.Plain != 4 || report.PlainFields != 2+2+1+2 || report.ByType[collection.EventStarted] != 2 ||
		report.ByType[collection.EventStatusChanged] != 1 || report.ByType[collection.EventInsurancesCollected] != 1 {
		t.Fatalf("report after v1 events = %+v, %v", report, err)
	}
	var out bytes.Buffer
	report.Print(&out)
	if !strings.Contains(out.String(), "Nothing is encrypted retroactively") || !strings.Contains(out.String(), collection.EventStarted) {
		t.Fatalf("printed report:\n%s", out.String())
	}
}

// appendStoredExamples appends the stored examples of eventschema/testdata/examples, named
// <type>.v<version>[.variant].json, to one stream as an older build wrote them.
func appendStoredExamples(t *testing.T, path, stream string, names ...string) {
	t.Helper()
	store, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	envs := make([]eventschema.Envelope, 0, len(names))
	for _, name := range names {
		env := storedExample(t, name)
		env.Stream = stream
		envs = append(envs, env)
	}
	if _, err := store.Append(context.Background(), stream, eventstore.NoStream(), envs); err != nil {
		t.Fatal(err)
	}
}

// storedExample is the envelope of one stored example of eventschema/testdata/examples.
func storedExample(t *testing.T, name string) eventschema.Envelope {
	t.Helper()
	payload, err := os.ReadFile(filepath.Join("..", "..", "eventschema", "testdata", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSuffix(name, ".json"), ".")
	for i := len(parts) - 1; i > 0; i-- {
		if version, err := strconv.Atoi(strings.TrimPrefix(parts[i], "v")); err == nil && strings.HasPrefix(parts[i], "v") {
			return eventschema.Envelope{EventID: uuid.NewString(), Type: strings.Join(parts[:i], "."),
				SchemaVersion: version, Tenant: "sandbox", OccurredAt: time.Now(), Payload: payload}
		}
	}
	t.Fatalf("example %s names no version", name)
	return eventschema.Envelope{}
}

// appendUnsealed appends a collection as a build before crypto-shredding did: its personal data
// in plain text.
func appendUnsealed(t *testing.T, path string) {
	t.Helper()
	store, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	number, err := personnummer.Parse("199001010017", now)
	if err != nil {
		t.Fatal(err)
	}
	repo := repository.New(store, reg, collection.Kind) // no keys: as before sealing
	_, _, err = repo.Update(context.Background(), "c-old", repository.Meta{Tenant: "sandbox"}, func(c *collection.Collection) error {
		return c.Start(collection.StartRequest{CollectionID: "c-old", ClientID: "sandbox", LoginMethod: "M",
			Company:        collection.Company{ID: "se-demo-insurer", Available: true},
			PersonalNumber: number, AccountOwnerName: "Old Plain"}, now)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
