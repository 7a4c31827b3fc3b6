package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentForKeepsTheGoalAtTheFloor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 100},                    // nothing known: Go's default
		{16 * mib, 300},             // 16 MiB live: the next collection at 64 MiB
		{20 * mib, 220},             // 20 → 64 MiB
		{32 * mib, 100},             // half the floor: doubling reaches it anyway
		{200 * mib, 100},            // a burst's heap: as Go would
		{1 * mib, gcPercentCeiling}, // tiny: bounded
	} {
		if got := gcPercentFor(tc.live, 64*mib); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tc.live/mib, got, tc.want)
		}
	}
}

func gogc(t *testing.T) uint64 { return runtimeMetric(t, "/gc/gogc:percent") }

// runtimeMetric reads a uint64 metric of the runtime, skipping the test on a runtime without it.
func runtimeMetric(t *testing.T, name string) uint64 {
	t.Helper()
	v, ok := runtimeUint64(name)
	if !ok {
		t.Skipf("this runtime has no %s", name)
	}
	return v
}

// wantGOGC fails the test unless GOGC is want.
func wantGOGC(t *testing.T, want uint64, when string) {
	t.Helper()
	if got := gogc(t); got != want {
		t.Fatalf("GOGC %d %s, want %d", got, when, want)
	}
}

// withoutOperatorGC runs the test as a process started without GOGC or GOMEMLIMIT, at Go's
// default GOGC, which it restores at the end.
func withoutOperatorGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
}

// collectUntilRaised runs collections until the floor has raised GOGC, failing after 5 s.
func collectUntilRaised(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for gogc(t) <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after collections for 5 s, want the floor to raise it", gogc(t))
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// collectAFew runs a few collections, each letting the floor's finalizer run.
func collectAFew() {
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// The floor follows the collections: after one, GOGC is raised for this test binary's small
// heap; it stays raised while any service that started it runs (a process may run several),
// and once the last stops, Go's default is back and no later collection changes it.
func TestGCFloorAdjustsAfterACollectionAndStopsWithTheLastService(t *testing.T) {
	withoutOperatorGC(t)
	stopFirst, stopSecond := startGCFloor(), startGCFloor()
	defer stopSecond()
	defer stopFirst()
	collectUntilRaised(t)
	stopFirst()
	stopFirst() // a second stop of the same service changes nothing
	collectAFew()
	if got := gogc(t); got <= 100 {
		t.Fatalf("GOGC %d after one of two services stopped, want it still raised", got)
	}
	stopSecond()
	wantGOGC(t, 100, "after the last service stopped")
	collectAFew()
	wantGOGC(t, 100, "after stop and more collections")
}

// A GOGC someone else set while the floor runs (a test, a tool) is theirs: the floor neither
// overwrites it after a collection nor resets it when it stops.
func TestGCFloorLeavesAnotherSettingAlone(t *testing.T) {
	withoutOperatorGC(t)
	stop := startGCFloor()
	defer stop()
	collectUntilRaised(t)
	debug.SetGCPercent(50)
	collectAFew()
	wantGOGC(t, 50, "after collections, set beside the floor")
	stop()
	wantGOGC(t, 50, "after the floor stopped, set beside it")
}

func TestGCFloorLeavesAnOperatorsSettingsAlone(t *testing.T) {
	t.Setenv("GOGC", "50")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := startGCFloor()
	defer stop()
	collectAFew()
	wantGOGC(t, 100, "with the operator's GOGC set (untouched: 100 in this test)")
}
