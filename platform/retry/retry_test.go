package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDelayDoublesUpToMax(t *testing.T) {
	b := Backoff{Base: 50 * time.Millisecond, Max: 5 * time.Second}
	want := []time.Duration{50, 100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, w := range want {
		if got := b.Delay(i + 1); got != w*time.Millisecond {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	for _, attempt := range []int{-1, 0} {
		if got := b.Delay(attempt); got != b.Base {
			t.Errorf("Delay(%d) = %v, want the base %v", attempt, got, b.Base)
		}
	}
	for _, attempt := range []int{31, 64, 1 << 30} {
		if got := b.Delay(attempt); got != b.Max {
			t.Errorf("Delay(%d) = %v, want the cap %v (no overflow)", attempt, got, b.Max)
		}
	}
}

func TestDelayMaxBelowBaseMeansBase(t *testing.T) {
	b := Backoff{Base: time.Second, Max: time.Millisecond}
	if got := b.Delay(3); got != time.Second {
		t.Errorf("Delay = %v, want %v", got, time.Second)
	}
}

func TestJitterStaysInUpperHalf(t *testing.T) {
	b := Backoff{Base: 200 * time.Millisecond, Max: 3 * time.Second, Jitter: true}
	seen := map[time.Duration]bool{}
	for range 200 {
		for attempt := 1; attempt <= 6; attempt++ {
			full := Backoff{Base: b.Base, Max: b.Max}.Delay(attempt)
			d := b.Delay(attempt)
			if d < full/2 || d > full {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", attempt, d, full/2, full)
			}
			if attempt == 1 {
				seen[d] = true
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("jittered delays never varied: %v", seen)
	}
}

func TestDelayAtLeastHonoursFloorUpToMax(t *testing.T) {
	b := Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}
	cases := []struct {
		floor, want time.Duration
	}{
		{0, time.Millisecond},
		{3 * time.Millisecond, 3 * time.Millisecond},
		{30 * time.Second, 5 * time.Millisecond},
	}
	for _, c := range cases {
		if got := b.DelayAtLeast(1, c.floor); got != c.want {
			t.Errorf("DelayAtLeast(1, %v) = %v, want %v", c.floor, got, c.want)
		}
	}
	if got := b.DelayAtLeast(10, time.Millisecond); got != b.Max {
		t.Errorf("a floor below the schedule changes it: got %v, want %v", got, b.Max)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on an ended context = %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) on an ended context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Microsecond); err != nil {
		t.Fatalf("Sleep that completes = %v, want nil", err)
	}
	if err := Sleep(context.Background(), -time.Second); err != nil {
		t.Fatalf("Sleep of a negative duration = %v, want nil", err)
	}
}
