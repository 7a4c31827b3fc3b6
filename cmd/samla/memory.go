package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// idleHeapCheck is how often the process looks at its free heap; idleHeapLimit is how much free
// heap it keeps from the operating system.
const (
	idleHeapCheck = 15 * time.Second
	idleHeapLimit = 8 << 20
)

// returnIdleMemory gives the heap's free pages back to the operating system once a burst is
// over. Go's own scavenger returns them slowly and keeps what the last peak needed: after a
// 30-second POST load the process stayed at 3–4× its resident size at start for minutes,
// with a live heap back near its size at start. Each check reads one runtime metric; a return
// costs one collection, at most every idleHeapCheck (a few milliseconds of CPU for a heap of
// tens of megabytes, so the limit can be low).
func returnIdleMemory() {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > idleHeapLimit {
		debug.FreeOSMemory()
	}
}

// every is a role that calls f every d until its context ends.
func every(d time.Duration, f func()) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				f()
			}
		}
	}
}
