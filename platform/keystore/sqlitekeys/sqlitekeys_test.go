package sqlitekeys_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/samla/samla/eventschema"
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
