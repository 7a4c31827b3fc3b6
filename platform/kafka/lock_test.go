package kafka_test

import (
	"errors"
	"log/slog"
	"runtime"
	"testing"

	"github.com/samla/samla/platform/filelock"
	"github.com/samla/samla/platform/kafka"
)

// TestOneBrokerPerDataDir: a second embedded broker on a data directory in use is refused, and
// the directory is free again once the first one stopped.
func TestOneBrokerPerDataDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock on windows: the lock is a no-op there")
	}
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	first, err := kafka.StartEmbedded(dir, logger)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := kafka.StartEmbedded(dir, logger); !errors.Is(err, filelock.ErrHeld) {
		if second != nil {
			second.Close()
		}
		t.Fatalf("a second broker on %s: %v", dir, err)
	}
	first.Close()
	again, err := kafka.StartEmbedded(dir, logger)
	if err != nil {
		t.Fatalf("after the first broker stopped: %v", err)
	}
	again.Close()
}
