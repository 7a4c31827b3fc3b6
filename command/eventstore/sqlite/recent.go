package sqlite

import (
	"bytes"
	"math"
	"sync"
	"time"

	"github.com/samla/samla/eventschema"
)

// maxRecentEvents and maxRecentBytes bound what recentEvents keeps for a subscription that
// lags behind: beyond them its oldest events are dropped, and a subscription that needs them
// reads them from the file, as it always could.
const (
	maxRecentEvents = 4096
	maxRecentBytes  = 4 << 20
)

// recentEvents keeps the events of the last commits that some live subscription has not read
// yet, exactly as ReadAll would return them, so that a subscription following the head (the
// relay, woken by every commit) takes what was just committed from memory instead of reading it
// back from the file: that read-back was 5 % of the CPU of a run of completed collections (a
// query, a row scan and a dozen allocations an event inside the driver).
//
// It holds nothing while no subscription runs, and only what the slowest one has still to read
// while they do; positions in it are contiguous, so it answers a read after a position only when
// it holds the very next one and otherwise leaves the read to the file.
type recentEvents struct {
	mu     sync.Mutex
	events []eventschema.Envelope // contiguous positions, ascending
	bytes  int                    // the payload bytes of events
	// cursors are the live subscriptions' positions: everything each has read.
	cursors map[*recentCursor]struct{}
	// served counts the events read from memory (tests look).
	served int
}

// recentCursor is one subscription's place in recentEvents.
type recentCursor struct{ after uint64 }

func (r *recentEvents) subscribe(after uint64) *recentCursor {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &recentCursor{after: after}
	if r.cursors == nil {
		r.cursors = map[*recentCursor]struct{}{}
	}
	r.cursors[c] = struct{}{}
	return c
}

// wanted reports whether a subscription runs, for which a commit's events are worth keeping.
func (r *recentEvents) wanted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cursors) > 0
}

func (r *recentEvents) unsubscribe(c *recentCursor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cursors, c)
	r.trimLocked()
}

// committed takes the events a commit wrote, in position order. Stored must be the envelopes
// as the file now holds them (storable, at their stream, revision and position).
func (r *recentEvents) committed(stored []eventschema.Envelope) {
	if len(stored) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cursors) == 0 {
		return
	}
	if n := len(r.events); n > 0 && r.events[n-1].Position+1 != stored[0].Position {
		// Not the next positions (cannot happen while this store is the file's only writer):
		// start over rather than leave a gap a reader would skip.
		r.dropLocked(n)
	}
	for _, e := range stored {
		r.events = append(r.events, e)
		r.bytes += len(e.Payload)
	}
	if over := len(r.events) - maxRecentEvents; over > 0 {
		r.dropLocked(over)
	}
	for r.bytes > maxRecentBytes && len(r.events) > 0 {
		r.dropLocked(1)
	}
	r.trimLocked()
}

// read returns up to limit events after c's position and moves c past them, when it holds the
// event right after that position; ok false leaves the read to the file (and c where it was).
func (r *recentEvents) read(c *recentCursor, limit int) (events []eventschema.Envelope, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.events)
	if n == 0 || limit <= 0 {
		return nil, false
	}
	first, last := r.events[0].Position, r.events[n-1].Position
	if c.after+1 < first || c.after >= last {
		return nil, false
	}
	i := int(c.after + 1 - first)
	j := min(n, i+limit)
	events = append([]eventschema.Envelope(nil), r.events[i:j]...)
	r.served += len(events)
	return events, true
}

// advance records that c's subscription has read everything up to after, so that what every
// subscription has read is let go.
func (r *recentEvents) advance(c *recentCursor, after uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.after = after
	r.trimLocked()
}

// trimLocked drops the events every live subscription has read (all of them when none runs).
func (r *recentEvents) trimLocked() {
	if len(r.events) == 0 {
		return
	}
	if len(r.cursors) == 0 {
		r.dropLocked(len(r.events))
		return
	}
	low := uint64(math.MaxUint64)
	for c := range r.cursors {
		low = min(low, c.after)
	}
	first := r.events[0].Position
	if low < first {
		return
	}
	r.dropLocked(min(len(r.events), int(low-first+1)))
}

// dropLocked drops the oldest n events.
func (r *recentEvents) dropLocked(n int) {
	for _, e := range r.events[:n] {
		r.bytes -= len(e.Payload)
	}
	if n == len(r.events) {
		// A fresh slice, so that a burst's backing array does not outlive the burst.
		r.events, r.bytes = nil, 0
		return
	}
	clear(r.events[:n])
	r.events = r.events[n:]
}

// storable is e as the file keeps it, for recentEvents: the time at the millisecond the column
// keeps, in UTC, and a payload of its own (the caller's slice is not the store's to keep). Append
// makes it in the caller's goroutine, off the single writer.
func storable(e eventschema.Envelope) eventschema.Envelope {
	e.OccurredAt = time.UnixMilli(e.OccurredAt.UnixMilli()).UTC()
	e.Payload = bytes.Clone(e.Payload)
	return e
}
