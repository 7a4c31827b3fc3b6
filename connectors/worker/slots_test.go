package worker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// resizeNow runs one adaptation with the CPU saturated or not, as the adaptation loop does.
func resizeNow(s *scheduler, saturated bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resize(saturated)
	return s.limit
}

func TestSlotsHalveWhileTheCPUIsSaturatedAndGrowBackWithWaitingSteps(t *testing.T) {
	s := newScheduler(64, 0, 0, nil)
	defer s.stop()
	var changes []int
	s.limitChanged = func(limit int) { changes = append(changes, limit) }
	s.floor = 4 // what adaptSlots sets; the loop itself is left out so that the test drives it
	tr := &trace{}
	release := make(chan struct{})
	for i := range 40 {
		if _, err := s.submit(fmt.Sprint("busy", i), "a", blocking(tr, fmt.Sprint("busy", i), release)); err != nil {
			t.Fatal(err)
		}
	}
	if active, _, _ := s.counts(); active != 40 {
		t.Fatalf("active = %d before any adaptation, want 40 of 64 slots", active)
	}

	// Saturated: half the steps running, then half of the limit, down to the floor.
	var limits []int
	for range 5 {
		limits = append(limits, resizeNow(s, true))
	}
	if want := []int{20, 10, 5, 4, 4}; !slices.Equal(limits, want) {
		t.Fatalf("limits while saturated = %v, want %v", limits, want)
	}
	if active, _, _ := s.counts(); active != 40 {
		t.Fatalf("active = %d: a lower limit must not stop running steps", active)
	}
	close(release)
	waitFor(t, "the running steps to end", func() bool { a, _, _ := s.counts(); return a == 0 })

	// Ten new steps: the limit of 4 holds six back.
	hold := make(chan struct{})
	defer close(hold)
	for i := range 10 {
		if _, err := s.submit(fmt.Sprint("new", i), "a", blocking(tr, fmt.Sprint("new", i), hold)); err != nil {
			t.Fatal(err)
		}
	}
	if active, queued, _ := s.counts(); active != 4 || queued != 6 {
		t.Fatalf("active, queued = %d, %d under a limit of 4, want 4, 6", active, queued)
	}

	// Not saturated, every slot taken and steps waiting: a quarter more each time (at least
	// one), and the steps held back start at once.
	limits = limits[:0]
	for range 5 {
		limits = append(limits, resizeNow(s, false))
	}
	if want := []int{5, 6, 7, 8, 10}; !slices.Equal(limits, want) {
		t.Fatalf("limits once the CPU is free = %v, want %v", limits, want)
	}
	if active, queued, _ := s.counts(); active != 10 || queued != 0 {
		t.Fatalf("active, queued = %d, %d under a limit of 10, want 10, 0", active, queued)
	}
	// Nothing waits: the limit stays where it is.
	if got := resizeNow(s, false); got != 10 {
		t.Fatalf("limit with no step waiting = %d, want 10 (no growth without demand)", got)
	}
	if want := []int{20, 10, 5, 4, 5, 6, 7, 8, 10}; !slices.Equal(changes, want) {
		t.Fatalf("limits reported = %v, want %v", changes, want)
	}
}

// A limit lowered below the steps running holds back the next steps of the client running
// them, not another client's: as the running steps end, the freed slots go to the clients
// below their share of the limit (the limit over the clients with queued or running steps),
// up to twice the limit.
func TestSlotsPastTheLimitGoToOtherClientsShare(t *testing.T) {
	s := newScheduler(64, 0, 0, nil)
	defer s.stop()
	s.floor = 4
	tr := &trace{}
	hold := make(chan struct{})
	defer close(hold)
	ends := make([]chan struct{}, 40)
	for i := range ends {
		ends[i] = make(chan struct{})
		if _, err := s.submit(fmt.Sprint("a", i), "a", blocking(tr, fmt.Sprint("a", i), ends[i])); err != nil {
			t.Fatal(err)
		}
	}
	if got := resizeNow(s, true); got != 20 {
		t.Fatalf("limit = %d, want 20", got)
	}
	if _, err := s.submit("a-next", "a", blocking(tr, "a-next", hold)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.submit("c0", "c", blocking(tr, "c0", hold)); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, err := s.submit(fmt.Sprint("b", i), "b", blocking(tr, fmt.Sprint("b", i), hold)); err != nil {
			t.Fatal(err)
		}
	}
	if active, queued, _ := s.counts(); active != 40 || queued != 10 {
		t.Fatalf("active, queued = %d, %d: at twice the limit nothing more starts, want 40, 10", active, queued)
	}
	// Ten of a's steps end: clients a, b and c have work, a share of 20/3 = 6 slots each.
	for _, end := range ends[:10] {
		close(end)
	}
	waitFor(t, "b's share and c's step", func() bool { return len(tr.get()) == 40+6+1 })
	time.Sleep(10 * time.Millisecond) // time for a wrong start to show
	started := map[string]int{}
	for _, id := range tr.get() {
		started[id[:1]]++
	}
	active, queued, _ := s.counts()
	if started["a"] != 40 || started["b"] != 6 || started["c"] != 1 || active != 37 || queued != 3 {
		t.Fatalf("started %v; active %d, queued %d: want, past the limit, 6 of b's and c's one, not a-next (37 active; a-next and 2 of b's queued)",
			started, active, queued)
	}
	for _, end := range ends[10:] {
		close(end)
	}
}

// holding is a scheduler of maxActive slots at the given floor and limit, and a submit of steps
// that hold their slot until the test ends.
func holding(t *testing.T, maxActive, floor, limit int) (*scheduler, func(id, client string)) {
	t.Helper()
	s := newScheduler(maxActive, 0, 0, nil)
	s.floor, s.limit = floor, limit
	release := make(chan struct{})
	t.Cleanup(func() { close(release); s.stop() })
	tr := &trace{}
	return s, func(id, client string) {
		t.Helper()
		if _, err := s.submit(id, client, blocking(tr, id, release)); err != nil {
			t.Fatal(err)
		}
	}
}

// However many clients have a step waiting, past the limit at most twice the limit run.
func TestSlotsPastTheLimitStopAtTwiceTheLimit(t *testing.T) {
	s, hold := holding(t, 512, 8, 8)
	for i := range 100 {
		hold(fmt.Sprint(i), fmt.Sprint("client", i))
	}
	if active, queued, _ := s.counts(); active != 16 || queued != 84 {
		t.Fatalf("active, queued = %d, %d with a limit of 8 and 100 clients of one step, want 16, 84", active, queued)
	}
}

// A client whose sessions are all parked has no work here: it does not count against the
// shares of the clients that have.
func TestParkedClientsHoldNoShare(t *testing.T) {
	s := newScheduler(64, 0, 0, nil)
	defer s.stop()
	for i := range 5 {
		id := fmt.Sprint("parked", i)
		if _, err := s.submit(id, id, func(context.Context) stepResult { return stepResult{park: true, wait: time.Hour} }); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the sessions to park", func() bool { _, _, p := s.counts(); return p == 5 })
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.clients) != 0 {
		t.Fatalf("%d clients with only parked sessions held, want none", len(s.clients))
	}
}

func TestSlotsNeverExceedTheMaximum(t *testing.T) {
	s, hold := holding(t, 5, 1, 4)
	for i := range 8 {
		hold(fmt.Sprint(i), "a")
	}
	for range 3 {
		resizeNow(s, false)
	}
	if active, queued, _ := s.counts(); active != 5 || queued != 3 {
		t.Fatalf("active, queued = %d, %d, want the maximum of 5 running and 3 waiting", active, queued)
	}
}

func TestAdaptSlotsFollowsTheSignalAndEndsWithTheScheduler(t *testing.T) {
	s := newScheduler(64, 0, 0, nil)
	var reads atomic.Int64
	s.adaptSlots(8, time.Millisecond, func() bool { reads.Add(1); return true })
	hold := make(chan struct{})
	tr := &trace{}
	for i := range 20 {
		if _, err := s.submit(fmt.Sprint(i), "a", blocking(tr, fmt.Sprint(i), hold)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the limit to reach the floor", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.limit == 8
	})
	close(hold)
	s.stop() // waits for the adaptation loop too
	n := reads.Load()
	time.Sleep(10 * time.Millisecond)
	if reads.Load() != n {
		t.Fatal("the adaptation loop read the signal after stop returned")
	}
}

// A floor of 0 (the worker's default, MinSessions unset) or at the maximum keeps the slots
// fixed: the CPU's saturation is never read.
func TestAdaptSlotsKeepsFixedSlotsWithoutAFloorBelowTheMaximum(t *testing.T) {
	for _, floor := range []int{0, 4} {
		s := newScheduler(4, 0, 0, nil)
		s.adaptSlots(floor, time.Millisecond, func() bool {
			t.Errorf("floor %d: a scheduler with fixed slots read the CPU's saturation", floor)
			return true
		})
		time.Sleep(10 * time.Millisecond)
		s.stop()
		if s.limit != 4 {
			t.Fatalf("floor %d: limit = %d, want the fixed 4", floor, s.limit)
		}
	}
}

func TestSaturatedSince(t *testing.T) {
	// The runtime's layout: bucket i spans buckets[i]..buckets[i+1].
	buckets := []float64{math.Inf(-1), 0.0005, 0.001, 0.004, 0.016, math.Inf(1)}
	last := []uint64{10, 10, 10, 10, 10}
	for _, tc := range []struct {
		name string
		add  []uint64
		want bool
		p90  time.Duration
	}{
		{"idle: few waits, however long", []uint64{0, 0, 0, 0, 40}, false, 16 * time.Millisecond},
		{"busy, waits short", []uint64{0, 90, 10, 0, 0}, false, time.Millisecond},
		{"saturated", []uint64{0, 10, 85, 5, 0}, true, 4 * time.Millisecond},
		{"saturated past the last bound", []uint64{0, 10, 10, 10, 70}, true, 16 * time.Millisecond},
		{"nothing recorded", []uint64{0, 0, 0, 0, 0}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counts := slices.Clone(last)
			for i, n := range tc.add {
				counts[i] += n
			}
			p90, waits := quantileSince(counts, last, buckets, 0.9)
			var want uint64
			for _, n := range tc.add {
				want += n
			}
			if p90 != tc.p90 || waits != want {
				t.Fatalf("quantileSince = %v over %d waits, want %v over %d", p90, waits, tc.p90, want)
			}
			if got := saturatedBy(p90, waits); got != tc.want {
				t.Fatalf("saturated = %v, want %v", got, tc.want)
			}
		})
	}
}

// The adaptation loop and the steps share the scheduler's lock: adapting while steps start
// and end must keep its counts right (run with -race).
func TestSlotsAdaptWhileStepsRun(t *testing.T) {
	s := newScheduler(32, 0, 0, nil)
	var bad []int // limits reported outside [floor, max]; limitChanged runs under s.mu
	var changes atomic.Int64
	s.limitChanged = func(limit int) {
		changes.Add(1)
		if limit < 2 || limit > 32 {
			bad = append(bad, limit)
		}
	}
	var reads atomic.Int64
	s.adaptSlots(2, 100*time.Microsecond, func() bool {
		// Saturated for three periods, then free for three: it shrinks and grows in turn.
		return reads.Add(1)%6 < 3
	})
	var wg sync.WaitGroup
	var ran atomic.Int64
	for i := range 500 {
		wg.Add(1)
		if _, err := s.submit(fmt.Sprint(i), fmt.Sprint(i%3), func(context.Context) stepResult {
			defer wg.Done()
			ran.Add(1)
			time.Sleep(50 * time.Microsecond)
			return stepResult{}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	s.stop()
	if active, queued, parked := s.counts(); ran.Load() != 500 || active+queued+parked != 0 {
		t.Fatalf("ran %d of 500; left active %d, queued %d, parked %d", ran.Load(), active, queued, parked)
	}
	if reads.Load() == 0 {
		t.Fatal("the adaptation loop never read the signal")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("limits outside [2, 32]: %v (of %d changes)", bad, changes.Load())
	}
}
