//go:build unix

package kafka

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive advisory lock on dir. kfake has no lock of its own, and two
// brokers writing one data directory would interleave their segment files. The lock goes away
// with the process, so a crash never leaves a stale one behind.
func lockDir(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another broker: %w", dir, err)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return func() { f.Close() }, nil
}
