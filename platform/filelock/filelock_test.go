package filelock_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/samla/samla/platform/filelock"
)

// requireFlock skips where the lock is a no-op (lock_other.go).
func requireFlock(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "plan9", "js", "wasip1":
		t.Skip("no flock on " + runtime.GOOS + ": the lock is a no-op there")
	}
}

func TestSharedAndExclusive(t *testing.T) {
	requireFlock(t)
	path := filepath.Join(t.TempDir(), "samla.lock")
	first, err := filelock.Shared(path)
	if err != nil {
		t.Fatal(err)
	}
	second, err := filelock.Shared(path)
	if err != nil {
		t.Fatalf("a second shared holder: %v", err)
	}

	_, err = filelock.Exclusive(path)
	var held *filelock.HeldError
	if !errors.As(err, &held) || !errors.Is(err, filelock.ErrHeld) || held.Path != path {
		t.Fatalf("exclusive beside shared holders: %v", err)
	}
	if runtime.GOOS == "linux" && (len(held.PIDs) != 2 || !slices.Contains(held.PIDs, os.Getpid())) {
		t.Errorf("holders %v, want this process twice", held.PIDs)
	}

	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(); err != nil {
		t.Fatalf("a second release: %v", err)
	}
	if _, err := filelock.Exclusive(path); !errors.Is(err, filelock.ErrHeld) {
		t.Fatalf("exclusive beside one shared holder: %v", err)
	}
	if err := second.Release(); err != nil {
		t.Fatal(err)
	}

	only, err := filelock.Exclusive(path)
	if err != nil {
		t.Fatalf("exclusive once the shared holders left: %v", err)
	}
	if _, err := filelock.Shared(path); !errors.As(err, &held) {
		t.Fatalf("shared beside an exclusive holder: %v", err)
	}
	if _, err := filelock.Exclusive(path); !errors.Is(err, filelock.ErrHeld) {
		t.Fatalf("a second exclusive holder: %v", err)
	}
	if err := only.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := filelock.Shared(path)
	if err != nil {
		t.Fatalf("shared after the exclusive holder left: %v", err)
	}
	_ = again.Release()
}

func TestOpenFailure(t *testing.T) {
	requireFlock(t)
	_, err := filelock.Exclusive(filepath.Join(t.TempDir(), "missing", "samla.lock"))
	if err == nil || errors.Is(err, filelock.ErrHeld) {
		t.Fatalf("a lock file that cannot be created: %v", err)
	}
}
