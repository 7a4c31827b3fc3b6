package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// After a burst the free heap goes back to the operating system: a check with more than
// idleHeapLimit free leaves at most that much.
func TestReturnIdleMemoryReleasesTheFreeHeap(t *testing.T) {
	free := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	burst := make([][]byte, 0, 256)
	for range 256 {
		burst = append(burst, make([]byte, 256<<10)) // 64 MiB in pieces, as a load leaves it
	}
	runtime.KeepAlive(burst)
	burst = nil
	runtime.GC()
	if f := free(); f <= idleHeapLimit {
		t.Skipf("the runtime already returned the burst's heap (%d bytes free): nothing to test", f)
	}
	returnIdleMemory()
	if f := free(); f > idleHeapLimit {
		t.Fatalf("%d bytes of free heap kept after the check, want at most %d", f, idleHeapLimit)
	}
}

// An idle service's garbage is collected without waiting for the heap to double: a check that
// finds more than idleHeapLimit of dead objects since the last collection collects them.
func TestReturnIdleMemoryCollectsIdleGarbage(t *testing.T) {
	read := func() (objects, live uint64) {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64(), s[1].Value.Uint64()
	}
	runtime.GC()
	// No collection of its own while the garbage piles up, as with GOGC's goal far away.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var sink []byte
	for range 4 * idleHeapLimit / 1024 {
		sink = make([]byte, 1024) // dead as soon as the next one is made
	}
	runtime.KeepAlive(sink)
	if objects, live := read(); objects <= live+idleHeapLimit {
		t.Skipf("only %d bytes of objects beside %d live: the garbage did not pile up", objects, live)
	}
	returnIdleMemory()
	if objects, live := read(); objects > live+idleHeapLimit {
		t.Fatalf("%d bytes of objects kept beside %d live after the check, want at most %d more", objects, live, idleHeapLimit)
	}
}
