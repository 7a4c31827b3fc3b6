package repository_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

const (
	sealPersonalNumber = "191212121212"
	sealOwnerName      = "Tolvan Tolvansson"
	sealPDF            = "%PDF-1.4 Tolvan Tolvansson's pension letter"
)

func sealedRepo(t *testing.T) (*repository.Repository[*collection.Collection], *memstore.Store, *keystore.Memory) {
	t.Helper()
	store, keys := memstore.New(), keystore.NewMemory()
	return repository.New(store, mustRegistry(t), collection.Kind, repository.WithKeys(keys),
		repository.WithClock(func() time.Time { return t0 })), store, keys
}

func startCollection(t *testing.T, repo *repository.Repository[*collection.Collection], id, userUUID string) {
	t.Helper()
	pn, err := personnummer.Parse(sealPersonalNumber, t0)
	if err != nil {
		t.Fatal(err)
	}
	req := collection.StartRequest{CollectionID: id, ClientID: "acme", LoginMethod: "PDF_UPLOAD", APIVersion: "2026-04-01",
		UserUUID: userUUID, PersonalNumber: pn, AccountOwnerName: sealOwnerName,
		Company: collection.Company{ID: "se-demo-pension", Products: []collection.Product{collection.ProductWealth}, Available: true},
		PDF:     &collection.UploadedPDF{DocumentID: "d1", FileName: "letter.pdf", Content: []byte(sealPDF)}}
	if _, _, err := repo.Update(context.Background(), id, meta, func(c *collection.Collection) error { return c.Start(req, t0) }, repository.NewID()); err != nil {
		t.Fatal(err)
	}
}

// TestAppendSealsPersonalData: the event store holds no personal data in plain text, and Load
// gives the plain events back.
func TestAppendSealsPersonalData(t *testing.T) {
	repo, store, _ := sealedRepo(t)
	startCollection(t, repo, "c1", "")
	envs := store.Events(collection.StreamName("c1"))
	if len(envs) != 2 {
		t.Fatalf("%d events stored", len(envs))
	}
	for _, env := range envs {
		for _, secret := range []string{sealPersonalNumber, "19121212-1212", "121212-1212", sealOwnerName, "Tolvan", "PDF-1.4", "JVBERi0xLjQ"} {
			if bytes.Contains(env.Payload, []byte(secret)) {
				t.Fatalf("%s stored with %q in plain text: %s", env.Type, secret, env.Payload)
			}
		}
		if !eventschema.PersonalSealed(env.Payload) || eventschema.SealedSubject(sealedMember(t, env.Payload)) != "collection-c1" {
			t.Fatalf("%s not sealed under the collection: %s", env.Type, env.Payload)
		}
	}
	c, err := repo.Load(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Person(); p.PersonalNumber != sealPersonalNumber || p.AccountOwnerName != sealOwnerName {
		t.Fatalf("loaded person %+v", p)
	}
	if docs := c.Documents(); len(docs) != 1 || docs[0].Personal == nil || string(docs[0].Personal.Content) != sealPDF {
		t.Fatalf("loaded documents %+v", docs)
	}
}

func sealedMember(t *testing.T, payload []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil || m["personal"] == nil {
		t.Fatalf("no personal member (%v): %s", err, payload)
	}
	return m["personal"]
}

func TestACollectionOfAUserIsSealedUnderTheUser(t *testing.T) {
	repo, store, _ := sealedRepo(t)
	startCollection(t, repo, "c1", "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b")
	for _, env := range store.Events(collection.StreamName("c1")) {
		if got := eventschema.SealedSubject(sealedMember(t, env.Payload)); got != "user-6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b" {
			t.Fatalf("%s sealed under %q", env.Type, got)
		}
	}
}

// TestAnErasedSubjectsEventsLoseTheirPersonalData: appended after the erasure, an event is
// stored with the erased marker in place of its personal data (never under a new key); loaded,
// erased events carry none.
func TestAnErasedSubjectsEventsLoseTheirPersonalData(t *testing.T) {
	ctx := context.Background()
	repo, store, keys := sealedRepo(t)
	startCollection(t, repo, "c1", "")
	if err := keys.Destroy(ctx, "collection-c1"); err != nil {
		t.Fatal(err)
	}
	c, err := repo.Load(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Person(); p != (collection.StartedPerson{}) || c.Documents()[0].Personal != nil || c.Company() != "se-demo-pension" {
		t.Fatalf("erased collection loads with %+v, %+v", p, c.Documents())
	}
	if err := keys.Destroy(ctx, "collection-c2"); err != nil {
		t.Fatal(err)
	}
	startCollection(t, repo, "c2", "")
	for _, env := range store.Events(collection.StreamName("c2")) {
		if !eventschema.PersonalErased(env.Payload) || bytes.Contains(env.Payload, []byte(`"sealed"`)) {
			t.Fatalf("%s of an erased subject stored without the erased marker: %s", env.Type, env.Payload)
		}
	}
	if c, err := repo.Load(ctx, "c2"); err != nil || c.Person() != (collection.StartedPerson{}) || c.Company() != "se-demo-pension" {
		t.Fatalf("a collection appended after its subject's erasure loads as %+v, %v", c, err)
	}
	if _, err := keys.Get(ctx, "collection-c2"); !errors.Is(err, eventschema.ErrSubjectErased) {
		t.Fatalf("an erased subject got a key: %v", err)
	}
}

func TestALostKeyFailsTheLoad(t *testing.T) {
	repo, _, keys := sealedRepo(t)
	startCollection(t, repo, "c1", "")
	keys.Forget()
	if _, err := repo.Load(context.Background(), "c1"); !errors.Is(err, eventschema.ErrKeyNotFound) {
		t.Fatalf("load with a lost key: %v", err)
	}
}

// TestWithoutKeysASealedStreamDoesNotLoad: nothing decodes sealed data as if it were absent.
func TestWithoutKeysASealedStreamDoesNotLoad(t *testing.T) {
	repo, store, _ := sealedRepo(t)
	startCollection(t, repo, "c1", "")
	plain := repository.New(store, mustRegistry(t), collection.Kind)
	if _, err := plain.Load(context.Background(), "c1"); !errors.Is(err, eventschema.ErrSealed) {
		t.Fatalf("load without keys: %v", err)
	}
}

func TestClientEventsAreNotSealed(t *testing.T) {
	store, keys := memstore.New(), keystore.NewMemory()
	repo := repository.New(store, mustRegistry(t), client.Kind, repository.WithKeys(keys))
	if _, _, err := repo.Update(context.Background(), "acme", meta, register); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Get(context.Background(), "client-acme"); !errors.Is(err, eventschema.ErrKeyNotFound) {
		t.Fatalf("a client got a key: %v", err)
	}
}
