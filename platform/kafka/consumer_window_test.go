package kafka

import (
	"testing"
	"time"
)

// A batch gathers for MaxWait after its first message, or until BatchInterval after the
// previous hand-over when that is later: a quiet group answers at once, a busy one in fewer,
// larger batches.
func TestWindowEnd(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := consumer{cfg: ConsumerConfig{MaxWait: 2 * time.Millisecond, BatchInterval: 50 * time.Millisecond}}
	if got, want := c.windowEnd(t0), t0.Add(2*time.Millisecond); !got.Equal(want) {
		t.Errorf("first batch: window ends %v, want %v", got, want)
	}
	c.handed = t0
	if got, want := c.windowEnd(t0.Add(10*time.Millisecond)), t0.Add(50*time.Millisecond); !got.Equal(want) {
		t.Errorf("busy: window ends %v, want %v", got, want)
	}
	if got, want := c.windowEnd(t0.Add(time.Second)), t0.Add(time.Second+2*time.Millisecond); !got.Equal(want) {
		t.Errorf("after a quiet spell: window ends %v, want %v", got, want)
	}
	c.cfg.BatchInterval = -1
	if got, want := c.windowEnd(t0.Add(10*time.Millisecond)), t0.Add(12*time.Millisecond); !got.Equal(want) {
		t.Errorf("no interval: window ends %v, want %v", got, want)
	}
}
