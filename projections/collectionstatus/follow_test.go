package collectionstatus_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/collectionstatus/statustest"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// A follower's store with no freshness grace passes the whole contract.
func TestFollowedSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, func(ctx context.Context, db *sql.DB) (collectionstatus.Store, error) {
		s, err := collectionstatus.NewSQLite(ctx, db)
		if err != nil {
			return nil, err
		}
		return collectionstatus.Followed(s, collectionstatus.NewView(1000), 0, 0), nil
	}, statustest.Run)
}

// followScene is a query process's view: the read model (written by "another process", the
// projector over durable), the view in front of it, and the follower of the event stream.
type followScene struct {
	t        *testing.T
	log      *eventlog.Log
	durable  *countingStore
	project  *collectionstatus.Projector
	followed collectionstatus.Store
	follower *collectionstatus.Follower
	t0       time.Time
}

func newFollowScene(t *testing.T) *followScene {
	log := eventlog.New(t)
	keys := keystore.NewMemory()
	durable := &countingStore{Store: sqliteStore(t)}
	view := collectionstatus.NewView(1000)
	return &followScene{t: t, log: log, durable: durable,
		project:  collectionstatus.NewProjector(log.Registry(), durable.Store, keys),
		followed: collectionstatus.Followed(durable, view, time.Hour, time.Hour),
		follower: collectionstatus.NewFollower(log.Registry(), view, keys),
		t0:       time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)}
}

func (s *followScene) poll(id string) collectionstatus.Row {
	s.t.Helper()
	row, err := s.followed.Get(context.Background(), "acme", id)
	if err != nil {
		s.t.Fatalf("poll %s: %v", id, err)
	}
	return row
}

func (s *followScene) started(id string) collection.Started {
	return collection.Started{CollectionID: id, ClientID: "acme", Company: "se-demo-insurer",
		Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01",
		UserUUID: "u-1", StartedAt: s.t0}
}

func changed(from, to collection.Status, at time.Time) collection.StatusChanged {
	return collection.StatusChanged{From: from, To: to, ChangedAt: at}
}

// The follower takes a row the view holds from revision to revision: polls then never reach the
// read model, which lags behind; a row it did not hold is read from the read model on the first
// poll; a gap drops the row, read again on the next poll; a deleted user's rows are dropped.
func TestFollowerKeepsTheViewCurrent(t *testing.T) {
	ctx := context.Background()
	s := newFollowScene(t)
	stream := collection.StreamName("c-1")
	var drops []string
	s.follower.OnDrop(func(reason string) { drops = append(drops, reason) })
	started := s.log.Append("acme", stream, s.t0, s.started("c-1"))
	if err := s.project.Handle(ctx, []eventschema.Envelope{started}); err != nil {
		t.Fatal(err)
	}
	if got := s.poll("c-1"); got.Status != "RUNNING" || s.durable.gets.Load() != 1 {
		t.Fatalf("first poll = %s after %d reads, want RUNNING from the read model", got.Status, s.durable.gets.Load())
	}
	login := s.log.Append("acme", stream, s.t0.Add(time.Second), changed(collection.StatusRunning, collection.StatusLogin, s.t0.Add(time.Second)))
	// The follower sees it first; the read model (another process) has not yet.
	if err := s.follower.Handle(ctx, []eventschema.Envelope{login}); err != nil {
		t.Fatal(err)
	}
	if got := s.poll("c-1"); got.Status != "LOGIN" || got.Revision != 1 || s.durable.gets.Load() != 1 {
		t.Fatalf("poll after the follower = %s/%d after %d reads, want LOGIN/1 from memory", got.Status, got.Revision, s.durable.gets.Load())
	}
	// Events of collections the view does not hold are left to their first poll.
	other := s.log.Append("acme", collection.StreamName("c-2"), s.t0, s.started("c-2"))
	if err := s.follower.Handle(ctx, []eventschema.Envelope{other}); err != nil {
		t.Fatal(err)
	}
	// A gap: the follower missed revision 2, so revision 3 cannot be folded; the row is read again.
	waiting := s.log.Append("acme", stream, s.t0.Add(2*time.Second), changed(collection.StatusLogin, collection.StatusWaitingForUserAction, s.t0.Add(2*time.Second)))
	collecting := s.log.Append("acme", stream, s.t0.Add(3*time.Second), changed(collection.StatusWaitingForUserAction, collection.StatusCollecting, s.t0.Add(3*time.Second)))
	if err := s.project.Handle(ctx, []eventschema.Envelope{login, waiting, collecting}); err != nil {
		t.Fatal(err)
	}
	if err := s.follower.Handle(ctx, []eventschema.Envelope{collecting}); err != nil {
		t.Fatal(err)
	}
	if got := s.poll("c-1"); got.Status != "COLLECTING" || got.Revision != 3 || s.durable.gets.Load() != 2 {
		t.Fatalf("poll after a gap = %s/%d after %d reads, want COLLECTING/3 read again", got.Status, got.Revision, s.durable.gets.Load())
	}
	if !slices.Equal(drops, []string{collectionstatus.DropGap}) {
		t.Fatalf("drops told = %v, want the one gap", drops)
	}
	// A deleted user's rows leave the view.
	deleted := s.log.Append("acme", user.StreamName("u-1"), s.t0.Add(4*time.Second), user.Deleted{DeletedAt: s.t0.Add(4 * time.Second)})
	if err := s.follower.Handle(ctx, []eventschema.Envelope{deleted}); err != nil {
		t.Fatal(err)
	}
	s.poll("c-1")
	if n := s.durable.gets.Load(); n != 3 {
		t.Fatalf("%d reads after the user's deletion, want the row read again (3)", n)
	}
}

// An event the follower cannot fold onto the row it holds (here one that does not decode) drops
// the row and says so; the next poll reads it from the read model again.
func TestFollowerDropsARowItCannotFold(t *testing.T) {
	ctx := context.Background()
	s := newFollowScene(t)
	stream := collection.StreamName("c-1")
	var drops []string
	s.follower.OnDrop(func(reason string) { drops = append(drops, reason) })
	started := s.log.Append("acme", stream, s.t0, s.started("c-1"))
	if err := s.project.Handle(ctx, []eventschema.Envelope{started}); err != nil {
		t.Fatal(err)
	}
	s.poll("c-1")
	broken := s.log.Append("acme", stream, s.t0.Add(time.Second), changed(collection.StatusRunning, collection.StatusLogin, s.t0.Add(time.Second)))
	broken.Payload = json.RawMessage(`{"to":42}`)
	if err := s.follower.Handle(ctx, []eventschema.Envelope{broken}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(drops, []string{collectionstatus.DropUnfoldable}) {
		t.Fatalf("drops told = %v, want the one unfoldable", drops)
	}
	before := s.durable.gets.Load()
	if got := s.poll("c-1"); got.Status != "RUNNING" || s.durable.gets.Load() != before+1 {
		t.Fatalf("poll after the drop = %s after %d more reads, want RUNNING read again", got.Status, s.durable.gets.Load()-before)
	}
}

// A row read from the read model that no event has confirmed is served for the freshness bound
// only: the follower may have passed its next events before it held the row.
func TestFollowedReadsUnconfirmedRowsAgain(t *testing.T) {
	ctx := context.Background()
	s := newFollowScene(t)
	s.followed = collectionstatus.Followed(s.durable, collectionstatus.NewView(1000), 0, time.Hour)
	stream := collection.StreamName("c-1")
	started := s.log.Append("acme", stream, s.t0, s.started("c-1"))
	if err := s.project.Handle(ctx, []eventschema.Envelope{started}); err != nil {
		t.Fatal(err)
	}
	s.poll("c-1")
	login := s.log.Append("acme", stream, s.t0.Add(time.Second), changed(collection.StatusRunning, collection.StatusLogin, s.t0.Add(time.Second)))
	if err := s.project.Handle(ctx, []eventschema.Envelope{login}); err != nil {
		t.Fatal(err)
	}
	if got := s.poll("c-1"); got.Status != "LOGIN" {
		t.Fatalf("unconfirmed row past its freshness = %s, want LOGIN read again", got.Status)
	}
	// A final row no longer changes what the poll shows: served from memory.
	done := s.log.Append("acme", stream, s.t0.Add(2*time.Second), changed(collection.StatusLogin, collection.StatusCompleted, s.t0.Add(2*time.Second)))
	if err := s.project.Handle(ctx, []eventschema.Envelope{done}); err != nil {
		t.Fatal(err)
	}
	s.poll("c-1")
	before := s.durable.gets.Load()
	for i := 0; i < 5; i++ {
		if got := s.poll("c-1"); got.Status != "COMPLETED" {
			t.Fatalf("final row = %s", got.Status)
		}
	}
	if n := s.durable.gets.Load(); n != before {
		t.Fatalf("%d reads of a final row, want none", n-before)
	}
}
