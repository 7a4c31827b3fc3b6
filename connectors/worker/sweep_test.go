package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
)

// fakeActive is a read model's non-final ids, oldest first, then by id, as ListNonFinal pages
// them; it records the position of every call.
type fakeActive struct {
	mu    sync.Mutex
	rows  []activeRow
	calls []string // the afterID of each call, "" from the oldest
	fail  error    // the next call fails with it
}

type activeRow struct {
	createdAt time.Time
	id        string
}

var sweepBase = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// newFakeActive holds ids c-00 … c-(n-1), two created at each minute, the id breaking the tie.
func newFakeActive(n int) *fakeActive {
	a := &fakeActive{}
	for i := range n {
		a.add(fmt.Sprintf("c-%02d", i), sweepBase.Add(time.Duration(i/2)*time.Minute))
	}
	return a
}

func (a *fakeActive) add(id string, createdAt time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rows = append(a.rows, activeRow{createdAt: createdAt, id: id})
	slices.SortFunc(a.rows, func(x, y activeRow) int {
		if c := x.createdAt.Compare(y.createdAt); c != 0 {
			return c
		}
		return strings.Compare(x.id, y.id)
	})
}

func (a *fakeActive) ListNonFinal(_ context.Context, afterCreatedAt time.Time, afterID string, limit int) ([]string, time.Time, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, afterID)
	if err := a.fail; err != nil {
		a.fail = nil
		return nil, time.Time{}, err
	}
	var (
		ids  []string
		last time.Time
	)
	for _, r := range a.rows {
		if afterID != "" && (r.createdAt.Before(afterCreatedAt) || r.createdAt.Equal(afterCreatedAt) && r.id <= afterID) {
			continue
		}
		if limit > 0 && len(ids) == limit {
			break
		}
		ids, last = append(ids, r.id), r.createdAt
	}
	return ids, last, nil
}

func (a *fakeActive) callCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.calls)
}

// offers records the pages a cursor offers; refuse, when set, turns a page down once.
type offers struct {
	pages  [][]string
	refuse func(page []string) bool
}

func (o *offers) offer(_ context.Context, ids []string) bool {
	if o.refuse != nil && o.refuse(ids) {
		o.refuse = nil
		return false
	}
	o.pages = append(o.pages, slices.Clone(ids))
	return true
}

func (o *offers) flat() []string { return slices.Concat(o.pages...) }

func ids(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("c-%02d", i))
	}
	return out
}

func newCursor(a *fakeActive, o *offers, limit int) *sweepCursor {
	return &sweepCursor{list: a.ListNonFinal, limit: limit, offer: o.offer, log: slog.New(slog.DiscardHandler), what: "collections"}
}

// TestSweepCursorPagesThroughEveryID: with more open ids than the limit, each later sweep offers
// the page after the last, so that every id is offered within a round however long the oldest
// stay open; a short page wraps the cursor to the oldest.
func TestSweepCursorPagesThroughEveryID(t *testing.T) {
	a, o := newFakeActive(8), &offers{}
	c := newCursor(a, o, 3)
	c.begun = true // past the start's round: a page per sweep
	for range 3 {
		c.sweep(context.Background())
	}
	if want := [][]string{ids(0, 3), ids(3, 6), ids(6, 8)}; !slices.EqualFunc(o.pages, want, slices.Equal) {
		t.Fatalf("pages %v, want %v", o.pages, want)
	}
	// Wrapped: the next sweep starts again at the oldest.
	c.sweep(context.Background())
	if got := o.pages[3]; !slices.Equal(got, ids(0, 3)) {
		t.Fatalf("after the short page: %v, want the oldest %v", got, ids(0, 3))
	}
	// An id started after the position is offered in this round, behind the older ones.
	a.add("c-new", sweepBase.Add(time.Hour))
	c.sweep(context.Background())
	c.sweep(context.Background())
	if got := o.pages[5]; !slices.Equal(got, []string{"c-06", "c-07", "c-new"}) {
		t.Fatalf("third page of the round: %v", got)
	}
	// A full last page is followed by an empty one, which wraps too.
	c.sweep(context.Background())
	c.sweep(context.Background())
	if got, want := a.calls[len(a.calls)-1], ""; got != want || len(o.pages[7]) != 3 || o.pages[7][0] != "c-00" {
		t.Fatalf("after the empty page: call after %q, page %v", got, o.pages[7])
	}
}

// TestSweepCursorStartReadsTheWholeRound: the first sweep (Run's start, a restart's) offers
// every page until the cursor wraps; the next offers one page again, the oldest.
func TestSweepCursorStartReadsTheWholeRound(t *testing.T) {
	a, o := newFakeActive(10), &offers{}
	c := newCursor(a, o, 3)
	c.sweep(context.Background())
	if got := o.flat(); !slices.Equal(got, ids(0, 10)) || len(o.pages) != 4 {
		t.Fatalf("start sweep offered %v in %d pages, want every id in 4", got, len(o.pages))
	}
	c.sweep(context.Background())
	if len(o.pages) != 5 || !slices.Equal(o.pages[4], ids(0, 3)) {
		t.Fatalf("the sweep after the start: %v", o.pages[4:])
	}
	// Without a limit a page is every id, and every sweep a whole round.
	a2, o2 := newFakeActive(5), &offers{}
	c2 := newCursor(a2, o2, 0)
	c2.sweep(context.Background())
	c2.sweep(context.Background())
	if want := [][]string{ids(0, 5), ids(0, 5)}; !slices.EqualFunc(o2.pages, want, slices.Equal) || a2.callCount() != 2 {
		t.Fatalf("unlimited: pages %v in %d calls", o2.pages, a2.callCount())
	}
}

// TestSweepCursorOffersAPageNotTakenAgain: a page the worker did not take in full (a full client
// queue) stops the start's round there; the next sweep offers it again and goes on with the
// round, rather than pass over it for a whole round. After the round, a failed listing keeps
// the position too.
func TestSweepCursorOffersAPageNotTakenAgain(t *testing.T) {
	a := newFakeActive(10)
	o := &offers{refuse: func(page []string) bool { return page[0] == "c-03" }}
	c := newCursor(a, o, 3)
	c.sweep(context.Background())
	if got := o.flat(); !slices.Equal(got, ids(0, 3)) || a.callCount() != 2 {
		t.Fatalf("start sweep offered %v in %d calls, want the first page then a stop", got, a.callCount())
	}
	c.sweep(context.Background())
	if want := [][]string{ids(0, 3), ids(3, 6), ids(6, 9), ids(9, 10)}; !slices.EqualFunc(o.pages, want, slices.Equal) {
		t.Fatalf("next sweep: pages %v, want the refused page again and the rest of the round %v", o.pages, want)
	}
	c.sweep(context.Background()) // a page a sweep now: the oldest
	a.fail = errors.New("read model down")
	c.sweep(context.Background())
	c.sweep(context.Background())
	if got := o.pages[5]; !slices.Equal(got, ids(3, 6)) || len(o.pages) != 6 {
		t.Fatalf("after a failed listing: pages %v, want %v last", o.pages, ids(3, 6))
	}
}

// TestSweepCursorStartRoundSurvivesAFailedListing: a read model that cannot be read at start
// (or halfway through the start's round) does not leave the round to a page per interval: the
// next sweep reads every page from where the round stopped.
func TestSweepCursorStartRoundSurvivesAFailedListing(t *testing.T) {
	a, o := newFakeActive(10), &offers{}
	a.fail = errors.New("read model not up yet")
	c := newCursor(a, o, 3)
	c.sweep(context.Background())
	if len(o.pages) != 0 {
		t.Fatalf("a failed start listing offered %v", o.pages)
	}
	c.sweep(context.Background())
	if got := o.flat(); !slices.Equal(got, ids(0, 10)) {
		t.Fatalf("the sweep after a failed start offered %v, want every id", got)
	}
	c.sweep(context.Background())
	if got := o.pages[len(o.pages)-1]; len(o.pages) != 5 || !slices.Equal(got, ids(0, 3)) {
		t.Fatalf("after the round: pages %v, want one page, the oldest", o.pages)
	}
}

// TestSweepCursorStartStopsWithItsContext: a start sweep ends with its context, between pages.
func TestSweepCursorStartStopsWithItsContext(t *testing.T) {
	a := newFakeActive(10)
	ctx, cancel := context.WithCancel(context.Background())
	o := &offers{}
	c := &sweepCursor{list: a.ListNonFinal, limit: 3, log: slog.New(slog.DiscardHandler), what: "collections",
		offer: func(ctx context.Context, ids []string) bool {
			cancel() // the worker stops while the first page is offered
			return o.offer(ctx, ids)
		}}
	c.sweep(ctx)
	if a.callCount() != 1 || len(o.pages) != 1 {
		t.Fatalf("%d calls, %d pages after the context ended", a.callCount(), len(o.pages))
	}
}

// blockedRepo is a Repository whose Load holds its step until the worker stops, so that the
// sessions a sweep submits stay in the scheduler, running or queued, for the test to count.
type blockedRepo struct{}

func (blockedRepo) Load(ctx context.Context, _ string) (*collection.Collection, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (r blockedRepo) Refresh(ctx context.Context, id string, _ *collection.Collection) (*collection.Collection, error) {
	return r.Load(ctx, id)
}

func (blockedRepo) Update(context.Context, string, repository.Meta, func(*collection.Collection) error,
	...repository.UpdateOption) (*collection.Collection, eventstore.AppendResult, error) {
	return nil, eventstore.AppendResult{}, errors.New("blockedRepo: no update expected")
}

// noCatalog and noCompanies are never reached: every session waits in Load.
type noCatalog struct{}

func (noCatalog) Get(string) (company.Company, error) {
	return company.Company{}, errors.New("no catalog")
}

type noCompanies struct{ Companies }

func sweepWorker(t *testing.T, a *fakeActive, cfg Config) *Worker {
	t.Helper()
	cfg.WorkerID, cfg.Repo, cfg.Catalog, cfg.Companies, cfg.Active = "w1", blockedRepo{}, noCatalog{}, noCompanies{}, a
	cfg.MaxSessions = 1
	w := New(cfg)
	t.Cleanup(w.Stop)
	return w
}

// known lists the ids with a session in the worker's scheduler.
func (w *Worker) known() []string {
	w.sched.mu.Lock()
	defer w.sched.mu.Unlock()
	var out []string
	for id := range w.sched.entries {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestRunSweepsEveryPageAtStart: a restarted worker submits every open collection at Run's
// start, a page at a time, not a page per interval.
func TestRunSweepsEveryPageAtStart(t *testing.T) {
	a := newFakeActive(10)
	w := sweepWorker(t, a, Config{SweepLimit: 3, SweepInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	waitFor(t, "every collection submitted", func() bool { return len(w.known()) == 10 })
	if n := a.callCount(); n != 4 {
		t.Errorf("start sweep listed %d pages, want 4 (3+3+3+1)", n)
	}
	cancel()
	<-done
}

// TestSweepReachesNewCollectionsBehindOpenOnes: after the start, every sweep goes on after the
// page before, so that collections newer than SweepLimit open ones, which stay open, are
// submitted within a round.
func TestSweepReachesNewCollectionsBehindOpenOnes(t *testing.T) {
	a := newFakeActive(10)
	w := sweepWorker(t, a, Config{SweepLimit: 3})
	ctx := context.Background()
	w.sweeper.sweep(ctx) // the start: all ten, which stay open (their sessions wait)
	for i := range 5 {
		a.add(fmt.Sprintf("n-%d", i), sweepBase.Add(time.Hour))
	}
	// 15 open: a round is 5 pages plus the wrapping one at most.
	for range 6 {
		w.sweeper.sweep(ctx)
	}
	if got := w.known(); len(got) != 15 {
		t.Fatalf("after a round of sweeps %d collections submitted (%v), want 15", len(got), got)
	}
}

// TestSweepKeepsTheClientQueueLimit: the sweep's ids queue as one client, under its queue
// limit; a page the queue refused is offered again once there is room, and the start's round
// stops there rather than list page after page that would be refused too.
func TestSweepKeepsTheClientQueueLimit(t *testing.T) {
	a := newFakeActive(10)
	w := sweepWorker(t, a, Config{SweepLimit: 3, ClientQueueLimit: 4})
	ctx := context.Background()
	w.sweeper.sweep(ctx)
	// One runs (waiting in Load), four queue; c-05 was refused, so page two is held.
	if got := w.known(); len(got) != 5 || a.callCount() != 2 {
		t.Fatalf("start sweep: %v submitted in %d calls, want 5 in 2", got, a.callCount())
	}
	w.sweeper.sweep(ctx)
	if got := a.calls[2]; got != "c-02" {
		t.Fatalf("the sweep after a refusal listed after %q, want after c-02 (page two again)", got)
	}
}

// TestSweepLimitIsAtMostTheQueueLimit: the sweep's ids queue as one client's, so a page larger
// than that queue could never be taken in full; New caps the page at it.
func TestSweepLimitIsAtMostTheQueueLimit(t *testing.T) {
	w := sweepWorker(t, newFakeActive(1), Config{SweepLimit: 50, ClientQueueLimit: 10})
	if w.cfg.SweepLimit != 10 || w.sweeper.limit != 10 {
		t.Fatalf("SweepLimit %d (cursor %d) beside ClientQueueLimit 10, want 10", w.cfg.SweepLimit, w.sweeper.limit)
	}
}

// TestSweepTellsWhenTheRoundGoesOn: a later sweep reports more while it took a full page whole,
// not after the short page that wraps the round, nor after a refused page (which waits for the
// interval, as a failed listing does).
func TestSweepTellsWhenTheRoundGoesOn(t *testing.T) {
	a, o := newFakeActive(7), &offers{}
	c := newCursor(a, o, 3)
	if c.sweep(context.Background()) {
		t.Fatal("the start's round (every page at once) reported more")
	}
	var got []bool
	for range 3 {
		got = append(got, c.sweep(context.Background()))
	}
	if want := []bool{true, true, false}; !slices.Equal(got, want) {
		t.Fatalf("more after the pages 3+3+1: %v, want %v", got, want)
	}
	o.refuse = func([]string) bool { return true }
	if c.sweep(context.Background()) {
		t.Fatal("a refused page reported more")
	}
	a.fail = errors.New("read model down")
	if c.sweep(context.Background()) {
		t.Fatal("a failed listing reported more")
	}
}

// TestRunSweepsFollowsAFullPageSoon: a sweep that reports more is followed after followUp, not
// after the interval; one that does not waits for the interval.
func TestRunSweepsFollowsAFullPageSoon(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	calls := 0
	sweep := func(context.Context) bool {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return calls <= 3 // three full pages, then the round wraps
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runSweeps(ctx, context.Background(), time.Hour, time.Millisecond, sweep, func() {})
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return calls }
	waitFor(t, "the follow-up sweeps", func() bool { return count() == 4 })
	time.Sleep(50 * time.Millisecond)
	if n := count(); n != 4 {
		t.Fatalf("%d sweeps, want 4: the one after the wrapping page waits for the hour", n)
	}
	cancel()
	<-done
}
