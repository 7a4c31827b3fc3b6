package main

import (
	"context"
	"log/slog"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// idleHeapCheck is how often the process looks at its free heap; idleHeapLimit is how much free
// heap it keeps from the operating system.
const (
	idleHeapCheck = 15 * time.Second
	idleHeapLimit = 8 << 20
	// idleAllocLimit is what the process allocates in one idleHeapCheck at most and still counts
	// as idle: an idle service allocates about 4 MB in 15 s (fetch polls, timers, metrics), a
	// POST load hundreds.
	idleAllocLimit = 16 << 20
	// idleGarbageLimit is how much dead heap an idle process keeps before it collects: an idle
	// service allocates ~80 KB a second, which at 8 MB waited ~100 s for a collection and
	// held as many resident pages meanwhile; a collection of a heap of ~15 MB costs a few
	// milliseconds, at most every idleHeapCheck.
	idleGarbageLimit = 2 << 20
)

// memoryReturner gives memory a burst left behind back to the operating system, checked every
// idleHeapCheck.
type memoryReturner struct {
	log        *slog.Logger // nil: slog.Default()
	lastAllocs uint64       // the heap's allocated bytes so far, at the last check
	// sqliteReleased tells that SQLite's caches were released in this idle spell.
	sqliteReleased bool
	// trimStopped tells that a trim of libc's allocator failed: no further trim is tried.
	trimStopped bool
}

// check, when the process is idle (it allocated less than idleAllocLimit since the last check),
// returns the free heap and collects the idle garbage (returnIdleMemory) and, the first time it
// finds the process idle after it was busy, asks SQLite to free its page caches. Under load the
// runtime collects many times a second, and pages returned would be faulted in again at once.
//
// SQLite's caches live outside the Go heap, in modernc's allocator: every connection (the event
// store's, the key store's, eight read models' of four each) keeps up to its cache_size of
// pages, each page in an 8 KiB slot, and keeps them when it is idle. Three minutes after a 30 s
// POST load they held ~28 MB of the process's resident memory; sqlite3_release_memory freed
// 16 MB of pages and the resident memory outside the Go heap fell from 51 to 23 MB, as the
// allocator hands emptied regions back beyond a few MiB it keeps. Only pages no statement uses
// are freed, and a busy connection reads what it needs again (from the OS's file cache), so this
// is done once the load is over, not under it.
func (m *memoryReturner) check() {
	allocs, ok := runtimeUint64("/gc/heap/allocs:bytes")
	if !ok {
		returnIdleMemory() // a runtime without the metric: every check, as if idle
		return
	}
	idle := m.lastAllocs != 0 && allocs-m.lastAllocs < idleAllocLimit
	m.lastAllocs = allocs
	if !idle {
		m.sqliteReleased = false
		return
	}
	if !m.sqliteReleased {
		releaseSQLiteMemory()
		m.sqliteReleased = true
	}
	// Regions SQLite freed since the last check (the release above, the idle service's own
	// reads) go back to the operating system, not only to libc's allocator. The allocator
	// forgets a region before it unmaps it, so one whose munmap fails (ENOMEM once the process
	// is at vm.max_map_count: trimming 64 KiB pieces of a slab splits its mapping) stays mapped
	// for good: after a failure the process stops trimming rather than leak more.
	if !m.trimStopped {
		if err := trimSQLiteAllocator(); err != nil {
			m.trimStopped = true
			log := m.log
			if log == nil {
				log = slog.Default()
			}
			log.Warn("trimming SQLite's allocator failed; no further trims", "error", err)
		}
	}
	returnIdleMemory()
}

// releaseSQLiteMemory asks SQLite to free every page cache page no statement holds (all
// connections of the process); it returns the bytes freed.
func releaseSQLiteMemory() int {
	tls := libc.NewTLS()
	defer tls.Close()
	return int(sqlite3.Xsqlite3_release_memory(tls, math.MaxInt32))
}

// returnIdleMemory gives the heap's free pages back to the operating system once a burst is
// over. Go's own scavenger returns them slowly and keeps what the last peak needed: after a
// 30-second POST load the process stayed at 3–4× its resident size at start for minutes,
// with a live heap back near its size at start. Each check reads three runtime metrics; a return
// costs one collection, at most every idleHeapCheck (a few milliseconds of CPU for a heap of
// tens of megabytes, so the limit can be low).
//
// It also collects when more than idleGarbageLimit of the heap's objects are dead since the last
// collection. An idle service still allocates a little (fetch polls, timers, metrics), and with
// GOGC at 100 the next collection waits until the heap has doubled: its garbage, up to the size
// of the live heap, sat in memory for minutes after a burst, holding spans that would otherwise
// be free and returned. It runs only once the process is idle (memoryReturner.check).
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
	if free > idleHeapLimit || objects > live+idleGarbageLimit {
		debug.FreeOSMemory()
	}
}

// runtimeUint64 reads one of the runtime's uint64 metrics; ok is false on a runtime without it.
func runtimeUint64(name string) (v uint64, ok bool) {
	sample := []metrics.Sample{{Name: name}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return sample[0].Value.Uint64(), true
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
