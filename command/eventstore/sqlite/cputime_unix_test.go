//go:build unix

package sqlite

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used so far. Benchmarks report CPU per append
// beside wall time: on a shared machine the wall time swings with the neighbours' load, the
// CPU an append costs much less.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
