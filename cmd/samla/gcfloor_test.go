package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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

func gogc(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Skip("runtime has no /gc/gogc:percent")
	}
	return s[0].Value.Uint64()
}

// The floor follows the collections: after one, GOGC is raised for this test binary's small
// heap; once stopped, Go's default is back and no later collection changes it.
func TestGCFloorAdjustsAfterACollectionAndStops(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := startGCFloor()
	deadline := time.Now().Add(5 * time.Second)
	for gogc(t) == 100 {
		if time.Now().After(deadline) {
			stop()
			t.Fatal("GOGC still 100 after collections with a small live heap")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC %d after stop, want 100", got)
	}
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC %d after stop and more collections, want 100", got)
	}
}

func TestGCFloorLeavesAnOperatorsSettingsAlone(t *testing.T) {
	t.Setenv("GOGC", "50")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := startGCFloor()
	defer stop()
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC %d with the operator's GOGC set, want it untouched (100 in this test)", got)
	}
}
