package cancellationstest

import (
	"testing"
	"time"

	"github.com/samla/samla/projections/cancellations"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// The contract of the cancellations that still need the signing provider, oldest first, paged
// by position: the connectors' sweep pages through them and must meet every one exactly once per
// round.

// needingProviderRows stores cancellations requested at base plus a few minutes, some at the same
// time, some that no longer need the provider (final, or CLOSED with the sealed PDF recorded),
// one sealed and one ended only at a newer revision; it returns the ids ListNeedingProvider owes,
// in its order.
func needingProviderRows(t *testing.T, s cancellations.Store) []string {
	t.Helper()
	sealedRow := func(r cancellations.Row) cancellations.Row {
		r.IsSignedAndSealed = true
		return r
	}
	upsert(t, s,
		// The same request time: the id breaks the tie, whatever the order of the writes.
		row("k-b", "acme", col1, u1, "PENDING", 0, 2),
		row("f-0", "acme", col1, u1, "CANCELED", 0, 1),
		row("k-a", "acme", col1, u1, "PREPARATION", 0, 0),
		row("k-c", "globex", col2, u2, "CLOSED", 1, 3),
		sealedRow(row("f-1", "acme", col1, u1, "CLOSED", 2, 4)),
		row("k-e", "acme", col2, u1, "PENDING", 3, 2),
		row("k-d", "acme", col1, "", "PREPARATION", 3, 0),
		row("k-f", "acme", col1, u1, "CLOSED", 4, 3),
		row("f-2", "acme", col1, u1, "TIMED_OUT", 4, 3),
		row("k-h", "acme", col1, u1, "PENDING", 5, 2),
		row("k-g", "acme", col1, u2, "PENDING", 5, 2),
		row("k-i", "initech", col1, u1, "PENDING", 6, 2),
	)
	// Newer revisions: the sealed PDF recorded, a pending one timed out. The old versions must
	// not surface, whatever versions a store keeps.
	upsert(t, s, sealedRow(row("k-f", "acme", col1, u1, "CLOSED", 4, 4)), row("k-h", "acme", col1, u1, "TIMED_OUT", 5, 3))
	return []string{"k-a", "k-b", "k-c", "k-d", "k-e", "k-g", "k-i"}
}

// listNeedingProvider is one page, as ids, and the position after its last row (nil after none).
func listNeedingProvider(t *testing.T, s cancellations.Store, after *cancellations.Position, limit int) ([]string, *cancellations.Position) {
	t.Helper()
	rows, err := s.ListNeedingProvider(ctx(t), after, limit)
	if err != nil {
		t.Fatalf("ListNeedingProvider(%v, %d): %v", after, limit, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	last := rows[len(rows)-1]
	return ids(rows), &cancellations.Position{RequestedAt: last.RequestedAt, DocumentID: last.DocumentID}
}

// testListNeedingProviderPages: paging from no position to the first short page, as the
// connectors' sweep reads a round, meets every cancellation that needs the provider exactly
// once, in order, for every page size.
func testListNeedingProviderPages(t *testing.T, s cancellations.Store) {
	want := needingProviderRows(t, s)
	readdbtest.CheckPagedRound(t, want, func(after *cancellations.Position, limit int) ([]string, *cancellations.Position) {
		return listNeedingProvider(t, s, after, limit)
	})
}

func testListNeedingProviderAfterAPosition(t *testing.T, s cancellations.Store) {
	want := needingProviderRows(t, s)
	pos := func(minute int, id string) *cancellations.Position {
		// At full precision, as a caller may hold it: the store compares at its ms precision.
		return &cancellations.Position{RequestedAt: base.Add(time.Duration(minute) * time.Minute), DocumentID: id}
	}
	// Within a request time, after the id; limit <= 0 is every one after the position.
	page, _ := listNeedingProvider(t, s, pos(0, "k-a"), 0)
	assertIDs(t, page, want[1:]...)
	page, _ = listNeedingProvider(t, s, pos(3, "k-d"), 2)
	assertIDs(t, page, "k-e", "k-g")
	// The position of a cancellation that was sealed or ended since, or of a final one, still
	// holds.
	page, _ = listNeedingProvider(t, s, pos(4, "k-f"), 0)
	assertIDs(t, page, "k-g", "k-i")
	page, _ = listNeedingProvider(t, s, pos(5, "k-h"), 0)
	assertIDs(t, page, "k-i")
	page, _ = listNeedingProvider(t, s, pos(0, "f-0"), 3)
	assertIDs(t, page, "k-a", "k-b", "k-c")
	// After the newest: nothing, which is where the sweep starts again from the oldest.
	page, last := listNeedingProvider(t, s, pos(6, "k-i"), 3)
	if len(page) != 0 || last != nil {
		t.Fatalf("after the newest: %v", page)
	}
	// A cancellation requested later than a position is listed after it.
	upsert(t, s, row("k-late", "acme", col1, u1, "PREPARATION", 60, 0))
	page, _ = listNeedingProvider(t, s, pos(6, "k-i"), 3)
	assertIDs(t, page, "k-late")
}
