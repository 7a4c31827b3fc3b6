package worker

import (
	"math"
	"runtime/metrics"
	"time"
)

// The collection worker's slots follow the CPU. A step is mostly the company's time when the
// companies are remote, so many slots keep many logins moving; with the embedded sandbox, or
// when the process's requests and projections keep the CPU busy, a step is CPU work, and slots
// beyond what the CPU runs at once only make every runnable goroutine (the API's requests
// among them) wait longer for it. Measured with the embedded sandbox on two cores
// (`make bench-http`, 800 collections, then POST /collections for 5 s): 16 slots completed the
// collections as fast and with as little CPU as 512 (145 against 150 per CPU-second, 5.0
// against 4.8 s) while the POSTs beside them went from 656/s (p99 121 ms) to 1,143/s (p99
// 69 ms); 8 slots took 8.0 s and 124 per CPU-second, 4 slots 12.7 s and 102.
//
// So the scheduler halves its slot limit, down to a floor, while the CPU is saturated, and
// raises it by a quarter while it is not and every slot is taken with steps waiting.
// Saturation is read from the runtime: the 90th percentile of the time runnable goroutines
// waited for a CPU over the last adaptation period. Idle it is ~0.2 ms; a load that keeps the
// two cores busy puts it at 5–15 ms.
const (
	// DefaultMinSessions is the floor of the slot limit: the slots kept while the CPU is
	// saturated.
	DefaultMinSessions = 16
	// slotAdaptEvery is how often the slot limit is adapted.
	slotAdaptEvery = 100 * time.Millisecond
	// saturatedWait is the 90th percentile of runnable goroutines' waits for a CPU above which
	// the CPU counts as saturated.
	saturatedWait = 2 * time.Millisecond
	// saturatedMinWaits is how many waits a period must have recorded to count as saturated:
	// a few scheduling events (an idle process's) say nothing about the CPU.
	saturatedMinWaits = 50
)

// adaptSlots starts adapting the slot limit between floor and maxActive every period, reading
// saturated; it ends when the scheduler stops. A floor at or above maxActive keeps the slots
// fixed. Call it once, before the first submit.
func (s *scheduler) adaptSlots(floor int, period time.Duration, saturated func() bool) {
	if floor >= s.maxActive || floor < 1 {
		return
	}
	s.mu.Lock()
	s.floor = floor
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-tick.C:
			}
			busy := saturated()
			s.mu.Lock()
			s.resize(busy)
			s.mu.Unlock()
		}
	}()
}

// resize halves the slot limit (never below the floor, nor above half the steps running) while
// the CPU is saturated, and otherwise raises it by a quarter once every slot is taken and steps
// wait; mu is held. A running step is never stopped: a lower limit only holds back the next.
func (s *scheduler) resize(saturated bool) {
	was := s.limit
	switch {
	case s.stopped:
		return
	case saturated:
		s.limit = max(s.floor, min(s.limit, s.active)/2)
	case s.limit < s.maxActive && s.queued > 0 && s.active >= s.limit:
		s.limit = min(s.maxActive, s.limit+max(1, s.limit/4))
		s.dispatch()
	}
	if s.limit != was && s.limitChanged != nil {
		s.limitChanged(s.limit)
	}
}

// cpuSaturated tells whether runnable goroutines waited for a CPU past saturatedWait (90th
// percentile) since its previous call, from the runtime's /sched/latencies:seconds, a
// distribution kept since the process started, taken apart into the waits of each period. A
// runtime without the metric never counts as saturated. Not safe for concurrent use.
func cpuSaturated() func() bool {
	sample := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	var last []uint64
	return func() bool {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
			return false
		}
		h := sample[0].Value.Float64Histogram()
		if len(last) != len(h.Counts) {
			last = append([]uint64(nil), h.Counts...)
			return false
		}
		wait, waits := quantileSince(h.Counts, last, h.Buckets, 0.9)
		copy(last, h.Counts)
		return saturatedBy(wait, waits)
	}
}

// saturatedBy tells whether a period whose runnable goroutines waited p90 for a CPU (90th
// percentile) over waits recorded waits had the CPU saturated.
func saturatedBy(p90 time.Duration, waits uint64) bool {
	return waits >= saturatedMinWaits && p90 > saturatedWait
}

// quantileSince is the q-quantile of the values a cumulative histogram (counts over buckets,
// the runtime/metrics layout: bucket i spans buckets[i]..buckets[i+1]) recorded since it held
// last, as the upper bound of the bucket it falls in (the lower one for an unbounded last
// bucket), and how many values that was.
func quantileSince(counts, last []uint64, buckets []float64, q float64) (time.Duration, uint64) {
	var total uint64
	for i, c := range counts {
		total += c - last[i]
	}
	if total == 0 {
		return 0, 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range counts {
		seen += c - last[i]
		if seen < rank {
			continue
		}
		upper := buckets[i+1]
		if math.IsInf(upper, 1) {
			upper = buckets[i]
		}
		return time.Duration(upper * float64(time.Second)), total
	}
	return 0, total
}
