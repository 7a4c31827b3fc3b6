package relay

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/samla/samla/platform/kafka"
)

// watchingWriter acknowledges event messages without keeping them, noting a weak pointer to
// each one's encoded value, and writes checkpoints to the broker.
type watchingWriter struct {
	checkpoints *kafkago.Writer
	mu          sync.Mutex
	values      []weak.Pointer[byte]
}

func (w *watchingWriter) WriteMessages(ctx context.Context, msgs ...kafkago.Message) error {
	if len(msgs) == 1 && msgs[0].Topic == kafka.RelayCheckpointTopic {
		return w.checkpoints.WriteMessages(ctx, msgs...)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range msgs {
		w.values = append(w.values, weak.Make(&m.Value[0]))
	}
	return nil
}

func (w *watchingWriter) alive() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, v := range w.values {
		if v.Value() != nil {
			n++
		}
	}
	return n
}

// TestRelayHoldsNoPublishedBatchWhileIdle: once a batch is published and checkpointed, the
// relay waiting for the next event keeps none of its encoded messages alive (follow releases
// the batch; the slices it reuses would otherwise hold the last batch until the next one).
func TestRelayHoldsNoPublishedBatchWhileIdle(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	store := newMemStore()
	store.appendN(40, 7)
	cw := kafka.NewCheckpointWriter(broker.Conn())
	defer cw.Close()
	w := &watchingWriter{checkpoints: cw}
	runRelay(t, Config{Store: store, Kafka: broker.Conn(), Writer: w})
	waitCheckpoint(t, broker.Conn(), 40)
	w.mu.Lock()
	n := len(w.values)
	w.mu.Unlock()
	if n != 40 {
		t.Fatalf("%d event messages written, want 40", n)
	}
	for range 50 {
		runtime.GC()
		if w.alive() == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d of 40 published messages still held by the idle relay", w.alive())
}
