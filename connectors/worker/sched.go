package worker

import (
	"context"
	"sync"
	"time"

	"github.com/samla/samla/platform/shrink"
)

// scheduler runs the collection worker's sessions as short steps. A step holds one of at most
// maxActive slots only while it works (a claim, a call to the company, an append); a session
// that then waits (for the user, the client's input, the company's next state) is parked: it
// holds no slot and no goroutine, only its entry and a timer, and is queued again when the
// timer fires (its next look, never later than its deadline) or when wake is called (the
// event that continues it arrived).
//
// The slots follow the CPU between a floor and maxActive (adaptSlots, slots.go).
//
// Steps ready to run wait in one queue per client, and the queues are served in turn (round
// robin), optionally with at most perClient slots per client: one client's burst, or its
// thousands of parked sessions waking, cannot delay another client's new collection by more
// than one slot turnover. Within a client, the next steps of sessions already under way go
// before new ids (clientQueue.pop says how far): a burst is worked through a few hundred
// sessions at a time instead of all of them at once, each held until the whole backlog had had
// its turn.
//
// Memory is bounded by the sessions themselves: a parked or queued session is one entry, and
// the new ids a client may have waiting are at most queueLimit; a new id refused by a full
// queue is not lost, since the event store still lists it non-final and the sweep submits it
// again.
type scheduler struct {
	// ctx is the lifetime of every step; stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	maxActive, perClient, queueLimit int
	// observe, when set, is told the counts after every change (under mu: keep it cheap).
	observe func(active, queued, parked int)
	// limitChanged, when set, is told the slot limit after adaptSlots changed it (under mu).
	limitChanged func(limit int)

	mu      sync.Mutex
	entries map[string]*schedEntry // every id with a session here: queued, active or parked
	// peak is the most entries held since the map was last made anew (forget).
	peak    shrink.Peak
	clients map[string]*clientQueue
	// ring are the clients with queued steps, in the order they are served.
	ring []*clientQueue
	// limit is the slots steps may take now: maxActive, or less while adaptSlots finds the CPU
	// saturated (slots.go); floor is the least it goes to.
	limit, floor int
	active       int
	queued       int
	parked       int
	stopped      bool
	wg           sync.WaitGroup
}

type entryState uint8

const (
	entryQueued entryState = iota
	entryActive
	entryParked
)

// stepResult is what a step tells the scheduler: park the session for wait (its next look),
// or drop it (it ended, or was left for a later sweep). client, when set, is the session's
// client as the step found it, which a session submitted without one (by a sweep) learns.
type stepResult struct {
	park   bool
	wait   time.Duration
	client string
}

// schedEntry is one session known to the scheduler.
type schedEntry struct {
	id, client string
	state      entryState
	// fresh: queued and never run, so counted against its client's queueLimit.
	fresh bool
	// again: woken while its step ran; it is queued again at once instead of parked.
	again bool
	timer *time.Timer
	step  func(context.Context) stepResult
}

// clientQueue is one client's queued steps and active slots.
type clientQueue struct {
	client string
	// next are the queued steps of sessions that have run before (woken, their timer fired);
	// fresh the new ids, never run, which count against the scheduler's queueLimit.
	next, fresh fifo
	// nextRun counts the steps taken from next in a row while fresh ids waited.
	nextRun int
	active  int
	inRing  bool
}

// freshEvery is how many steps of sessions under way a client's queue serves in a row before a
// new id of the same client, when both wait. Sessions under way first keep a burst from being
// started all at once: with one FIFO, 30,000 POSTs in 30 s queued up to ~28,000 steps and put
// thousands of sessions under way together, each holding its collection and the company's
// order until the queue had turned over (the heap peaked at ~350 MB; ~200 MB now). Strict
// priority would starve a client's new ids while thousands of its parked sessions wake for
// their looks; a new id every freshEvery steps bounds that wait, and a collection that
// completes takes ~5 steps, so under a burst new ids start about as fast as sessions end.
const freshEvery = 8

func (q *clientQueue) len() int { return q.next.len() + q.fresh.len() }

func (q *clientQueue) push(e *schedEntry) {
	if e.fresh {
		q.fresh.push(e)
	} else {
		q.next.push(e)
	}
}

// pop takes the next step of a session under way, or a new id when none waits or when
// freshEvery steps under way went before it in a row.
func (q *clientQueue) pop() *schedEntry {
	if q.next.len() > 0 && (q.fresh.len() == 0 || q.nextRun < freshEvery) {
		if q.fresh.len() > 0 {
			q.nextRun++
		}
		return q.next.pop()
	}
	q.nextRun = 0
	return q.fresh.pop()
}

// fifo is a queue of entries that reuses its backing array.
type fifo struct {
	queue []*schedEntry
	head  int
}

func (f *fifo) len() int { return len(f.queue) - f.head }

func (f *fifo) push(e *schedEntry) { f.queue = append(f.queue, e) }

func (f *fifo) pop() *schedEntry {
	e := f.queue[f.head]
	f.queue[f.head] = nil
	f.head++
	switch {
	case f.head == len(f.queue):
		f.queue, f.head = f.queue[:0], 0
	case f.head > 64 && f.head*2 > len(f.queue):
		// Reclaim the consumed front so that a long-lived busy queue does not grow.
		n := copy(f.queue, f.queue[f.head:])
		clear(f.queue[n:])
		f.queue, f.head = f.queue[:n], 0
	}
	return e
}

func newScheduler(maxActive, perClient, queueLimit int, observe func(active, queued, parked int)) *scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	return &scheduler{ctx: ctx, cancel: cancel, maxActive: maxActive, limit: maxActive, perClient: perClient, queueLimit: queueLimit,
		observe: observe, entries: map[string]*schedEntry{}, peak: shrink.Peak{Floor: shrinkEntriesFrom}, clients: map[string]*clientQueue{}}
}

// submit queues the first step of a session for id unless id has a session here already
// (queued, running or parked: it goes on as it is). accepted is false when client's queue of
// new ids is full: the id is left to the sweep. It returns ErrStopped once stopped.
func (s *scheduler) submit(id, client string, first func(context.Context) stepResult) (accepted bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false, ErrStopped
	}
	if _, ok := s.entries[id]; ok {
		return true, nil
	}
	q := s.client(client)
	if s.queueLimit > 0 && q.fresh.len() >= s.queueLimit {
		s.dropIfIdle(q)
		return false, nil
	}
	e := &schedEntry{id: id, client: client, step: first, fresh: true}
	s.entries[id] = e
	s.peak.Saw(len(s.entries))
	s.enqueue(q, e)
	s.dispatch()
	return true, nil
}

// wake queues a parked session's next step now, ahead of its timer; a session whose step runs
// is queued again as soon as that step parks it. Unknown and queued ids are left as they are.
func (s *scheduler) wake(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok || s.stopped {
		return
	}
	switch e.state {
	case entryActive:
		e.again = true
	case entryParked:
		e.timer.Stop()
		s.unpark(e)
		s.dispatch()
	}
}

// fire is a parked entry's timer.
func (s *scheduler) fire(e *schedEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || e.state != entryParked || s.entries[e.id] != e {
		return // woken before, or stopped
	}
	s.unpark(e)
	s.dispatch()
}

func (s *scheduler) unpark(e *schedEntry) {
	e.timer = nil
	s.parked--
	s.enqueue(s.client(e.client), e)
}

// client is q for client, created when missing; mu is held.
func (s *scheduler) client(client string) *clientQueue {
	q, ok := s.clients[client]
	if !ok {
		q = &clientQueue{client: client}
		s.clients[client] = q
	}
	return q
}

// shrinkEntriesFrom is the peak below which the entries map is never made anew: small maps
// cost nothing worth a copy.
const shrinkEntriesFrom = 1024

// forget drops the session of id, and makes the entries map anew once it holds a quarter of its
// peak: a Go map keeps the room of its largest size, so a burst's backlog (thousands of queued
// sessions) left a map of that size behind for good. The copy takes what is left, at most a
// quarter of the deletions since the last one.
func (s *scheduler) forget(id string) {
	delete(s.entries, id)
	if !s.peak.Due(len(s.entries)) {
		return
	}
	s.entries = shrink.Map(s.entries)
	s.peak.Reset(len(s.entries))
}

// dropIfIdle forgets a client with nothing queued and nothing running, so that the clients map
// holds only clients with work here (a client whose sessions are all parked has none: its
// queue is made anew when one wakes); mu is held. A q the map no longer holds is left alone: the
// client may have a new queue since.
func (s *scheduler) dropIfIdle(q *clientQueue) {
	if s.clients[q.client] == q && q.len() == 0 && q.active == 0 && !q.inRing {
		delete(s.clients, q.client)
	}
}

func (s *scheduler) enqueue(q *clientQueue, e *schedEntry) {
	e.state = entryQueued
	q.push(e)
	s.queued++
	if !q.inRing {
		q.inRing = true
		s.ring = append(s.ring, q)
	}
	s.changed()
}

// dispatch starts queued steps while slots are free, one per client in turn; mu is held.
//
// Past the adapted limit (slots.go) a client still starts steps while it runs fewer than its
// share of the limit (the limit over the clients with queued or running steps, at least one),
// up to twice the limit: a limit lowered while the CPU is saturated holds back the clients that
// take more than their share, not another client's new collections, which would otherwise wait
// for every step above the new limit to end (found in review), and then get a slot only in
// turn with the busy client's waiting steps (beside 10,000 collections waiting for a contact
// form, another client's new ones took 1.18× as long). The bound keeps hundreds of clients with
// a step each from taking every slot while the CPU is saturated (found in review).
func (s *scheduler) dispatch() {
	share := max(1, s.limit/max(1, len(s.clients)))
	overshoot := min(s.maxActive, 2*s.limit)
	for s.active < s.maxActive && len(s.ring) > 0 {
		started := false
		for n := len(s.ring); n > 0 && s.active < s.maxActive; n-- {
			q := s.ring[0]
			s.ring[0] = nil
			s.ring = s.ring[1:]
			// The ids a sweep or a restart found before their first step told whose they
			// are queue together under "": capping them as one client would leave slots idle
			// while their deadlines run (found in review).
			if s.perClient > 0 && q.client != "" && q.active >= s.perClient {
				s.ring = append(s.ring, q) // at its cap: its turn passes
				continue
			}
			if s.active >= s.limit && (q.active >= share || s.active >= overshoot) {
				s.ring = append(s.ring, q) // past the limit: only clients below their share
				continue
			}
			e := q.pop()
			if q.len() > 0 {
				s.ring = append(s.ring, q)
			} else {
				q.inRing = false
			}
			s.start(q, e)
			started = true
		}
		if !started {
			return // every client with queued steps is at its cap, or running past the limit
		}
	}
}

func (s *scheduler) start(q *clientQueue, e *schedEntry) {
	e.fresh = false
	e.state = entryActive
	s.queued--
	s.active++
	q.active++
	s.changed()
	s.wg.Add(1)
	go s.run(q, e)
}

func (s *scheduler) run(q *clientQueue, e *schedEntry) {
	defer s.wg.Done()
	r := e.step(s.ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	q.active--
	switch {
	case !r.park || s.stopped:
		s.forget(e.id)
		s.dropIfIdle(q)
	default:
		if r.client != "" && r.client != e.client {
			// Submitted by a sweep without its client: from now on it queues as its client's.
			s.dropIfIdle(q)
			e.client = r.client
		}
		if e.again {
			e.again = false
			s.enqueue(s.client(e.client), e)
			break
		}
		e.state = entryParked
		s.parked++
		e.timer = time.AfterFunc(r.wait, func() { s.fire(e) })
		if cq, ok := s.clients[e.client]; ok {
			s.dropIfIdle(cq) // its last running step parked: no work here until one wakes
		}
	}
	s.changed()
	s.dispatch()
}

func (s *scheduler) changed() {
	if s.observe != nil {
		s.observe(s.active, s.queued, s.parked)
	}
}

// counts reports the steps running (slots taken), queued and the sessions parked.
func (s *scheduler) counts() (active, queued, parked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active, s.queued, s.parked
}

// stop drops every queued and parked session (a restart resumes them from the event store),
// cancels the running steps and waits for them. It returns how many were parked. Idempotent.
func (s *scheduler) stop() (parked int) {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		parked = s.parked
		for id, e := range s.entries {
			if e.state == entryActive {
				continue // its run removes it
			}
			if e.timer != nil {
				e.timer.Stop()
			}
			delete(s.entries, id)
		}
		for _, q := range s.ring {
			q.next, q.fresh, q.nextRun, q.inRing = fifo{}, fifo{}, 0, false
		}
		s.ring = nil
		s.queued, s.parked = 0, 0
		s.changed()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return parked
}
