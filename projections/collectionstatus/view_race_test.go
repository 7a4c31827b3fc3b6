package collectionstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb/readdbtest"
	"github.com/samla/samla/query"
)

// gateStore pauses a Get after it read the store, before the caller puts the row in the view.
type gateStore struct {
	Store
	read    chan struct{}
	release chan struct{}
	armed   bool
}

func (g *gateStore) Get(ctx context.Context, tenant, id string) (Row, error) {
	row, err := g.Store.Get(ctx, tenant, id)
	if g.armed {
		g.armed = false
		close(g.read)
		<-g.release
	}
	return row, err
}

func newSQLite(t *testing.T) Store {
	s, err := NewSQLite(context.Background(), readdbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rrow(id, status string, rev uint64) Row {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	return stored(Row{CollectionID: id, Tenant: "acme", Company: "se-demo-insurer", Product: "INSURANCE",
		UserUUID: "u-1", Status: status, CreatedAt: at, UpdatedAt: at.Add(time.Duration(rev) * time.Second), Revision: rev})
}

// A poll's fill that read the row before ErasePersonal must not put the unerased row (with its
// sealed personal part) back into the view after the erasure dropped it (found in review).
func TestFillRacingErasureKeepsNothing(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	durable := newSQLite(t)
	row := rrow("c-1", "WAITING_FOR_USER_ACTION", 2)
	plain, _ := json.Marshal(collection.StatusPersonal{QRStartSecret: "secret"})
	sealed, err := eventschema.Seal(ctx, keys, collection.DataSubject(row.CollectionID, row.UserUUID), plain)
	if err != nil {
		t.Fatal(err)
	}
	row.Personal = sealed
	if err := durable.Upsert(ctx, []Row{row}); err != nil {
		t.Fatal(err)
	}
	g := &gateStore{Store: durable, read: make(chan struct{}), release: make(chan struct{}), armed: true}
	view := NewView(100)
	s := Cached(g, view)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = s.Get(ctx, "acme", "c-1") }()
	<-g.read
	if err := s.ErasePersonal(ctx, "acme", "u-1"); err != nil { // projector handles user.deleted
		t.Fatal(err)
	}
	close(g.release)
	<-done
	reader := NewReader(s, keys)
	v, err := reader.Get(ctx, "acme", "c-1")
	if err != nil {
		t.Fatal(err)
	}
	if v.QRStartSecret != "" {
		t.Fatalf("after the erasure the view serves the QR secret %q", v.QRStartSecret)
	}
	if err := keys.Destroy(ctx, collection.DataSubject("c-1", "u-1")); err != nil {
		t.Fatal(err)
	}
	v, _ = reader.Get(ctx, "acme", "c-1")
	if v.QRStartSecret != "" {
		t.Fatalf("after the erasure and the key's destruction the view serves the QR secret %q", v.QRStartSecret)
	}
}

// sameShard returns another id that falls into id's shard.
func sameShard(v *View, id string) string {
	for i := 0; ; i++ {
		other := fmt.Sprintf("c-other-%d", i)
		if v.shard(other) == v.shard(id) {
			return other
		}
	}
}

// A fill that read revision R races the projector's write of R+1 and an eviction of that
// shard: the view must not end at R (served for good), nor may the projector fold the next
// event onto a stale row and write a regression into the durable read model (found in review).
func TestFillRacingEvictionNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	log := eventlog.New(t)
	keys := keystore.NewMemory()
	durable := newSQLite(t)
	view := NewView(0) // one row a shard: the bound, reached
	g := &gateStore{Store: durable, read: make(chan struct{}), release: make(chan struct{})}
	s := Cached(g, view)
	p := NewProjector(log.Registry(), s, keys)

	t0 := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	id := "c-1"
	stream := collection.StreamName(id)
	started := log.Append("acme", stream, t0, collection.Started{CollectionID: id, ClientID: "acme", Company: "se-demo-insurer",
		Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", StartedAt: t0})
	login := log.Append("acme", stream, t0.Add(time.Second), collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusLogin, ChangedAt: t0.Add(time.Second)})
	if err := p.Handle(ctx, []eventschema.Envelope{started, login}); err != nil {
		t.Fatal(err)
	}
	view.forget(id) // say a sweep or an eviction took it; the next poll fills
	g.armed = true
	done := make(chan struct{})
	go func() { defer close(done); _, _ = s.Get(ctx, "acme", id) }() // poll reads LOGIN/1
	<-g.read
	// The projector folds COLLECTING/2: durable and view at 2.
	collecting := log.Append("acme", stream, t0.Add(2*time.Second), collection.StatusChanged{From: collection.StatusLogin, To: collection.StatusCollecting, ChangedAt: t0.Add(2 * time.Second)})
	if err := p.Handle(ctx, []eventschema.Envelope{collecting}); err != nil {
		t.Fatal(err)
	}
	// Another collection of the same shard arrives (the view is at its bound): c-1 is evicted.
	other := sameShard(view, id)
	os := log.Append("acme", collection.StreamName(other), t0, collection.Started{CollectionID: other, ClientID: "acme", Company: "se-demo-insurer",
		Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", StartedAt: t0})
	if err := p.Handle(ctx, []eventschema.Envelope{os}); err != nil {
		t.Fatal(err)
	}
	close(g.release) // the poll's fill puts LOGIN/1
	<-done
	if got, _ := s.Get(ctx, "acme", id); got.Status != string(collection.StatusCollecting) || got.Revision != 2 {
		t.Fatalf("the view serves %s/%d, want COLLECTING/2", got.Status, got.Revision)
	}
	// Next event: a claim (not a status change) folds on the view's stale row.
	claimed := log.Append("acme", stream, t0.Add(3*time.Second), collection.Claimed{WorkerID: "w", ClaimedAt: t0.Add(3 * time.Second)})
	if err := p.Handle(ctx, []eventschema.Envelope{claimed}); err != nil {
		t.Fatal(err)
	}
	if d, _ := durable.Get(ctx, "acme", id); d.Status != string(collection.StatusCollecting) || d.Revision != 3 {
		t.Fatalf("after the next event the read model holds %s/%d, want COLLECTING/3", d.Status, d.Revision)
	}
}

type flakyKeys struct{ eventschema.Keys }

func (flakyKeys) Get(ctx context.Context, subject string) (eventschema.Key, error) {
	return eventschema.Key{}, fmt.Errorf("key store unavailable")
}

// Another tenant's poll of a collection the read model lacks is not found before anything of
// it is opened: a key-store fault must not tell an existing collection of another client (an
// error) from one that does not exist (404) (found in review).
func TestFallbackOpensNothingOfAnotherTenant(t *testing.T) {
	ctx := context.Background()
	log := eventlog.New(t)
	keys := keystore.NewMemory()
	t0 := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	id := "c-a"
	env := log.Append("tenant-a", collection.StreamName(id), t0, collection.Started{CollectionID: id, ClientID: "tenant-a", Company: "se-demo-insurer",
		Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", APIVersion: "2026-04-01", UserUUID: "u-a", StartedAt: t0,
		Personal: &collection.StartedPerson{PersonalNumber: "191212121212"}})
	sealed, _, err := eventschema.SealPersonal(ctx, keys, collection.DataSubject(id, "u-a"), env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	env.Payload = sealed
	src := func(ctx context.Context, cid string) ([]eventschema.Envelope, error) {
		if cid == id {
			return []eventschema.Envelope{env}, nil
		}
		return nil, nil
	}
	r := NewReader(newSQLite(t), flakyKeys{keys}).WithEventStore(log.Registry(), src)
	_, errExisting := r.Get(ctx, "tenant-b", id)
	_, errAbsent := r.Get(ctx, "tenant-b", "c-none")
	if !errors.Is(errExisting, query.ErrNotFound) || !errors.Is(errAbsent, query.ErrNotFound) {
		t.Fatalf("another tenant's collection: %v; a missing one: %v; want both not found", errExisting, errAbsent)
	}
	_, found1, e1 := r.CollectionUser(ctx, "tenant-b", id)
	_, found2, e2 := r.CollectionUser(ctx, "tenant-b", "c-none")
	if found1 || e1 != nil || found2 || e2 != nil {
		t.Fatalf("CollectionUser: another tenant's = (%v, %v); missing = (%v, %v); want both not found", found1, e1, found2, e2)
	}
}

// The key is destroyed (the erasure's last step, in the command role) while the status
// projection has not yet folded user.deleted: what the view opened is not served any more, as
// the read model's row opens as erased (found in review).
func TestOpenedPersonalEndsWithItsKey(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	durable := newSQLite(t)
	s := Cached(durable, NewView(100))
	row := rrow("c-1", "WAITING_FOR_USER_ACTION", 2)
	plain, _ := json.Marshal(collection.StatusPersonal{QRStartSecret: "secret"})
	row.Personal, _ = eventschema.Seal(ctx, keys, collection.DataSubject("c-1", "u-1"), plain)
	if err := s.Upsert(ctx, []Row{row}); err != nil {
		t.Fatal(err)
	}
	r := NewReader(s, keys)
	_, _ = r.Get(ctx, "acme", "c-1")
	_ = keys.Destroy(ctx, collection.DataSubject("c-1", "u-1"))
	v, _ := r.Get(ctx, "acme", "c-1")
	plainReader := NewReader(durable, keys)
	w, _ := plainReader.Get(ctx, "acme", "c-1")
	if v.QRStartSecret != "" || w.QRStartSecret != "" {
		t.Fatalf("after the key's destruction: the view's reader %q, the read model's %q; want nothing", v.QRStartSecret, w.QRStartSecret)
	}
}
