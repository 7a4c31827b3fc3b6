package datatest

import (
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/collectiondata"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/query"
)

// The contract of a user's erasure: the personal data of the deleted user's collections is
// blanked (rows' records and personal data, documents' content, file name and digest), nothing
// else changes.

const (
	erasedUser = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	keptUser   = "6f1c2a9e-3b4d-4e5f-8a7b-000000000000"
)

func ofUser(r collectiondata.Row, userUUID string) collectiondata.Row {
	r.UserUUID = userUUID
	return r
}

// testErasePersonal: ErasePersonal blanks the user's collections of the tenant, keeps their
// data, statuses and revisions, leaves every other collection alone, and a later revision is
// still written over it.
func testErasePersonal(t *testing.T, s collectiondata.Store) {
	erased1, erased2 := ofUser(full("c-1", "acme", 4), erasedUser), ofUser(full("c-2", "acme", 7), erasedUser)
	kept := []collectiondata.Row{
		ofUser(full("c-other-user", "acme", 2), keptUser),
		ofUser(full("c-other-tenant", "globex", 2), erasedUser),
		full("c-no-user", "acme", 2),
	}
	erasedDoc := doc("c-1", "acme", "d-1", 3, "%PDF-erased")
	keptDocs := []collectiondata.Document{doc("c-other-user", "acme", "d-2", 2, "%PDF-kept"),
		doc("c-other-tenant", "globex", "d-3", 2, "%PDF-other-tenant")}
	upsert(t, s, append([]collectiondata.Row{erased1, erased2}, kept...), append([]collectiondata.Document{erasedDoc}, keptDocs...)...)
	for range 2 { // erasing again changes nothing
		if err := s.ErasePersonal(ctx(t), "acme", erasedUser); err != nil {
			t.Fatalf("ErasePersonal: %v", err)
		}
		for _, r := range []collectiondata.Row{erased1, erased2} {
			want := r
			want.Personal, want.Content = collectiondata.Personal{}, collectiondata.Content{}
			assertEqual(t, "erased row", get(t, s, "acme", r.CollectionID), stored(want))
		}
		for _, r := range kept {
			assertEqual(t, "kept row", get(t, s, r.Tenant, r.CollectionID), stored(r))
		}
		wantDoc := erasedDoc
		wantDoc.Content, wantDoc.FileName, wantDoc.SHA256 = nil, "", ""
		assertEqual(t, "erased document", getDoc(t, s, "acme", "c-1", "d-1"), storedDoc(wantDoc, true))
		docs, err := s.Documents(ctx(t), "acme", "c-1")
		if err != nil || len(docs) != 1 || docs[0].HasContent {
			t.Fatalf("the erased collection's documents = %+v, %v", docs, err)
		}
		for _, d := range keptDocs {
			assertEqual(t, "kept document", getDoc(t, s, d.Tenant, d.CollectionID, d.DocumentID), storedDoc(d, true))
		}
	}
	if err := s.ErasePersonal(ctx(t), "acme", ""); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "row of no user", get(t, s, "acme", "c-no-user"), stored(kept[2]))
	// The projection goes on: the next event is written over the erased row.
	next := ofUser(full("c-1", "acme", 5), erasedUser)
	upsert(t, s, []collectiondata.Row{next})
	assertEqual(t, "row after the erasure", get(t, s, "acme", "c-1"), stored(next))
}

// testProjectorErasesOnUserDeleted: a user.deleted blanks the personal data of the user's
// collections, in the batch that brings it or after; the reader then serves their data without
// records, names or personal information and names no career statement, whose download is gone; a
// redelivery changes nothing.
func testProjectorErasesOnUserDeleted(t *testing.T, s collectiondata.Store) {
	log := eventlog.New(t)
	p := collectiondata.NewProjector(log.Registry(), s)
	fr, _, _ := wealthLife(log, "acme", "c-fr", base)
	forUser(fr.envs, erasedUser, log)
	ins, _ := insuranceLife(log, "acme", "c-kept", base)
	forUser(ins.envs, keptUser, log)
	handle(t, p, append(append([]eventschema.Envelope{}, fr.envs...), ins.envs...))
	reader := collectiondata.NewReader(s)
	before, err := reader.GetData(ctx(t), "acme", "c-fr")
	if err != nil || before.PersonalInformation == nil || before.CareerStatement == nil {
		t.Fatalf("before the erasure: %+v, %v", before, err)
	}
	deleted := log.Append("acme", user.StreamName(erasedUser), base.Add(time.Minute), user.Deleted{DeletedAt: base.Add(time.Minute)})
	for range 2 {
		handle(t, p, []eventschema.Envelope{deleted})
		v, err := reader.GetData(ctx(t), "acme", "c-fr")
		if err != nil || v.PersonalInformation != nil || v.CareerStatement != nil || v.Status != "COMPLETED" ||
			len(v.Pensions) != 0 || len(v.Investments) != 0 {
			t.Fatalf("the erased collection reads as %+v, %v", v, err)
		}
		if _, err := reader.GetDocument(ctx(t), "acme", "c-fr", collection.DocumentFrenchCareerStatement); !errors.Is(err, query.ErrNotFound) {
			t.Fatalf("the erased career statement: %v", err)
		}
		kept, err := reader.GetData(ctx(t), "acme", "c-kept")
		if err != nil || len(kept.Insurances) == 0 || kept.Insurances[0].HolderName == nil {
			t.Fatalf("another user's collection lost its names: %+v, %v", kept, err)
		}
	}
}

// forUser rewrites a stream's collection.started so that the collection is the user's, as if it
// had been recorded so.
func forUser(envs []eventschema.Envelope, userUUID string, log *eventlog.Log) {
	for i, env := range envs {
		if env.Type != collection.EventStarted {
			continue
		}
		ev, err := log.Registry().Decode(env)
		if err != nil {
			panic(err)
		}
		started := ev.(collection.Started)
		started.UserUUID = userUUID
		_, _, payload, err := log.Registry().Encode(started)
		if err != nil {
			panic(err)
		}
		envs[i].Payload = payload
	}
}
