package kafka

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/samla/samla/platform/filelock"
)

// lockDir takes an exclusive lock on dir's .lock file. kfake has no lock of its own, and two
// brokers writing one data directory would interleave their segment files. The lock goes away
// with the process, so a crash never leaves a stale one behind.
func lockDir(dir string) (release func(), err error) {
	l, err := filelock.Exclusive(filepath.Join(dir, ".lock"))
	if errors.Is(err, filelock.ErrHeld) {
		return nil, fmt.Errorf("data directory %s is in use by another broker: %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return func() { _ = l.Release() }, nil
}
