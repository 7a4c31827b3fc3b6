package groupcommit

import (
	"slices"
	"testing"
)

func TestDrainTakesWhatIsQueuedUpToTheLimit(t *testing.T) {
	queue := make(chan int, 10)
	for i := range 5 {
		queue <- i
	}
	batch := Drain([]int{-1}, queue, 4)
	if !slices.Equal(batch, []int{-1, 0, 1, 2}) {
		t.Fatalf("batch %v, want the first request and three queued ones (the limit)", batch)
	}
	batch = Drain(batch[:0], queue, 4)
	if !slices.Equal(batch, []int{3, 4}) {
		t.Fatalf("batch %v, want the two left, without waiting for more", batch)
	}
}
