// Package retry is the one backoff schedule and the one context-aware sleep of every part that
// retries: the event store's subscription, the Kafka consumer, the relay, the company client and
// the connector worker. It is
// leaf plumbing and imports nothing of the project.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential schedule: Base before the first retry, doubling with every
// further attempt, never more than Max.
//
// Jitter spreads each delay over [d/2, d] ("equal jitter"). Turn it on where many independent
// callers fail together against one shared party, such as connector workers against one
// company, so that their retries do not arrive in lockstep; half the delay stays fixed so that
// a retry never comes much sooner than the schedule says. Leave it off for a single caller
// (the relay, one consumer retrying its batch), whose predictable delays are easier to read in
// its logs.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Jitter bool
}

// Default is the schedule of a single caller retrying against the project's own infrastructure:
// the relay resubscribing to the event store and publishing to Kafka, the Kafka consumer's
// fetches, handler and commits, the EventStoreDB adapter resubscribing. The first retry after
// 50 ms costs a transient fault (a dropped connection, a leader moving) almost no latency; the
// 5 s cap, reached after seven doublings, keeps a long outage to a dozen attempts (and log
// lines) a minute per caller while still noticing the recovery within seconds. No jitter: a
// single caller has nobody to fall into lockstep with (see Backoff).
var Default = Backoff{Base: 50 * time.Millisecond, Max: 5 * time.Second}

// maxDoublings bounds the shift of Base, so that no attempt number overflows the delay.
const maxDoublings = 30

// Delay is the wait before retry number attempt (1-based: the wait after the first failure).
// An attempt below 1 counts as 1; a Max below Base means Base.
func (b Backoff) Delay(attempt int) time.Duration {
	limit := max(b.Max, b.Base)
	d := b.Base << min(max(attempt, 1)-1, maxDoublings)
	if d <= 0 || d > limit {
		d = limit
	}
	if b.Jitter && d > 0 {
		d = d/2 + rand.N(d/2+1)
	}
	return d
}

// DelayAtLeast is Delay raised to floor, the wait another party asked for (an HTTP
// Retry-After), but never above Max: a party asking for minutes must not stall the caller
// beyond its own schedule.
func (b Backoff) DelayAtLeast(attempt int, floor time.Duration) time.Duration {
	d := b.Delay(attempt)
	if floor > d {
		d = max(min(floor, b.Max), d)
	}
	return d
}

// Sleep waits d, or until ctx ends, when it returns ctx.Err(). A d of zero or less returns at
// once (with ctx.Err() if ctx has ended already).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
