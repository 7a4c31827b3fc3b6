package worker

import (
	"context"
	"log/slog"
	"time"
)

// nonFinalPages reads a page of the ids a read model lists for a sweep (the non-final
// collections or consents, the cancellations that still need their provider), oldest first: up
// to limit after the id afterID created at afterCreatedAt (afterID "": from the oldest), and the
// creation time of the last id it returns (ActiveCollections.ListNonFinal,
// ActiveConsents.ListNonFinal, OpenCancellations.ListNeedingProvider).
type nonFinalPages func(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) (ids []string, lastCreatedAt time.Time, err error)

// sweepCursor pages a worker's sweep through the open ids of a read model, one page per
// sweep, each after the last id the sweep before offered. Listing the oldest limit ids at every
// sweep showed the same ones for as long as they stayed open (thousands waiting minutes for a
// contact form), and a newer id that needs the sweep (its worker restarted or died, its client's
// queue was full) waited until they had all ended; paged, every id is offered within
// ceil(open/limit)+1 sweeps, and a sweep's work stays bounded by the limit. A page shorter than
// the limit ends the round: the cursor wraps, and the next sweep starts again at the oldest.
//
// The first sweeps (Run's start, e.g. a restarted worker's) read a whole round, a page at a
// time, so that a restart re-arms every open session at once rather than a page per interval;
// a start round cut short (a failed listing, a page not taken) goes on at the next sweep.
//
// Only the sweep loop (runSweeps) uses a cursor: it needs no lock.
type sweepCursor struct {
	list  nonFinalPages
	limit int // <= 0: every id in one page
	// offer hands a page's ids to the worker. false means some were not taken (a full client
	// queue, a worker stopped or a context ended while it waited for a slot; offer logs why):
	// the cursor stays, and the next sweep offers the page again.
	offer func(ctx context.Context, ids []string) bool
	log   *slog.Logger
	what  string // what the ids are, for logs: "collections", "consents", "cancellations"

	// afterCreatedAt and afterID are the position of the last id offered; afterID "" is before
	// the oldest.
	afterCreatedAt time.Time
	afterID        string
	begun          bool
}

// sweepFunc is the sweep the worker's sweep loop runs: nil (no sweep) for a worker without a
// read model to sweep, whose cursor is nil.
func (c *sweepCursor) sweepFunc() func(context.Context) bool {
	if c == nil {
		return nil
	}
	return c.sweep
}

// sweep is one sweep: the whole round until a first round has been completed, one page at
// every later one. more tells that the page was full and taken whole, so that the round goes on
// after it: the sweep loop then sweeps again soon (runSweeps).
func (c *sweepCursor) sweep(ctx context.Context) (more bool) {
	if c.begun {
		_, wrapped, ok := c.page(ctx)
		return ok && !wrapped
	}
	offered := 0
	for ctx.Err() == nil {
		n, wrapped, ok := c.page(ctx)
		offered += n
		if wrapped {
			c.begun = true
			c.log.Info("start sweep offered every open one of the "+c.what, c.what, offered)
			return false
		}
		if !ok {
			// A listing that failed or a page not taken: the next sweep goes on with the
			// round from here, so that a read model unreachable for a moment at start does
			// not leave the rest of the round to a page per interval.
			c.log.Info("start sweep stopped before the end of the "+c.what+"; the next sweep goes on with it", c.what, offered)
			return false
		}
	}
	return false
}

// page offers the page after the cursor and moves the cursor past it, back to the oldest after
// a short page (wrapped). ok is false when the page could not be read or not every id was taken:
// the cursor then stays where it was.
func (c *sweepCursor) page(ctx context.Context) (n int, wrapped, ok bool) {
	ids, last, err := c.list(ctx, c.afterCreatedAt, c.afterID, c.limit)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("listing open "+c.what+" failed; next sweep retries", "error", err)
		}
		return 0, false, false
	}
	if !c.offer(ctx, ids) {
		return len(ids), false, false
	}
	if c.limit <= 0 || len(ids) < c.limit {
		c.afterCreatedAt, c.afterID = time.Time{}, ""
		return len(ids), true, true
	}
	c.afterCreatedAt, c.afterID = last, ids[len(ids)-1]
	return len(ids), false, true
}
