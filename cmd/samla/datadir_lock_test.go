package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/samla/samla/platform/filelock"
)

// TestRebuildRefusedWhileRunning: a rebuild on the data dir of a running service is refused,
// naming the lock and the service's pid; once the service stopped it runs; and a service does
// not start while a rebuild holds the data dir.
func TestRebuildRefusedWhileRunning(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock on windows: the data dir lock is a no-op there")
	}
	dir := t.TempDir()
	svc := start(t, testConfig(t, dir))

	_, err := RebuildProjections(context.Background(), testConfig(t, dir), testLogger(t))
	var held *filelock.HeldError
	if !errors.As(err, &held) || held.Path != filepath.Join(dir, dataDirLockFile) {
		stop(t, svc)
		t.Fatalf("rebuild under a running service: %v", err)
	}
	if runtime.GOOS == "linux" && !slices.Contains(held.PIDs, os.Getpid()) {
		t.Errorf("the refusal names pids %v, not the service's %d", held.PIDs, os.Getpid())
	}
	stop(t, svc)

	if n, err := RebuildProjections(context.Background(), testConfig(t, dir), testLogger(t)); err != nil || n == 0 {
		t.Fatalf("rebuild after the service stopped: %d events, %v", n, err)
	}

	release, err := lockDataDir(testConfig(t, dir), useAlone) // as a running rebuild holds it
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = release() }()
	if svc, err := Start(context.Background(), testConfig(t, dir), AllRoles(), testLogger(t)); !errors.Is(err, filelock.ErrHeld) {
		if err == nil {
			stop(t, svc)
		}
		t.Fatalf("start during a rebuild: %v", err)
	}
}
