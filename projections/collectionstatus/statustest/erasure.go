package statustest

import (
	"reflect"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/collectionstatus"
)

// The contract of a user's erasure: the personal parts of the deleted user's collections are
// blanked, nothing else changes.

// testErasePersonal: ErasePersonal blanks the personal part of the user's collections of the
// tenant, keeps their statuses, details and revisions, leaves every other row alone, and a later
// revision is still written over it.
func testErasePersonal(t *testing.T, s collectionstatus.Store) {
	withPersonal := func(r collectionstatus.Row) collectionstatus.Row {
		r = withDetails(r)
		r.Personal = sealed(r, collection.StatusPersonal{QRStartSecret: "qr-" + r.CollectionID,
			Instructions: []collection.Instruction{{RequestID: "r1", Method: "GET", URL: "https://company.example/eid"}}})
		return r
	}
	erased1 := withPersonal(userRow("c-1", "acme", listedUser, 1, 4))
	erased2 := withPersonal(userRow("c-2", "acme", listedUser, 2, 7))
	kept := []collectionstatus.Row{
		withPersonal(userRow("c-other-user", "acme", otherUser, 3, 2)),
		withPersonal(userRow("c-other-tenant", "globex", listedUser, 4, 2)),
		withPersonal(userRow("c-no-user", "acme", "", 5, 2)),
	}
	upsert(t, s, append([]collectionstatus.Row{erased1, erased2}, kept...)...)
	for range 2 { // erasing again changes nothing
		if err := s.ErasePersonal(ctx(t), "acme", listedUser); err != nil {
			t.Fatalf("ErasePersonal: %v", err)
		}
		for _, r := range []collectionstatus.Row{erased1, erased2} {
			want := r
			want.Personal = nil
			assertRow(t, get(t, s, "acme", r.CollectionID), stored(want))
		}
		for _, r := range kept {
			assertRow(t, get(t, s, r.Tenant, r.CollectionID), stored(r))
		}
	}
	// No user's erasure touches collections of no user.
	if err := s.ErasePersonal(ctx(t), "acme", ""); err != nil {
		t.Fatal(err)
	}
	assertRow(t, get(t, s, "acme", "c-no-user"), stored(kept[2]))
	// The projection goes on: the next status change is written over the erased row.
	next := withPersonal(userRow("c-1", "acme", listedUser, 1, 5))
	next.Status = "LOGIN"
	upsert(t, s, next)
	assertRow(t, get(t, s, "acme", "c-1"), stored(next))
}

// testProjectorErasesOnUserDeleted: a user.deleted blanks the personal parts of the user's
// collections, in the batch that brings it or after; the statuses stay; a redelivery changes
// nothing.
func testProjectorErasesOnUserDeleted(t *testing.T, s collectionstatus.Store) {
	f := newListFixture(t, s)
	f.start("c-1", listedUser, base)
	f.start("c-kept", otherUser, base)
	waiting := func(id string) eventschema.Envelope {
		return f.log.Append("acme", collection.StreamName(id), base.Add(time.Second), collection.StatusChanged{
			From: collection.StatusRunning, To: collection.StatusWaitingForUserAction, InstructionRequestIDs: []string{"r1"},
			ChangedAt: base.Add(time.Second),
			Personal: &collection.StatusPersonal{QRStartSecret: "qr-secret", Instructions: []collection.Instruction{
				{RequestID: "r1", Method: "GET", URL: "https://company.example/eid"}}}})
	}
	deleted := f.log.Append("acme", user.StreamName(listedUser), base.Add(2*time.Second), user.Deleted{DeletedAt: base.Add(2 * time.Second)})
	batch := []eventschema.Envelope{waiting("c-1"), waiting("c-kept"), deleted}
	for range 2 {
		if err := f.p.Handle(ctx(t), batch); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		erased := get(t, s, "acme", "c-1")
		if erased.Personal != nil || erased.Status != "WAITING_FOR_USER_ACTION" || erased.Revision != 1 {
			t.Fatalf("the deleted user's collection = %#v", erased)
		}
		if kept := opened(t, get(t, s, "acme", "c-kept")); kept.QRStartSecret != "qr-secret" {
			t.Fatalf("another user's collection lost its personal part: %#v", kept)
		}
	}
	view, err := collectionstatus.NewReader(s, suiteKeys).Get(ctx(t), "acme", "c-1")
	if err != nil || view.QRStartSecret != "" || view.Instructions != nil || view.Status != "WAITING_FOR_USER_ACTION" {
		t.Fatalf("the erased collection reads as %#v, %v", view, err)
	}
}

// testReaderUserNonFinalCollectionIDs lists every collection of a user whose status is not
// final, through pages, for its erasure to end them; final ones, another tenant's and another
// user's are not listed.
func testReaderUserNonFinalCollectionIDs(t *testing.T, s collectionstatus.Store) {
	var rows []collectionstatus.Row
	var want []string
	for i := range 1203 { // past two of the reader's pages
		id := "c-" + time.Duration(i).String()
		row := userRow(id, "acme", listedUser, i, 0)
		if i%3 == 0 {
			row.Status = "COMPLETED"
		} else {
			want = append([]string{id}, want...) // newest first
		}
		if i%3 == 2 {
			row.Status = "WAITING_FOR_USER_ACTION"
		}
		rows = append(rows, row)
	}
	rows = append(rows, userRow("c-other-user", "acme", otherUser, 1, 0), userRow("c-other-tenant", "globex", listedUser, 1, 0))
	upsert(t, s, rows...)
	got, err := collectionstatus.NewReader(s, suiteKeys).UserNonFinalCollectionIDs(ctx(t), "acme", listedUser)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("UserNonFinalCollectionIDs = %d ids (%v), want %d", len(got), err, len(want))
	}
	if none, err := collectionstatus.NewReader(s, suiteKeys).UserNonFinalCollectionIDs(ctx(t), "acme", "u-none"); err != nil || len(none) != 0 {
		t.Fatalf("a user without collections: %v, %v", none, err)
	}
}
