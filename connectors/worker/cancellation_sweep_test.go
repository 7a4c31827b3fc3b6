package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
)

// The cancellation worker's sweep pages through the cancellations that still need their
// provider with the collection worker's sweepCursor (sweep_test.go); fakeActive serves as the
// read model, its ids standing for cancellations.

// blockedCancellations is a CancellationRepository whose Load holds its pass until the worker
// stops, so that the passes a sweep starts stay running for the test to count.
type blockedCancellations struct{}

func (blockedCancellations) Load(ctx context.Context, _ string) (*cancellation.Cancellation, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (blockedCancellations) Update(context.Context, string, repository.Meta, func(*cancellation.Cancellation) error,
	...repository.UpdateOption) (*cancellation.Cancellation, eventstore.AppendResult, error) {
	return nil, eventstore.AppendResult{}, errors.New("blockedCancellations: no update expected")
}

// fakeOpen is fakeActive as the cancellations read model: the same pages under the port's name.
type fakeOpen struct{ *fakeActive }

func (o fakeOpen) ListNeedingProvider(ctx context.Context, afterRequestedAt time.Time, afterID string, limit int) ([]string, time.Time, error) {
	return o.ListNonFinal(ctx, afterRequestedAt, afterID, limit)
}

// noClients and noSigning are never reached: every pass waits in Load.
type noClients struct{}

func (noClients) Load(context.Context, string) (*client.Client, error) {
	return nil, errors.New("no clients")
}

type noSigning struct{ SigningProvider }

func cancellationSweepWorker(t *testing.T, a *fakeActive, cfg CancellationConfig) *CancellationWorker {
	t.Helper()
	cfg.WorkerID, cfg.Repo, cfg.Clients, cfg.Catalog, cfg.Provider, cfg.Open = "w1", blockedCancellations{}, noClients{}, noCatalog{}, noSigning{}, fakeOpen{a}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = 100 // a slot for every pass: the sweep never waits
	}
	w := NewCancellationWorker(cfg)
	t.Cleanup(w.Stop)
	return w
}

// passes lists the ids with a pass running in the worker.
func (w *CancellationWorker) passes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for id := range w.pool.running {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestCancellationRunSweepsEveryPageAtStart: a restarted worker starts a pass for every open
// cancellation at Run's start, a page at a time, not a page per interval.
func TestCancellationRunSweepsEveryPageAtStart(t *testing.T) {
	a := newFakeActive(10)
	w := cancellationSweepWorker(t, a, CancellationConfig{SweepLimit: 3, SweepInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	waitFor(t, "a pass for every cancellation", func() bool { return len(w.passes()) == 10 })
	if n := a.callCount(); n != 4 {
		t.Errorf("start sweep listed %d pages, want 4 (3+3+3+1)", n)
	}
	cancel()
	<-done
}

// TestCancellationSweepReachesNewOnesBehindOpenOnes: after the start, every sweep goes on after
// the page before, so that cancellations newer than SweepLimit open ones (pending for weeks)
// are passed over within a round. The running passes of the older ones count as taken: the
// pool has them run once more, and the cursor moves on.
func TestCancellationSweepReachesNewOnesBehindOpenOnes(t *testing.T) {
	a := newFakeActive(10)
	w := cancellationSweepWorker(t, a, CancellationConfig{SweepLimit: 3})
	ctx := context.Background()
	w.sweeper.sweep(ctx) // the start: all ten, which stay open (their passes wait)
	for i := range 5 {
		a.add(fmt.Sprintf("n-%d", i), sweepBase.Add(time.Hour))
	}
	// 15 open: a round is 5 pages plus the wrapping one at most.
	for range 6 {
		w.sweeper.sweep(ctx)
	}
	if got := w.passes(); len(got) != 15 {
		t.Fatalf("after a round of sweeps %d cancellations passed over (%v), want 15", len(got), got)
	}
	if a.calls[4] != "" || a.calls[5] != "c-02" {
		t.Fatalf("listing positions %q, want the round from the oldest after the start's", a.calls)
	}
}

// TestCancellationSweepOffersAPageNotStartedAgain: the pool refuses no id, but waits for a slot;
// a sweep whose context ends meanwhile has not started the whole page, so the cursor stays and
// the next sweep lists the same page again rather than pass over its rest for a round.
func TestCancellationSweepOffersAPageNotStartedAgain(t *testing.T) {
	a := newFakeActive(10)
	w := cancellationSweepWorker(t, a, CancellationConfig{SweepLimit: 3, MaxSessions: 2})
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		w.sweeper.sweep(ctx) // c-00 and c-01 take the slots; c-02 waits until ctx ends
		cancel()
	}
	if got := w.passes(); !slices.Equal(got, ids(0, 2)) {
		t.Fatalf("passes %v, want %v", got, ids(0, 2))
	}
	if !slices.Equal(a.calls, []string{"", ""}) {
		t.Fatalf("listing positions %q, want the first page twice", a.calls)
	}
	if !w.offerSwept(context.Background(), ids(0, 2)) {
		t.Fatal("ids whose passes run were not taken")
	}
	w.Stop()
	if w.offerSwept(context.Background(), ids(5, 6)) {
		t.Fatal("a stopped worker took a page")
	}
}
