// Package filelock takes advisory locks on a file, shared by processes that may work side by side
// and exclusive for one that must work alone. The operating system drops a lock with the process
// that held it, so a crash never leaves a stale one behind.
package filelock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// ErrHeld means another holder has the lock in a mode that excludes the one asked for.
var ErrHeld = errors.New("lock is held by another holder")

// HeldError names the lock file and, where the system tells (Linux), the processes that hold it.
// It wraps ErrHeld.
type HeldError struct {
	Path string
	// PIDs are the holders' process ids, in the order the system lists them; empty when the
	// system does not say. The process itself may be one of them: locks of two opens of the same
	// file exclude each other even within a process.
	PIDs []int
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lock file %s is held by pid %s", e.Path, e.PIDList())
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// PIDList is the holders' pids as "12, 345", or "unknown" when the system does not say.
func (e *HeldError) PIDList() string {
	if len(e.PIDs) == 0 {
		return "unknown"
	}
	s := make([]string, len(e.PIDs))
	for i, pid := range e.PIDs {
		s[i] = strconv.Itoa(pid)
	}
	return strings.Join(s, ", ")
}

// Lock is a held lock. Release gives it back; the process's end does too.
type Lock struct {
	release func() error
	once    sync.Once
	err     error
}

// Release gives the lock back. It is safe to call more than once.
func (l *Lock) Release() error {
	l.once.Do(func() { l.err = l.release() })
	return l.err
}

// Shared takes a shared lock on path (creating the file): other shared holders may hold it at
// the same time, an exclusive holder may not. A lock that is held the other way is refused at
// once with a *HeldError, never waited for.
func Shared(path string) (*Lock, error) { return lock(path, false) }

// Exclusive takes an exclusive lock on path (creating the file): no other holder, shared or
// exclusive, may hold it at the same time. A held lock is refused at once with a *HeldError.
func Exclusive(path string) (*Lock, error) { return lock(path, true) }
