package main

import (
	"context"
	"net/http"
	"time"

	"github.com/samla/samla/domain/collection"
)

// tracked is one collection followed from its 201 until the status poll shows a final status.
type tracked struct {
	id      string
	started time.Time     // when its 201 arrived
	final   string        // the final status, once seen
	took    time.Duration // from started to the poll that first showed final
}

func (t *tracked) done() bool { return t.final != "" }

// track polls every pending collection once per every (as a client does) until each shows a
// final status, or until bound has passed since the call; it answers how many are still pending.
// A failed poll leaves its collection pending: the next round asks again.
func track(ctx context.Context, cl *http.Client, base, key string, items []*tracked, every, bound time.Duration) int {
	deadline := time.Now().Add(bound)
	for {
		pending := 0
		for _, t := range items {
			if t.done() {
				continue
			}
			code, st, err := status(cl, base, key, t.id)
			if err == nil && code == http.StatusOK && collection.Status(st).IsFinal() {
				t.final, t.took = st, time.Since(t.started)
				continue
			}
			pending++
		}
		if pending == 0 || ctx.Err() != nil || time.Now().After(deadline) {
			return pending
		}
		sleep(ctx, every)
	}
}

// tookSorted answers the sorted times to final of the items that reached want.
func tookSorted(items []*tracked, want string) []time.Duration {
	var out []time.Duration
	for _, t := range items {
		if t.final == want {
			out = append(out, t.took)
		}
	}
	sortDurations(out)
	return out
}
