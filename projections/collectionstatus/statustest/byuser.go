package statustest

import (
	"reflect"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/query"
)

// The contract of a user's collections, newest first, paged by position.

const (
	listedUser = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	otherUser  = "6f1c2a9e-3b4d-4e5f-8a7b-000000000000"
)

// userRow is a collection of a user, created at base plus minute minutes.
func userRow(id, tenant, userUUID string, minute int, rev uint64) collectionstatus.Row {
	at := base.Add(time.Duration(minute) * time.Minute)
	return collectionstatus.Row{
		CollectionID: id, Tenant: tenant, Company: "se-demo-insurer", Product: "INSURANCE",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", APIVersion: "2026-04-01", UserUUID: userUUID,
		Status: "RUNNING", CreatedAt: at, UpdatedAt: at, Revision: rev,
	}
}

func listByUser(t *testing.T, s collectionstatus.Store, tenant, userUUID string, after *collectionstatus.UserPosition, limit int) []string {
	t.Helper()
	rows, err := s.ListByUser(ctx(t), tenant, userUUID, after, limit)
	if err != nil {
		t.Fatalf("ListByUser: %v", err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.CollectionID
	}
	return ids
}

func assertIDs(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

func testListByUser(t *testing.T, s collectionstatus.Store) {
	upsert(t, s,
		userRow("c-1", "acme", listedUser, 1, 0),
		userRow("c-3", "acme", listedUser, 3, 0),
		userRow("c-2", "acme", listedUser, 2, 0),
		userRow("c-2b", "acme", listedUser, 2, 0),  // the same ms as c-2: the id breaks the tie
		userRow("c-x", "acme", otherUser, 4, 0),    // another user's
		userRow("c-y", "globex", listedUser, 5, 0), // the same user id under another client
		userRow("c-z", "acme", "", 6, 0),           // no user
	)
	assertIDs(t, listByUser(t, s, "acme", listedUser, nil, 10), "c-3", "c-2b", "c-2", "c-1")
	assertIDs(t, listByUser(t, s, "globex", listedUser, nil, 10), "c-y")
	assertIDs(t, listByUser(t, s, "acme", "", nil, 10))
	assertIDs(t, listByUser(t, s, "initech", listedUser, nil, 10))
	assertIDs(t, listByUser(t, s, "acme", listedUser, nil, 0))

	// The row is the current one, in full.
	upsert(t, s, func() collectionstatus.Row {
		r := userRow("c-3", "acme", listedUser, 3, 1)
		r.Status, r.UpdatedAt = "COMPLETED", base.Add(time.Hour)
		return r
	}())
	rows, err := s.ListByUser(ctx(t), "acme", listedUser, nil, 1)
	if err != nil || len(rows) != 1 {
		t.Fatalf("ListByUser = %v, %v", rows, err)
	}
	want := userRow("c-3", "acme", listedUser, 3, 1)
	want.Status, want.UpdatedAt = "COMPLETED", base.Add(time.Hour)
	assertRow(t, rows[0], stored(want))
}

func testListByUserPages(t *testing.T, s collectionstatus.Store) {
	var all []collectionstatus.Row
	for i := range 7 {
		all = append(all, userRow("c-"+string(rune('a'+i)), "acme", listedUser, i/2, 0)) // pairs share a ms
	}
	upsert(t, s, all...)
	var got []string
	var after *collectionstatus.UserPosition
	for page := 0; ; page++ {
		rows, err := s.ListByUser(ctx(t), "acme", listedUser, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if page == 0 {
			// A collection created after the first page was read never shows on later pages.
			upsert(t, s, userRow("c-new", "acme", listedUser, 60, 0))
		}
		for _, r := range rows {
			got = append(got, r.CollectionID)
		}
		if len(rows) < 3 {
			break
		}
		last := rows[len(rows)-1]
		after = &collectionstatus.UserPosition{CreatedAt: last.CreatedAt, CollectionID: last.CollectionID}
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	assertIDs(t, got, "c-g", "c-f", "c-e", "c-d", "c-c", "c-b", "c-a")
}

func testProjectorListByUser(t *testing.T, s collectionstatus.Store) {
	f := newListFixture(t, s)
	f.start("c-1", listedUser, base)
	f.start("c-2", listedUser, base.Add(time.Minute))
	f.start("c-3", "", base.Add(2*time.Minute))
	assertIDs(t, listByUser(t, s, "acme", listedUser, nil, 10), "c-2", "c-1")
}

func testReaderListByUser(t *testing.T, s collectionstatus.Store) {
	upsert(t, s, userRow("c-1", "acme", listedUser, 1, 0), userRow("c-2", "acme", listedUser, 2, 0))
	r := collectionstatus.NewReader(s, suiteKeys)
	page, err := r.ListByUser(ctx(t), "acme", listedUser, nil, 1)
	if err != nil || len(page) != 1 {
		t.Fatalf("first page %v, %v", page, err)
	}
	at := base.Add(2 * time.Minute).Truncate(time.Millisecond)
	want := query.CollectionSummary{CollectionID: "c-2", Company: "se-demo-insurer", Product: "INSURANCE",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", Status: "RUNNING", CreatedAt: at, UpdatedAt: at}
	if !reflect.DeepEqual(page[0], want) {
		t.Fatalf("summary %+v, want %+v", page[0], want)
	}
	next, err := r.ListByUser(ctx(t), "acme", listedUser, &query.CollectionCursor{CreatedAt: page[0].CreatedAt, CollectionID: "c-2"}, 10)
	if err != nil || len(next) != 1 || next[0].CollectionID != "c-1" {
		t.Fatalf("second page %v, %v", next, err)
	}
	if none, err := r.ListByUser(ctx(t), "globex", listedUser, nil, 10); err != nil || len(none) != 0 {
		t.Fatalf("another tenant: %v, %v", none, err)
	}
}

// listFixture starts collections through the projector, as the command side records them.
type listFixture struct {
	t   *testing.T
	log *eventlog.Log
	p   *collectionstatus.Projector
}

func newListFixture(t *testing.T, s collectionstatus.Store) listFixture {
	log := eventlog.New(t)
	return listFixture{t: t, log: log, p: collectionstatus.NewProjector(log.Registry(), s, suiteKeys)}
}

func (f listFixture) start(id, userUUID string, at time.Time) {
	f.t.Helper()
	env := f.log.Append("acme", collection.StreamName(id), at, collection.Started{CollectionID: id, ClientID: "acme",
		Company: "se-demo-insurer", Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
		APIVersion: "2026-04-01", UserUUID: userUUID, StartedAt: at})
	if err := f.p.Handle(ctx(f.t), []eventschema.Envelope{env}); err != nil {
		f.t.Fatalf("Handle: %v", err)
	}
}
