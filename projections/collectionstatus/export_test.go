package collectionstatus

import "time"

// SetViewClock makes v tell time by now (Unix seconds), for the tests of Sweep.
func SetViewClock(v *View, now func() int64) { v.now = now }

// ShardSizes is, for each shard of v, how many rows it holds and the most its sweeps saw since
// its map was last copied.
func ShardSizes(v *View) (rows, peaks []int) {
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.RLock()
		rows, peaks = append(rows, len(sh.rows)), append(peaks, sh.peak.Max())
		sh.mu.RUnlock()
	}
	return rows, peaks
}

// SetReaderClock makes r's read-your-writes tell time by now (r must have WithEventStore).
func SetReaderClock(r Reader, now func() time.Time) Reader {
	events := *r.events
	events.now = now
	r.events = &events
	return r
}
