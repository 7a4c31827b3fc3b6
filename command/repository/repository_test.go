package repository_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

var meta = repository.Meta{Tenant: "acme", CorrelationID: "corr", CausationID: "cause", Actor: "operator"}

const key1 = "samla_acme_0123456789abcdef0123456789abcdef01"

// store is the in-memory event store with hooks: before runs ahead of every append, and reads
// and appends are counted.
type store struct {
	*memstore.Store
	before  func(ctx context.Context, stream string)
	reads   atomic.Int32
	appends atomic.Int32
}

func (s *store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventschema.Envelope) (eventstore.AppendResult, error) {
	s.appends.Add(1)
	if s.before != nil {
		s.before(ctx, stream)
	}
	return s.Store.Append(ctx, stream, expected, events)
}

func (s *store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventschema.Envelope, error) {
	s.reads.Add(1)
	return s.Store.ReadStream(ctx, stream, from, limit)
}

func newRepo(t *testing.T, opts ...repository.Option) (*repository.Repository[*client.Client], *store) {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := &store{Store: memstore.New()}
	return repository.New(s, reg, client.Kind, append([]repository.Option{repository.WithClock(func() time.Time { return t0 })}, opts...)...), s
}

func register(c *client.Client) error { return c.Register("acme", "Acme", false, t0) }

// registered is a repository with client acme registered, its reads counted from zero, and the
// aggregate its registration returned.
func registered(t *testing.T) (*repository.Repository[*client.Client], *store, *client.Client) {
	t.Helper()
	repo, s := newRepo(t)
	c, _, err := repo.Update(context.Background(), "acme", meta, register)
	if err != nil {
		t.Fatal(err)
	}
	s.reads.Store(0)
	return repo, s, c
}

func TestUpdateAppendsWhatTheAggregateRecorded(t *testing.T) {
	repo, s := newRepo(t)
	ctx := context.Background()
	c, res, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error {
		if err := register(c); err != nil {
			return err
		}
		return c.IssueAPIKey("k1", key1, t0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Version() != 2 || c.StoredVersion() != 2 || len(c.Recorded()) != 0 || c.Name() != "Acme" {
		t.Fatalf("returned aggregate: version %d, stored %d, recorded %v", c.Version(), c.StoredVersion(), c.Recorded())
	}
	envs := s.Events(client.StreamName("acme"))
	if len(envs) != 2 || s.Appends() != 1 || res.NextExpectedRevision != 1 || res.Position != envs[1].Position {
		t.Fatalf("stored %d events in %d appends, result %+v", len(envs), s.Appends(), res)
	}
	for _, env := range envs {
		if env.Tenant != "acme" || env.CorrelationID != "corr" || env.CausationID != "cause" || env.Actor != "operator" || !env.OccurredAt.Equal(t0) {
			t.Fatalf("envelope %+v", env)
		}
	}
	loaded, err := repo.Load(ctx, "acme")
	if err != nil || loaded.Version() != 2 || len(loaded.ActiveKeyHashes()) != 1 || len(loaded.Recorded()) != 0 {
		t.Fatalf("loaded %+v, %v", loaded, err)
	}
}

func TestUpdateThatRecordsNothingAppendsNothing(t *testing.T) {
	repo, s := newRepo(t)
	ctx := context.Background()
	if _, _, err := repo.Update(ctx, "acme", meta, register); err != nil {
		t.Fatal(err)
	}
	c, res, err := repo.Update(ctx, "acme", meta, func(*client.Client) error { return nil })
	if err != nil || res != (eventstore.AppendResult{}) || c.Version() != 1 || s.Appends() != 1 {
		t.Fatalf("version %d, result %+v, appends %d, err %v", c.Version(), res, s.Appends(), err)
	}
}

func TestUpdateRefusedAppendsNothing(t *testing.T) {
	repo, s := newRepo(t)
	ctx := context.Background()
	if _, _, err := repo.Update(ctx, "acme", meta, register); err != nil {
		t.Fatal(err)
	}
	c, _, err := repo.Update(ctx, "acme", meta, register)
	if !errors.Is(err, domain.ErrConflict) || c == nil || c.Version() != 1 || s.Appends() != 1 {
		t.Fatalf("second registration: %v, appends %d", err, s.Appends())
	}
	_, _, err = repo.Update(ctx, "acme", meta, func(c *client.Client) error { return c.IssueAPIKey("k1", "short", t0) })
	var fe *domain.FieldError
	if !errors.As(err, &fe) || fe.Field != "apiKey" || s.Appends() != 1 {
		t.Fatalf("short key: %v, appends %d", err, s.Appends())
	}
}

// raceAppends makes another writer issue a key to the stream before each of the next n appends,
// as a concurrent request would between this one's load and its append.
func raceAppends(t *testing.T, s *store, n int32) {
	var races atomic.Int32
	races.Store(n)
	var issued atomic.Int32
	inner := repository.New(s.Store, mustRegistry(t), client.Kind)
	s.before = func(ctx context.Context, stream string) {
		if races.Add(-1) < 0 {
			return
		}
		id := strings.TrimPrefix(stream, client.StreamPrefix)
		k := issued.Add(1)
		if _, _, err := inner.Update(ctx, id, meta, func(c *client.Client) error {
			return c.IssueAPIKey("other-"+string(rune('a'+k)), strings.Repeat("x", 32)+string(rune('a'+k)), t0)
		}); err != nil {
			t.Errorf("racing writer: %v", err)
		}
	}
}

func mustRegistry(t *testing.T) *eventschema.Registry {
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestUpdateDecidesAgainOnConflict(t *testing.T) {
	repo, s := newRepo(t)
	ctx := context.Background()
	if _, _, err := repo.Update(ctx, "acme", meta, register); err != nil {
		t.Fatal(err)
	}
	raceAppends(t, s, 2)
	s.appends.Store(0)
	var decisions int
	c, _, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error {
		decisions++
		return c.IssueAPIKey("k1", key1, t0)
	})
	if err != nil {
		t.Fatalf("after two conflicts: %v", err)
	}
	// Each round decided on the state the racing writer left: its keys are there too.
	if decisions != 3 || s.appends.Load() != 3 || len(c.ActiveKeyHashes()) != 3 || c.Version() != 4 {
		t.Fatalf("decisions %d, appends %d, keys %d, version %d", decisions, s.appends.Load(), len(c.ActiveKeyHashes()), c.Version())
	}
}

func TestUpdateGivesUpOnEndlessConflicts(t *testing.T) {
	repo, s := newRepo(t, repository.WithMaxAttempts(3))
	ctx := context.Background()
	if _, _, err := repo.Update(ctx, "acme", meta, register); err != nil {
		t.Fatal(err)
	}
	raceAppends(t, s, 1000)
	s.appends.Store(0)
	_, _, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error { return c.IssueAPIKey("k1", key1, t0) })
	if !errors.Is(err, eventstore.ErrWrongExpectedRevision) || s.appends.Load() != 3 {
		t.Fatalf("endless conflicts: %v after %d appends", err, s.appends.Load())
	}
}

func TestUpdateOfANewIDReadsNothing(t *testing.T) {
	repo, s := newRepo(t)
	ctx := context.Background()
	if _, _, err := repo.Update(ctx, "acme", meta, register, repository.NewID()); err != nil {
		t.Fatal(err)
	}
	if s.reads.Load() != 0 || len(s.Events(client.StreamName("acme"))) != 1 {
		t.Fatalf("reads %d, events %d", s.reads.Load(), len(s.Events(client.StreamName("acme"))))
	}
	// An id that was not new after all: the no-stream append conflicts, and the next round loads
	// the stream and decides on what is there.
	var sawExisting bool
	_, _, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error {
		sawExisting = c.Exists()
		return register(c)
	}, repository.NewID())
	if !errors.Is(err, domain.ErrConflict) || !sawExisting || s.reads.Load() != 1 {
		t.Fatalf("second registration of a \"new\" id: %v, saw existing %v, reads %d", err, sawExisting, s.reads.Load())
	}
}

func TestUpdateFromAKnownAggregateReadsNothing(t *testing.T) {
	repo, s, c := registered(t)
	ctx := context.Background()
	c, _, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error { return c.IssueAPIKey("k1", key1, t0) }, repository.From(c))
	if err != nil {
		t.Fatal(err)
	}
	if s.reads.Load() != 0 || c.Version() != 2 || len(s.Events(client.StreamName("acme"))) != 2 {
		t.Fatalf("reads %d, version %d, events %d", s.reads.Load(), c.Version(), len(s.Events(client.StreamName("acme"))))
	}

	// Someone else appended after c was returned: the append from the stale aggregate
	// conflicts, and the next round decides on the stream as stored.
	if _, _, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error {
		return c.IssueAPIKey("k2", strings.Repeat("y", 44), t0)
	}); err != nil {
		t.Fatal(err)
	}
	s.reads.Store(0)
	var keys []int
	c, _, err = repo.Update(ctx, "acme", meta, func(c *client.Client) error {
		keys = append(keys, len(c.ActiveKeyHashes()))
		return c.IssueAPIKey("k3", strings.Repeat("z", 44), t0)
	}, repository.From(c))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0] != 1 || keys[1] != 2 || s.reads.Load() != 1 || c.Version() != 4 {
		t.Fatalf("keys seen per round %v, reads %d, version %d", keys, s.reads.Load(), c.Version())
	}

	// An aggregate a refused decide left with recorded events is not decided on again.
	bad, _, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error {
		if err := c.IssueAPIKey("k4", strings.Repeat("w", 44), t0); err != nil {
			return err
		}
		return errors.New("refused after recording")
	}, repository.From(c))
	if err == nil || len(bad.Recorded()) != 1 {
		t.Fatalf("refused decide: %v, recorded %d", err, len(bad.Recorded()))
	}
	s.reads.Store(0)
	if _, _, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error { return nil }, repository.From(bad)); err != nil || s.reads.Load() != 1 {
		t.Fatalf("update from a dirty aggregate: %v, reads %d", err, s.reads.Load())
	}
}

func TestUpdateKeepsAnAppendItStartedWhenTheCallerGoesAway(t *testing.T) {
	t.Run("cancelled right before the append", func(t *testing.T) {
		repo, s := newRepo(t)
		ctx, cancel := context.WithCancel(context.Background())
		_, _, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error {
			cancel() // the client disconnects once the decision is made
			return register(c)
		})
		if err != nil || len(s.Events(client.StreamName("acme"))) != 1 {
			t.Fatalf("err %v, events %d", err, len(s.Events(client.StreamName("acme"))))
		}
	})
	t.Run("cancelled while appending", func(t *testing.T) {
		repo, s := newRepo(t)
		ctx, cancel := context.WithCancel(context.Background())
		s.before = func(context.Context, string) { cancel() }
		_, _, err := repo.Update(ctx, "acme", meta, register)
		if err != nil || len(s.Events(client.StreamName("acme"))) != 1 {
			t.Fatalf("err %v, events %d", err, len(s.Events(client.StreamName("acme"))))
		}
	})
	t.Run("a load after a cancellation stops", func(t *testing.T) {
		repo, s := newRepo(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := repo.Update(ctx, "acme", meta, register); !errors.Is(err, context.Canceled) || s.appends.Load() != 0 {
			t.Fatalf("err %v, appends %d", err, s.appends.Load())
		}
	})
}

// hangingStore never answers an append until its context ends.
type hangingStore struct{ *memstore.Store }

func (hangingStore) Append(ctx context.Context, _ string, _ eventstore.ExpectedRevision, _ []eventschema.Envelope) (eventstore.AppendResult, error) {
	<-ctx.Done()
	return eventstore.AppendResult{}, ctx.Err()
}

func TestUpdateBoundsAHangingAppend(t *testing.T) {
	repo := repository.New(hangingStore{memstore.New()}, mustRegistry(t), client.Kind, repository.WithAppendTimeout(time.Millisecond))
	_, _, err := repo.Update(context.Background(), "acme", meta, register)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the append timeout", err)
	}
}

// Refresh keeps an aggregate whose stream has not moved (one read of at most two events, no
// decoding), and loads the stream again once someone appended to it, or when the aggregate has
// recorded events not yet stored.
func TestRefreshReadsTheStreamOnlyWhenItMoved(t *testing.T) {
	repo, s, c := registered(t)
	ctx := context.Background()
	if got, err := repo.Refresh(ctx, "acme", c); err != nil || got != c || s.reads.Load() != 1 {
		t.Fatalf("refresh of a current aggregate = %p, %v after %d reads; want the same aggregate after one", got, err, s.reads.Load())
	}

	// Someone else appended: the kept aggregate is stale.
	if _, _, err := repo.Update(ctx, "acme", meta, func(c *client.Client) error {
		return c.IssueAPIKey("k1", key1, t0)
	}); err != nil {
		t.Fatal(err)
	}
	fresh, err := repo.Refresh(ctx, "acme", c)
	if err != nil || fresh == c || fresh.Version() != 2 || len(fresh.ActiveKeyHashes()) != 1 {
		t.Fatalf("refresh after another append = version %d, %v; want the stream loaded anew (version 2)", fresh.Version(), err)
	}

	// An aggregate with recorded events not yet stored is loaded anew.
	if err := fresh.IssueAPIKey("k2", strings.Repeat("y", 44), t0); err != nil {
		t.Fatal(err)
	}
	again, err := repo.Refresh(ctx, "acme", fresh)
	if err != nil || again == fresh || again.Version() != 2 || len(again.Recorded()) != 0 {
		t.Fatalf("refresh of a dirty aggregate = version %d, %d recorded, %v; want the stored one", again.Version(), len(again.Recorded()), err)
	}
}
