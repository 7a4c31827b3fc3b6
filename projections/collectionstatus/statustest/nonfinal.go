package statustest

import (
	"testing"
	"time"

	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// The contract of the non-final collections, oldest first, paged by position: the connectors'
// sweep pages through them and must meet every one exactly once per round.

// nonFinalRows stores collections created at base plus a few minutes, some sharing a creation
// time, some final, one final only at its newer revision; it returns the ids ListNonFinal owes,
// in its order.
func nonFinalRows(t *testing.T, s collectionstatus.Store) []string {
	t.Helper()
	at := func(r collectionstatus.Row, minutes int) collectionstatus.Row {
		r.CreatedAt = base.Add(time.Duration(minutes) * time.Minute)
		return r
	}
	ending := at(row("n-f", "acme", "COLLECTING", 1), 4)
	upsert(t, s,
		// The same creation time: the id breaks the tie, whatever the order of the writes.
		at(row("n-b", "acme", "LOGIN", 1), 0),
		at(row("f-0", "acme", "COMPLETED", 3), 0),
		at(row("n-a", "acme", "RUNNING", 0), 0),
		at(row("n-c", "other", "COLLECTING", 2), 1),
		at(row("f-1", "acme", "FAILED", 2), 2),
		at(row("n-e", "acme", "WAITING_FOR_USER_ACTION", 2), 3),
		at(row("n-d", "acme", "RUNNING", 0), 3),
		ending,
		at(row("n-g", "acme", "CONTACT_FORM_PENDING", 2), 5),
		at(row("n-h", "globex", "RUNNING", 0), 6),
	)
	ended := ending
	ended.Status, ended.Revision = "FAILED", 2
	upsert(t, s, ended)
	return []string{"n-a", "n-b", "n-c", "n-d", "n-e", "n-g", "n-h"}
}

// listNonFinal is one page, as ids, and the position after its last row (nil after none).
func listNonFinal(t *testing.T, s collectionstatus.Store, after *collectionstatus.NonFinalPosition, limit int) ([]string, *collectionstatus.NonFinalPosition) {
	t.Helper()
	rows, err := s.ListNonFinal(ctx(t), after, limit)
	if err != nil {
		t.Fatalf("ListNonFinal(%v, %d): %v", after, limit, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	page := make([]string, len(rows))
	for i, r := range rows {
		page[i] = r.CollectionID
	}
	last := rows[len(rows)-1]
	return page, &collectionstatus.NonFinalPosition{CreatedAt: last.CreatedAt, CollectionID: last.CollectionID}
}

func testListNonFinalPages(t *testing.T, s collectionstatus.Store) {
	want := nonFinalRows(t, s)
	readdbtest.CheckPagedRound(t, want, func(after *collectionstatus.NonFinalPosition, limit int) ([]string, *collectionstatus.NonFinalPosition) {
		return listNonFinal(t, s, after, limit)
	})
}

func testListNonFinalAfterAPosition(t *testing.T, s collectionstatus.Store) {
	want := nonFinalRows(t, s)
	pos := func(minutes int, id string) *collectionstatus.NonFinalPosition {
		// At full precision, as a caller may hold it: the store compares at its ms precision.
		return &collectionstatus.NonFinalPosition{CreatedAt: base.Add(time.Duration(minutes) * time.Minute), CollectionID: id}
	}
	// Within a creation time, after the id; limit <= 0 is every one after the position.
	page, _ := listNonFinal(t, s, pos(0, "n-a"), 0)
	assertIDs(t, page, want[1:]...)
	page, _ = listNonFinal(t, s, pos(3, "n-d"), 2)
	assertIDs(t, page, "n-e", "n-g")
	// The position of a collection that ended since, or of a final one, still holds.
	page, _ = listNonFinal(t, s, pos(4, "n-f"), 0)
	assertIDs(t, page, "n-g", "n-h")
	page, _ = listNonFinal(t, s, pos(0, "f-0"), 3)
	assertIDs(t, page, "n-a", "n-b", "n-c")
	// After the newest: nothing, which is where the sweep starts again from the oldest.
	page, last := listNonFinal(t, s, pos(6, "n-h"), 3)
	if len(page) != 0 || last != nil {
		t.Fatalf("after the newest: %v", page)
	}
	// A collection started later than a position is listed after it.
	late := row("n-late", "acme", "RUNNING", 0)
	late.CreatedAt = base.Add(time.Hour)
	upsert(t, s, late)
	page, _ = listNonFinal(t, s, pos(6, "n-h"), 3)
	assertIDs(t, page, "n-late")
}
