package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// gcHeapFloor is the heap the collector lets the service grow to before it collects, however
// small the live heap. With GOGC at 100 alone the next collection comes when the heap has
// doubled: with the ~12 MB a running service keeps live, every ~12 MB allocated, about four
// collections a second under a trickle of collections (445 KB allocated for each). Letting the
// heap reach 64 MiB first took POSTs one after another over one connection, each left to
// complete, from ~55 garbage collections in 15 s to ~15, and the collector's marking from
// 6.9–7.3 % to 1.2–2.3 % of the CPU. Once the live heap is half the floor or more, GOGC is 100
// again, so the peak of a burst, when the live heap is large, is what it was; and an idle
// service is collected by the memory role (returnIdleMemory), not by the floor.
const gcHeapFloor = 64 << 20

// gcPercentCeiling bounds the GOGC the floor sets: at a live heap of a few MB a collection
// every 64 MiB would otherwise mean a GOGC of thousands, for no further gain.
const gcPercentCeiling = 800

// gcPercentFor is the GOGC that puts the next collection near floor when the heap holds live
// bytes (the runtime's goal is about live × (1 + GOGC/100), its roots aside), never below Go's
// default of 100.
func gcPercentFor(live, floor uint64) int {
	if live == 0 || live*2 >= floor {
		return 100
	}
	return min(int(floor*100/live)-100, gcPercentCeiling)
}

// gcFloor is the process's one floor: GOGC is process-wide, so the services a process starts
// (tests start several) share it, and it ends with the last of them.
var gcFloor = gcFloorState{percent: 100}

type gcFloorState struct {
	mu    sync.Mutex
	users int  // services running with the floor
	armed bool // a sentinel is waiting for the next collection
	// percent is the GOGC the floor expects: what it set last, or Go's default. A GOGC found
	// different from it was set by someone else (a test, an operator's tool): the floor leaves
	// that alone.
	percent int
}

// startGCFloor keeps the collector's goal at gcHeapFloor or above (gcPercentFor), adjusted
// after every collection, until the returned stop is called. An operator's own GOGC or
// GOMEMLIMIT is left alone: the floor is not started then.
func startGCFloor() (stop func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	gcFloor.mu.Lock()
	gcFloor.users++
	if !gcFloor.armed {
		gcFloor.armed = true
		armGCFloor()
	}
	gcFloor.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			gcFloor.mu.Lock()
			defer gcFloor.mu.Unlock()
			gcFloor.users--
			if gcFloor.users == 0 {
				setGCPercentLocked(100)
			}
		})
	}
}

// gcSentinel is garbage from birth: its finalizer runs after the collection that finds it, and
// arms the next one. It holds a pointer so that it is not one of the tiny allocations whose
// finalizers may never run.
type gcSentinel struct{ _ *int }

func armGCFloor() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		gcFloor.mu.Lock()
		defer gcFloor.mu.Unlock()
		if gcFloor.users == 0 {
			gcFloor.armed = false // stopped: the chain ends here
			return
		}
		if live, ok := runtimeUint64("/gc/heap/live:bytes"); ok {
			setGCPercentLocked(gcPercentFor(live, gcHeapFloor))
		}
		armGCFloor()
	})
}

// setGCPercentLocked sets GOGC to p unless someone other than the floor changed it since the
// floor last set it, in which case their setting stays and the floor lets go of it.
func setGCPercentLocked(p int) {
	if p == gcFloor.percent {
		return
	}
	if prev := debug.SetGCPercent(p); prev != gcFloor.percent {
		// Someone else's: put it back, and expect Go's default again before acting.
		debug.SetGCPercent(prev)
		gcFloor.percent = 100
		return
	}
	gcFloor.percent = p
}
