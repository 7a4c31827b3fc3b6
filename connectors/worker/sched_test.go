package worker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// trace records the order in which steps start.
type trace struct {
	mu    sync.Mutex
	order []string
}

func (tr *trace) add(id string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.order = append(tr.order, id)
}

func (tr *trace) get() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.order)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// done is a step that records itself and ends its session.
func done(tr *trace, id string) func(context.Context) stepResult {
	return func(context.Context) stepResult { tr.add(id); return stepResult{} }
}

// blocking is a step that records itself and holds its slot until release is closed.
func blocking(tr *trace, id string, release <-chan struct{}) func(context.Context) stepResult {
	return func(ctx context.Context) stepResult {
		tr.add(id)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return stepResult{}
	}
}

func TestSchedulerServesClientsInTurn(t *testing.T) {
	s := newScheduler(1, 0, 0, nil)
	defer s.stop()
	tr := &trace{}
	release := make(chan struct{})
	if _, err := s.submit("c1", "c", blocking(tr, "c1", release)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		id := fmt.Sprintf("a%d", i)
		if _, err := s.submit(id, "a", done(tr, id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"b0", "b1"} {
		if _, err := s.submit(id, "b", done(tr, id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.submit("x0", "", done(tr, "x0")); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, "every step", func() bool { return len(tr.get()) == 9 })
	want := []string{"c1", "a0", "b0", "x0", "a1", "b1", "a2", "a3", "a4"}
	if got := tr.get(); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestSchedulerCapsSlotsPerClient(t *testing.T) {
	s := newScheduler(4, 1, 0, nil)
	defer s.stop()
	tr := &trace{}
	release := make(chan struct{})
	for i := range 3 {
		id := fmt.Sprintf("a%d", i)
		if _, err := s.submit(id, "a", blocking(tr, id, release)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.submit("b0", "b", blocking(tr, "b0", release)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a0 and b0", func() bool { return len(tr.get()) == 2 })
	active, queued, _ := s.counts()
	if active != 2 || queued != 2 {
		t.Fatalf("active %d queued %d; with a cap of 1 per client, A's others wait although slots are free", active, queued)
	}
	close(release)
	waitFor(t, "every step", func() bool { return len(tr.get()) == 4 })
}

func TestSchedulerQueueLimitLeavesNewIDsToTheSweep(t *testing.T) {
	s := newScheduler(1, 0, 2, nil)
	defer s.stop()
	tr := &trace{}
	release := make(chan struct{})
	if _, err := s.submit("a0", "a", blocking(tr, "a0", release)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a0 to run", func() bool { return len(tr.get()) == 1 })
	for i, want := range []bool{true, true, false} {
		id := fmt.Sprintf("a%d", i+1)
		if ok, err := s.submit(id, "a", done(tr, id)); err != nil || ok != want {
			t.Fatalf("submit %s: %v %v, want accepted %v", id, ok, err, want)
		}
	}
	// Another client's queue is its own.
	if ok, err := s.submit("b0", "b", done(tr, "b0")); err != nil || !ok {
		t.Fatalf("submit b0: %v %v", ok, err)
	}
	close(release)
	waitFor(t, "the accepted steps", func() bool { return len(tr.get()) == 4 })
	// The refused id comes again with the next sweep, and is taken once there is room.
	if ok, err := s.submit("a3", "a", done(tr, "a3")); err != nil || !ok {
		t.Fatalf("submit a3 again: %v %v", ok, err)
	}
	waitFor(t, "a3", func() bool { return slices.Contains(tr.get(), "a3") })
}

// parking is a session that parks n times for wait, then ends; it counts its steps.
type parking struct {
	mu    sync.Mutex
	steps int
	n     int
	wait  time.Duration
	// hold, when set, keeps the first step running until closed.
	hold chan struct{}
}

func (p *parking) step(ctx context.Context) stepResult {
	p.mu.Lock()
	p.steps++
	first, last := p.steps == 1, p.steps > p.n
	p.mu.Unlock()
	if first && p.hold != nil {
		<-p.hold
	}
	if last {
		return stepResult{}
	}
	return stepResult{park: true, wait: p.wait, client: "a"}
}

func (p *parking) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.steps
}

func TestSchedulerParksAndWakes(t *testing.T) {
	s := newScheduler(1, 0, 0, nil)
	defer s.stop()
	p := &parking{n: 2, wait: time.Hour}
	if _, err := s.submit("p", "", p.step); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the session to park", func() bool { _, _, parked := s.counts(); return parked == 1 })
	if active, _, _ := s.counts(); active != 0 {
		t.Fatalf("a parked session holds a slot: %d active", active)
	}
	// The sweep finding it again leaves it parked.
	if _, err := s.submit("p", "", p.step); err != nil {
		t.Fatal(err)
	}
	if p.count() != 1 {
		t.Fatalf("%d steps after a second submit", p.count())
	}
	s.wake("p")
	waitFor(t, "the second step", func() bool { _, _, parked := s.counts(); return p.count() == 2 && parked == 1 })
	s.wake("p")
	waitFor(t, "the session to end", func() bool { a, q, parked := s.counts(); return p.count() == 3 && a+q+parked == 0 })
}

func TestSchedulerWakeDuringAStepRunsItAgain(t *testing.T) {
	s := newScheduler(1, 0, 0, nil)
	defer s.stop()
	p := &parking{n: 1, wait: time.Hour, hold: make(chan struct{})}
	if _, err := s.submit("p", "a", p.step); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first step", func() bool { return p.count() == 1 })
	s.wake("p") // the input arrived while the step ran: it must not wait an hour
	close(p.hold)
	waitFor(t, "the second step", func() bool { return p.count() == 2 })
}

func TestSchedulerTimerWakesAParkedSession(t *testing.T) {
	s := newScheduler(1, 0, 0, nil)
	defer s.stop()
	p := &parking{n: 3, wait: time.Millisecond}
	if _, err := s.submit("p", "a", p.step); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every step", func() bool { a, q, parked := s.counts(); return p.count() == 4 && a+q+parked == 0 })
}

func TestSchedulerStopForgetsParkedSessions(t *testing.T) {
	s := newScheduler(2, 0, 0, nil)
	p := &parking{n: 5, wait: time.Hour}
	if _, err := s.submit("p", "a", p.step); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the session to park", func() bool { _, _, parked := s.counts(); return parked == 1 })
	if n := s.stop(); n != 1 {
		t.Fatalf("stop reported %d parked", n)
	}
	s.wake("p")
	if _, err := s.submit("q", "a", p.step); err != ErrStopped {
		t.Fatalf("submit after stop: %v", err)
	}
	if a, q, parked := s.counts(); a+q+parked != 0 || p.count() != 1 {
		t.Fatalf("after stop: %d %d %d, %d steps", a, q, parked, p.count())
	}
}

// BenchmarkStartWithParked measures a new session's first step (submit to done) while 10,000
// sessions of another client are parked: the parked ones cost it nothing but their memory.
func BenchmarkStartWithParked(b *testing.B) {
	for _, parked := range []int{0, 10000} {
		b.Run(fmt.Sprintf("parked=%d", parked), func(b *testing.B) {
			s := newScheduler(DefaultMaxSessions, 0, 0, nil)
			defer s.stop()
			park := func(context.Context) stepResult { return stepResult{park: true, wait: time.Hour, client: "a"} }
			for i := range parked {
				if _, err := s.submit(fmt.Sprintf("parked-%d", i), "a", park); err != nil {
					b.Fatal(err)
				}
			}
			for {
				if _, _, p := s.counts(); p == parked {
					break
				}
				time.Sleep(time.Millisecond)
			}
			ids := make([]string, b.N)
			for i := range ids {
				ids[i] = fmt.Sprintf("new-%d", i)
			}
			ran := make(chan struct{}, 1)
			step := func(context.Context) stepResult { ran <- struct{}{}; return stepResult{} }
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.submit(ids[i], "b", step); err != nil {
					b.Fatal(err)
				}
				<-ran
			}
		})
	}
}

// The ids a sweep or a restart found queue under "" until their first step tells whose they
// are: the per-client cap does not hold them back as if they were one client, while a named
// client stays capped (found in review).
func TestSchedulerDoesNotCapUnknownClients(t *testing.T) {
	s := newScheduler(8, 2, 100, nil)
	defer s.stop()
	release := make(chan struct{})
	defer close(release)
	block := func(ctx context.Context) stepResult {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return stepResult{}
	}
	for i := 0; i < 5; i++ {
		s.submit(fmt.Sprint("unknown-", i), "", block)
	}
	for i := 0; i < 5; i++ {
		s.submit(fmt.Sprint("acme-", i), "acme", block)
	}
	if active, queued, _ := s.counts(); active != 7 || queued != 3 {
		t.Fatalf("active %d, queued %d; want the 5 unknown and acme's 2 running, acme's other 3 queued", active, queued)
	}
}

// TestSchedulerMakesItsEntriesAnewAfterABacklog: once a backlog of thousands of sessions has
// run, the entries map is made anew at a quarter of its peak, and the sessions still there go
// on.
func TestSchedulerMakesItsEntriesAnewAfterABacklog(t *testing.T) {
	s := newScheduler(1, 0, 0, nil)
	defer s.stop()
	tr := &trace{}
	release := make(chan struct{})
	if _, err := s.submit("hold", "a", blocking(tr, "hold", release)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "hold to run", func() bool { return len(tr.get()) == 1 })
	// A session parked for an hour lives through the map's copy and is woken from the new one.
	survivor := &parking{n: 1, wait: time.Hour}
	if _, err := s.submit("survivor", "b", survivor.step); err != nil {
		t.Fatal(err)
	}
	const backlog = 4 * shrinkEntriesFrom
	for i := range backlog {
		id := fmt.Sprintf("s%d", i)
		if _, err := s.submit(id, "a", done(tr, id)); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	peak := s.peak.Max()
	s.mu.Unlock()
	if peak != backlog+2 {
		t.Fatalf("peak %d, want %d", peak, backlog+2)
	}
	close(release)
	waitFor(t, "the backlog", func() bool { return len(tr.get()) == backlog+1 })
	waitFor(t, "the survivor to park", func() bool { return survivor.count() == 1 })
	s.mu.Lock()
	left, peak := len(s.entries), s.peak.Max()
	s.mu.Unlock()
	if left != 1 || peak > backlog/4 {
		t.Fatalf("%d entries left with a peak of %d, want the parked survivor and the map made anew (peak at most %d)", left, peak, backlog/4)
	}
	s.wake("survivor")
	waitFor(t, "the survivor's wake-up from the new map", func() bool { return survivor.count() == 2 })
	// The scheduler goes on as before.
	if _, err := s.submit("after", "a", done(tr, "after")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "after", func() bool { return slices.Contains(tr.get(), "after") })
}

// TestSchedulerServesSessionsUnderWayFirst: a client's woken sessions go before its new ids, but
// a new id waits for at most freshEvery of them.
func TestSchedulerServesSessionsUnderWayFirst(t *testing.T) {
	s := newScheduler(1, 0, 0, nil)
	defer s.stop()
	tr := &trace{}
	// parkOnce parks its session after the first step and ends it after the second.
	parkOnce := func(id string) func(context.Context) stepResult {
		steps := 0
		return func(context.Context) stepResult {
			steps++
			if steps == 1 {
				return stepResult{park: true, wait: time.Hour}
			}
			tr.add(id)
			return stepResult{}
		}
	}
	var underWay []string
	for i := range freshEvery + 2 {
		id := fmt.Sprintf("w%d", i)
		underWay = append(underWay, id)
		if _, err := s.submit(id, "a", parkOnce(id)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every session to park", func() bool { _, _, parked := s.counts(); return parked == len(underWay) })
	release := make(chan struct{})
	if _, err := s.submit("hold", "a", blocking(tr, "hold", release)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slot to be held", func() bool { return len(tr.get()) == 1 })
	for _, id := range []string{"f0", "f1", "f2"} {
		if _, err := s.submit(id, "a", done(tr, id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range underWay {
		s.wake(id)
	}
	close(release)
	waitFor(t, "every step", func() bool { return len(tr.get()) == 1+len(underWay)+3 })
	want := append([]string{"hold"}, underWay[:freshEvery]...)
	want = append(want, "f0")
	want = append(want, underWay[freshEvery:]...)
	want = append(want, "f1", "f2")
	if got := tr.get(); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
