package sqlitekeys_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/platform/keystore/keystoretest"
	"github.com/samla/samla/platform/keystore/sqlitekeys"
)

func open(t *testing.T, path string) *sqlitekeys.Store {
	t.Helper()
	s, err := sqlitekeys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	keystoretest.Run(t, func(t *testing.T) keystoretest.Store {
		return open(t, filepath.Join(t.TempDir(), "keys.db"))
	})
}

// TestKeysSurviveAReopenAndDestroyedBytesAreGone: keys are durable, and a destroyed key's bytes
// are found nowhere in the key store's files (secure_delete, and the log checkpointed).
func TestKeysSurviveAReopenAndDestroyedBytesAreGone(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.db")
	s := open(t, path)
	kept, err := s.GetOrCreate(ctx, "user-kept")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.GetOrCreate(ctx, "user-gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Destroy(ctx, "user-gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, gone.Material()) {
			t.Fatalf("%s still holds the destroyed key's bytes", f)
		}
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key store file mode %v, %v", info.Mode(), err)
	}
	again := open(t, path)
	got, err := again.Get(ctx, "user-kept")
	if err != nil || got.ID() != kept.ID() || !bytes.Equal(got.Material(), kept.Material()) {
		t.Fatalf("after reopening: %v, %v", got, err)
	}
	if _, err := again.GetOrCreate(ctx, "user-gone"); !errors.Is(err, eventschema.ErrSubjectErased) {
		t.Fatalf("tombstone after reopening: %v", err)
	}
	live, erased, err := again.Count(ctx)
	if err != nil || live != 1 || erased != 1 {
		t.Fatalf("count = %d live, %d erased, %v", live, erased, err)
	}
}

func TestConcurrentCreatorsInTwoProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.db")
	a, b := open(t, path), open(t, path)
	ka, err := a.GetOrCreate(ctx, "user-1")
	if err != nil {
		t.Fatal(err)
	}
	kb, err := b.GetOrCreate(ctx, "user-1")
	if err != nil || kb.ID() != ka.ID() {
		t.Fatalf("second store got %v, %v; want %v", kb, err, ka)
	}
}

// TestConcurrentCreatorsOfManySubjectsAllGetDurableKeys: the group-committed inserts of many
// concurrent creators are all there after a reopen, each under its own subject.
func TestConcurrentCreatorsOfManySubjectsAllGetDurableKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.db")
	s := open(t, path)
	const n = 200
	keys := make([]eventschema.Key, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = s.GetOrCreate(ctx, fmt.Sprintf("collection-%d", i))
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := open(t, path)
	ids := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("subject %d: %v", i, errs[i])
		}
		got, err := again.Get(ctx, fmt.Sprintf("collection-%d", i))
		if err != nil || got.ID() != keys[i].ID() || !bytes.Equal(got.Material(), keys[i].Material()) {
			t.Fatalf("subject %d after reopening: %v, %v; want %v", i, got, err, keys[i])
		}
		ids[got.ID()] = true
	}
	if len(ids) != n {
		t.Fatalf("%d distinct keys for %d subjects", len(ids), n)
	}
}

// BenchmarkGetOrCreateNewSubjects measures creating a key per new subject from many goroutines,
// as POST /collections does for a collection that names no user: the inserts share commits.
func BenchmarkGetOrCreateNewSubjects(b *testing.B) {
	ctx := context.Background()
	s, err := sqlitekeys.Open(filepath.Join(b.TempDir(), "keys.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var next atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.GetOrCreate(ctx, fmt.Sprintf("collection-%d", next.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestGetManyAnswersAsGet: GetMany answers, across more subjects than one statement looks up,
// what Get answers one by one: the key, the zero key of an erased subject, nothing for one the
// store never had. So does the cache in front of the store, from itself or from the store.
func TestGetManyAnswersAsGet(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "keys.db"))
	var subjects []string
	for i := range 1200 {
		subject := fmt.Sprintf("collection-%d", i)
		subjects = append(subjects, subject)
		if i%3 == 2 {
			continue // never had a key
		}
		if _, err := s.GetOrCreate(ctx, subject); err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			if err := s.Destroy(ctx, subject); err != nil {
				t.Fatal(err)
			}
		}
	}
	cache := keystore.NewCache(s, 0, 100)
	for _, subject := range subjects[:50] {
		_, _ = cache.Get(ctx, subject) // some answered by the cache
	}
	for name, many := range map[string]keystore.ManyGetter{"store": s, "cache": cache} {
		got, err := many.GetMany(ctx, subjects)
		if err != nil {
			t.Fatal(err)
		}
		for _, subject := range subjects {
			want, werr := s.Get(ctx, subject)
			k, ok := got[subject]
			switch {
			case errors.Is(werr, eventschema.ErrKeyNotFound):
				if ok {
					t.Errorf("%s: %s: %v, want none", name, subject, k)
				}
			case errors.Is(werr, eventschema.ErrSubjectErased):
				if !ok || !k.IsZero() {
					t.Errorf("%s: %s: %v %v, want the zero key", name, subject, k, ok)
				}
			case werr != nil:
				t.Fatal(werr)
			default:
				if !ok || k.ID() != want.ID() || !bytes.Equal(k.Material(), want.Material()) {
					t.Errorf("%s: %s: %v %v, want %v", name, subject, k, ok, want)
				}
			}
		}
	}
}
