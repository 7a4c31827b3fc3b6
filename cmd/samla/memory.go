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
// with a live heap back near its size at start. Each check reads two runtime metrics; a return
// costs one collection, at most every idleHeapCheck (a few milliseconds of CPU for a heap of
// tens of megabytes, so the limit can be low).
//
// It also collects when more than idleHeapLimit of the heap's objects are dead since the last
// collection. An idle service still allocates a little (fetch polls, timers, metrics), and with
// GOGC at 100 the next collection waits until the heap has doubled: its garbage, up to the size
// of the live heap, sat in memory for minutes after a burst, holding spans that would otherwise
// be free and returned. Under load the runtime collects many times a second anyway, so this
// adds at most one collection per check.
func returnIdleMemory() {
	sample := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	metrics.Read(sample)
	for _, s := range sample {
		if s.Value.Kind() != metrics.KindUint64 {
			return // a metric this runtime does not have: leave it to the runtime
		}
	}
	free, objects, live := sample[0].Value.Uint64(), sample[1].Value.Uint64(), sample[2].Value.Uint64()
	if free > idleHeapLimit || objects > live+idleHeapLimit {
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
