//go:build !unix

package sqlite

import "time"

// processCPU is unknown off unix; the benchmarks then report no CPU per append.
func processCPU() time.Duration { return 0 }
