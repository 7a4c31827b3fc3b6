package worker

import (
	"math"
	"runtime/metrics"
	"time"
)

// The collection worker's slots can follow the CPU. With the embedded sandbox, or any company
// as close, a step is CPU work, and slots beyond what the CPU runs at once only make every
// runnable goroutine (the API's requests among them) wait longer for it. Measured with the
// embedded sandbox on two cores (`make bench-http`: 800 collections, then POST /collections
// for 5 s), three rounds of each alternating: 512 fixed slots completed 107–150 collections per
// CPU-second (median 130) beside 706–755 POSTs/s (p99 101–116 ms); slots adapting down to 16,
// 120–143 (124) beside 867–1,211/s (p99 65–95 ms); down to 32, 144–175 (157) beside
// 915–1,048/s (p99 68–81 ms). Fewer slots cost CPU of their own: a collection kept waiting for a
// slot is polled by its client and looked at meanwhile (fixed 8 slots: 124 per CPU-second in
// one run, fixed 4: 102), hence the floor of 32.
//
// So, given a floor (Config.MinSessions), the scheduler halves its slot limit once the CPU has
// been saturated for saturatedWindows periods in a row, and raises it by a quarter while the CPU
// is not and every slot is taken with steps waiting. Saturation is read from the runtime: the
// 90th percentile of the time runnable goroutines waited for a CPU over the period (the upper
// bound of the runtime's bucket that holds it). Idle it is ~0.2 ms; a load that keeps the two
// cores busy puts it at 5–15 ms.
//
// The signal is the whole process's, and halving saves CPU only when the steps use it: with
// remote companies a step is mostly their latency, and a lower limit during a burst of API
// requests would cut the logins moving at once (32 slots of 200 ms calls are 160 steps a
// second) without freeing the CPU. The service therefore adapts only when it runs the sandbox
// in process (cmd/samla: --min-sessions 0), or when the operator sets a floor.
const (
	// DefaultMinSessions is the floor the service gives the slot limit when the companies are
	// in process (the embedded sandbox): the slots kept while the CPU is saturated.
	DefaultMinSessions = 32
	// saturatedWindows is how many periods in a row must find the CPU saturated before the
	// limit is halved: one can be a collection cycle or a moment's burst.
	saturatedWindows = 2
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
// saturated; it ends when the scheduler stops. A floor below 1 or at or above maxActive keeps
// the slots fixed. Call it once (Worker.Run).
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
		streak := 0 // periods in a row that found the CPU saturated
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-tick.C:
			}
			if saturated() {
				streak++
				if streak < saturatedWindows {
					continue // neither halved nor grown yet
				}
			} else {
				streak = 0
			}
			s.mu.Lock()
			s.resize(streak >= saturatedWindows)
			s.mu.Unlock()
		}
	}()
}

// resize halves the slot limit (never below the floor, nor above half the steps running) while
// the CPU is saturated, and otherwise raises it by a quarter once every slot is taken and steps
// wait; mu is held. A running step is never stopped: a lower limit only holds back the next
// steps of the clients running some (dispatch).
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
