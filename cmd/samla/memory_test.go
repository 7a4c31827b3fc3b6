package main

import (
	"runtime"
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
