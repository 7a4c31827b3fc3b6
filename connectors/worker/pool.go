package worker

import (
	"context"
	"sync"
	"time"
)

// pool is the concurrency machinery the three process managers (Worker, ConsentWorker,
// CancellationWorker) share: at most one session goroutine per id, at most MaxSessions at once,
// all under one lifetime that stop cancels and waits for, and a timer per id that starts a
// session when it fires. The workers keep what differs (what a session does, their logs and
// metrics).
type pool struct {
	// ctx is the lifetime of every session: sessions outlive the call that started them (a
	// consumer's batch, a sweep) and end only when the worker stops.
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}

	// mu is the owning worker's mutex, not the pool's own, so that a worker's own state (its
	// withdrawals) changes atomically with stopped: nothing is armed or started after stop.
	// It guards the fields below; the owner reads stopped and adds to wg under it.
	mu      *sync.Mutex
	running map[string]bool // ids with a session goroutine here
	// again, nil unless the pool was built to rerun, holds the ids whose running session was
	// asked for again: the goroutine runs it once more, so that a request that came while a
	// session read a remote state it may have missed is not lost.
	again map[string]bool
	// timers are the armed timers (see after), by id.
	timers  map[string]*time.Timer
	stopped bool
	wg      sync.WaitGroup
}

// newPool builds a pool of at most maxSessions sessions guarded by the owner's mu; rerun has a
// start that finds its id running make that goroutine run the session again when it is done.
func newPool(mu *sync.Mutex, maxSessions int, rerun bool) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{ctx: ctx, cancel: cancel, slots: make(chan struct{}, maxSessions), mu: mu,
		running: map[string]bool{}, timers: map[string]*time.Timer{}}
	if rerun {
		p.again = map[string]bool{}
	}
	return p
}

// start runs session in a goroutine for id, once a slot is free, unless id runs already (then,
// in rerun mode, the running goroutine runs it again). It waits for a slot until ctx ends or the
// pool stops, and returns ErrStopped once stopped, so that a consumer does not commit events no
// session was started for.
func (p *pool) start(ctx context.Context, id string, session func()) error {
	if busy, err := p.busy(id); busy || err != nil {
		return err
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.ctx.Done():
		return ErrStopped
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Stop or another start may have come while this one waited for the slot.
	if p.stopped || p.running[id] {
		<-p.slots
		if p.stopped {
			return ErrStopped
		}
		p.markAgain(id)
		return nil
	}
	p.running[id] = true
	p.wg.Add(1)
	go p.loop(id, session)
	return nil
}

// busy reports whether id runs already (marking it to run again in rerun mode), or ErrStopped.
func (p *pool) busy(id string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false, ErrStopped
	}
	if p.running[id] {
		p.markAgain(id)
		return true, nil
	}
	return false, nil
}

// markAgain has id's running goroutine run once more (rerun mode only); p.mu is held.
func (p *pool) markAgain(id string) {
	if p.again != nil {
		p.again[id] = true
	}
}

func (p *pool) loop(id string, session func()) {
	defer p.wg.Done()
	for {
		session()
		p.mu.Lock()
		again := p.again[id] && !p.stopped
		delete(p.again, id)
		if !again {
			delete(p.running, id)
			p.mu.Unlock()
			<-p.slots
			return
		}
		p.mu.Unlock()
	}
}

// after arms a timer that calls fire (outside mu) at at, by the clock now gives; a timer armed
// before for id is replaced. Nothing is armed once the pool stopped. A timer that fires drops
// itself from the armed ones first.
func (p *pool) after(id string, at, now time.Time, fire func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if t, ok := p.timers[id]; ok {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(at.Sub(now), func() {
		p.mu.Lock()
		if p.timers[id] == t {
			delete(p.timers, id)
		}
		p.mu.Unlock()
		fire()
	})
	p.timers[id] = t
}

// cancelTimer drops id's timer, if one is armed.
func (p *pool) cancelTimer(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.timers[id]; ok {
		t.Stop()
		delete(p.timers, id)
	}
}

// armed reports whether id has a timer; armedCount how many ids have one.
func (p *pool) armed(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.timers[id]
	return ok
}

func (p *pool) armedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.timers)
}

// stop marks the pool stopped, drops every timer, cancels every session and waits until they
// have returned. It is idempotent.
func (p *pool) stop() {
	p.mu.Lock()
	p.stopped = true
	for id, t := range p.timers {
		t.Stop()
		delete(p.timers, id)
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// active reports how many ids have a session goroutine now.
func (p *pool) active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.running)
}

func (p *pool) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// run is a worker's Run: it calls sweep (when set) at once and every interval, and blocks until
// ctx ends or the pool stops; then it calls stop (the worker's Stop, which may release more than
// the pool) and waits for the sweep to return. Its sweeps (consents, cancellations) have no
// follow-up: a cancellation's sweep reads the signing provider for every id it lists.
func (p *pool) run(ctx context.Context, interval time.Duration, sweep func(context.Context) bool, stop func()) {
	runSweeps(ctx, p.ctx, interval, interval, sweep, stop)
}

// sweepFollowUp is the wait before the collection worker's next sweep when the last one offered
// a full page that was taken whole, so that more open ids may follow at once. A page of ids the
// worker holds already (parked sessions) counts too: with more open collections than a round's
// pages take in a sweep interval, the sweep lists a page a second, one read-model query.
const sweepFollowUp = time.Second

// runSweeps is the loop of pool.run and scheduler.run: sweep at once and every interval until
// ctx or the lifetime ends, then stop, then wait for the sweep to return. A sweep that reports
// more (a full page taken whole) is followed after followUp instead (the collection worker's
// sweepFollowUp): the collections a burst left to the sweep (its client's queue was full) were
// taken a page of 1,000 every 15 s, ~67 a second, while the slots stood idle for two minutes
// after a 30 s POST load.
func runSweeps(ctx, lifetime context.Context, interval, followUp time.Duration, sweep func(context.Context) bool, stop func()) {
	sweeping := make(chan struct{})
	go func() {
		defer close(sweeping)
		if sweep == nil {
			return
		}
		t := time.NewTimer(interval)
		defer t.Stop()
		for {
			wait := interval
			if sweep(ctx) {
				wait = min(interval, followUp)
			}
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-lifetime.Done():
				return
			case <-t.C:
			}
		}
	}()
	select {
	case <-ctx.Done():
	case <-lifetime.Done():
	}
	stop()
	<-sweeping
}
