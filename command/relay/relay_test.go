package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/kafka"
)

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// relayTestPartitions is how many partitions the relay tests' event topics have.
const relayTestPartitions = 4

func startBroker(t testing.TB) *kafka.Embedded {
	t.Helper()
	// Several partitions, so that the relay's partitioning by stream is exercised.
	e, err := kafka.StartEmbedded(t.TempDir(), testLogger(), kafka.WithSyncWrites(false), kafka.WithPartitions(relayTestPartitions))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// memStore is the in-memory event store with a hiccup switch: when failAfter is positive, a
// subscription fails once after delivering that many events.
type memStore struct {
	*memstore.Store
	failAfter atomic.Int64
}

func newMemStore() *memStore { return &memStore{Store: memstore.New()} }

var categories = []string{"collection", "consent", "cancellation", "user", "client"}

// appendN appends n events spread over streams streams of every category. It must be the
// store's only writer, so that it knows the positions its events get.
func (s *memStore) appendN(n, streams int) {
	ctx := context.Background()
	stored, err := s.ReadAll(ctx, 0, 0)
	if err != nil {
		panic(err)
	}
	for pos := uint64(len(stored)) + 1; pos <= uint64(len(stored)+n); pos++ {
		i := int(pos) % streams
		stream := fmt.Sprintf("%s-%04d", categories[i%len(categories)], i)
		e := eventschema.Envelope{
			EventID:       fmt.Sprintf("00000000-0000-4000-8000-%012d", pos),
			Type:          "collection.status-changed",
			SchemaVersion: 2,
			Tenant:        "client-7",
			OccurredAt:    time.Now().UTC().Truncate(time.Millisecond),
			Payload:       json.RawMessage(`{"n":` + strconv.FormatUint(pos, 10) + `}`),
		}
		if _, err := s.Append(ctx, stream, eventstore.Any(), []eventschema.Envelope{e}); err != nil {
			panic(err)
		}
	}
}

func (s *memStore) snapshot() []eventschema.Envelope {
	events, err := s.ReadAll(context.Background(), 0, 0)
	if err != nil {
		panic(err)
	}
	return events
}

func (s *memStore) SubscribeAll(ctx context.Context, after uint64, handle func(context.Context, eventschema.Envelope) error) error {
	delivered := int64(0)
	return s.Store.SubscribeAll(ctx, after, func(ctx context.Context, e eventschema.Envelope) error {
		if n := s.failAfter.Load(); n > 0 && delivered == n {
			s.failAfter.Store(0)
			return errors.New("store hiccup")
		}
		if err := handle(ctx, e); err != nil {
			return err
		}
		delivered++
		return nil
	})
}

// metric is a Counter and a Gauge.
type metric struct{ bits atomic.Uint64 }

func (m *metric) Add(v float64) {
	for {
		old := m.bits.Load()
		if m.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}
func (m *metric) Set(v float64)  { m.bits.Store(math.Float64bits(v)) }
func (m *metric) Value() float64 { return math.Float64frombits(m.bits.Load()) }

// flakyWriter fails calls while fail returns an error, and otherwise writes through.
type flakyWriter struct {
	w     Writer
	calls atomic.Int64
	fail  func(call int64, msgs []kafkago.Message) error
}

func (f *flakyWriter) WriteMessages(ctx context.Context, msgs ...kafkago.Message) error {
	call := f.calls.Add(1)
	if f.fail != nil {
		if err := f.fail(call, msgs); err != nil {
			return err
		}
	}
	return f.w.WriteMessages(ctx, msgs...)
}

type running struct {
	cancel context.CancelFunc
	done   chan error
}

func runRelay(t testing.TB, cfg Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	go func() { r.done <- New(cfg).Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Run did not return after cancel")
	}
}

func waitCheckpoint(t testing.TB, conn kafka.Conn, want uint64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got uint64
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err = ReadCheckpoint(ctx, conn, kafka.RelayCheckpointTopic)
		cancel()
		if err == nil && got >= want {
			if got > want {
				t.Fatalf("checkpoint %d is past the last event %d", got, want)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("checkpoint is %d (err %v), want %d", got, err, want)
}

// published reads every event topic from the start, per partition in offset order.
func published(t testing.TB, kc kafka.Conn) map[string][]kafkago.Message {
	t.Helper()
	out := map[string][]kafkago.Message{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, topic := range eventschema.Topics() {
		for p := range relayTestPartitions {
			conn, err := kc.Dialer().DialLeader(ctx, "tcp", kc.Brokers[0], topic, p)
			if err != nil {
				t.Fatal(err)
			}
			first, last, err := conn.ReadOffsets()
			if err != nil {
				t.Fatal(err)
			}
			for off := first; off < last; {
				if _, err := conn.Seek(off, kafkago.SeekAbsolute); err != nil {
					t.Fatal(err)
				}
				if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
					t.Fatal(err)
				}
				batch := conn.ReadBatch(1, 10<<20)
				for {
					m, err := batch.ReadMessage()
					if err != nil {
						break
					}
					out[fmt.Sprintf("%s/%d", topic, p)] = append(out[fmt.Sprintf("%s/%d", topic, p)], m)
					off = m.Offset + 1
				}
				if err := batch.Close(); err != nil {
					t.Fatal(err)
				}
			}
			conn.Close()
		}
	}
	return out
}

type seen struct {
	count     map[uint64]int // by position
	partition map[string]string
}

// checkLog checks every message against the store and returns how often each position
// appears. It fails on a wrong topic, key or header, a stream in two partitions, and a
// stream whose first occurrences of revisions are out of order.
// events[i] must be the event at position i+1.
func checkLog(t testing.TB, events []eventschema.Envelope, log map[string][]kafkago.Message) seen {
	t.Helper()
	s := seen{count: map[uint64]int{}, partition: map[string]string{}}
	for tp, msgs := range log {
		next := map[string]uint64{} // per stream: the next revision not yet seen
		for _, m := range msgs {
			e, err := eventschema.FromMessage(m.Value)
			if err != nil {
				t.Fatalf("%s@%d: %v", tp, m.Offset, err)
			}
			want := events[e.Position-1]
			if e.EventID != want.EventID || e.Stream != want.Stream || e.Revision != want.Revision {
				t.Fatalf("%s@%d carries %s/%d at position %d, store has %s/%d", tp, m.Offset, e.Stream, e.Revision, e.Position, want.Stream, want.Revision)
			}
			if m.Topic != eventschema.Topic(eventschema.Category(e.Stream)) {
				t.Fatalf("stream %s published to %s", e.Stream, m.Topic)
			}
			if string(m.Key) != e.Stream {
				t.Fatalf("key %q, want %q", m.Key, e.Stream)
			}
			h := map[string]string{}
			for _, x := range m.Headers {
				h[x.Key] = string(x.Value)
			}
			if h[eventschema.HeaderType] != want.Type || h[eventschema.HeaderSchemaVersion] != strconv.Itoa(want.SchemaVersion) ||
				h[eventschema.HeaderTenant] != want.Tenant || h[eventschema.HeaderPosition] != strconv.FormatUint(e.Position, 10) ||
				h[eventschema.HeaderEventID] != e.EventID {
				t.Fatalf("headers %v do not match event %s", h, e.EventID)
			}
			if p, ok := s.partition[e.Stream]; ok && p != tp {
				t.Fatalf("stream %s in %s and %s", e.Stream, p, tp)
			}
			s.partition[e.Stream] = tp
			switch {
			case e.Revision == next[e.Stream]:
				next[e.Stream]++
			case e.Revision < next[e.Stream]:
				// a duplicate of an earlier delivery: at-least-once allows it
			default:
				t.Fatalf("stream %s: revision %d before %d", e.Stream, e.Revision, next[e.Stream])
			}
			s.count[e.Position]++
		}
	}
	return s
}

// wantOnce checks that positions 1..n were each published exactly once.
func (s seen) wantOnce(t testing.TB, n uint64) {
	t.Helper()
	for pos := uint64(1); pos <= n; pos++ {
		if s.count[pos] != 1 {
			t.Fatalf("position %d published %d times, want once", pos, s.count[pos])
		}
	}
}

func TestRelayPublishesEveryEventOnceInOrder(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	store := newMemStore()
	store.appendN(700, 23) // catch-up: more than one batch
	publishedCount, lag, checkpoint := &metric{}, &metric{}, &metric{}
	runRelay(t, Config{Store: store, Kafka: broker.Conn(),
		Metrics: Metrics{Published: publishedCount, PublishLag: lag, Checkpoint: checkpoint}})
	waitCheckpoint(t, broker.Conn(), 700)
	for range 30 { // live: small appends while running
		store.appendN(10, 23)
		time.Sleep(2 * time.Millisecond)
	}
	waitCheckpoint(t, broker.Conn(), 1000)

	s := checkLog(t, store.snapshot(), published(t, broker.Conn()))
	s.wantOnce(t, 1000)
	if publishedCount.Value() != 1000 {
		t.Errorf("published counter %v, want 1000", publishedCount.Value())
	}
	if checkpoint.Value() != 1000 {
		t.Errorf("checkpoint gauge %v, want 1000", checkpoint.Value())
	}
	if lag.Value() <= 0 || lag.Value() > 10 {
		t.Errorf("publish lag gauge %v s, want a small positive value", lag.Value())
	}
}

func TestRelayRestartResumesAfterCheckpoint(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	store := newMemStore()
	store.appendN(150, 7)
	r := runRelay(t, Config{Store: store, Kafka: broker.Conn()})
	waitCheckpoint(t, broker.Conn(), 150)
	r.stop(t)

	store.appendN(150, 7) // written while the relay is down
	runRelay(t, Config{Store: store, Kafka: broker.Conn()})
	waitCheckpoint(t, broker.Conn(), 300)
	s := checkLog(t, store.snapshot(), published(t, broker.Conn()))
	s.wantOnce(t, 300)
}

// TestRelayCrashBeforeCheckpointLosesNothing kills the relay after Kafka acknowledged a batch
// but before its checkpoint was written: the restarted relay publishes that batch again and
// nothing else twice.
func TestRelayCrashBeforeCheckpointLosesNothing(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	store := newMemStore()
	store.appendN(100, 5)
	real := kafka.NewWriter(broker.Conn())
	t.Cleanup(func() { real.Close() })

	crash := make(chan struct{})
	var once sync.Once
	var checkpoints atomic.Int64
	var lastBatch atomic.Int64
	flaky := &flakyWriter{w: real, fail: func(_ int64, msgs []kafkago.Message) error {
		if msgs[0].Topic == kafka.RelayCheckpointTopic {
			if checkpoints.Add(1) >= 2 { // from the second checkpoint on, the process is dead
				once.Do(func() { close(crash) })
				return errors.New("process killed")
			}
			return nil
		}
		lastBatch.Store(int64(len(msgs)))
		return nil
	}}
	r := runRelay(t, Config{Store: store, Kafka: broker.Conn(), Writer: flaky, MaxBatch: 40})
	waitCheckpoint(t, broker.Conn(), 40)
	store.appendN(100, 5)
	<-crash
	r.stop(t)

	store.appendN(50, 5)
	runRelay(t, Config{Store: store, Kafka: broker.Conn(), MaxBatch: 40})
	waitCheckpoint(t, broker.Conn(), 250)

	s := checkLog(t, store.snapshot(), published(t, broker.Conn()))
	dups := 0
	for pos := uint64(1); pos <= 250; pos++ {
		switch c := s.count[pos]; {
		case c == 0:
			t.Fatalf("position %d lost", pos)
		case c > 1:
			dups++
			if pos <= 40 {
				t.Fatalf("position %d, before the last checkpoint, published %d times", pos, c)
			}
		}
	}
	if dups == 0 || dups > 40 {
		t.Fatalf("%d events published twice, want the unacknowledged batch (1..40)", dups)
	}
	t.Logf("crash before checkpoint: %d events republished", dups)
}

// TestRelayRetriesFailedPublish makes Kafka refuse the first writes: the relay retries the
// same batch, the checkpoint does not move meanwhile, and every event lands once.
func TestRelayRetriesFailedPublish(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	store := newMemStore()
	store.appendN(60, 4)
	real := kafka.NewWriter(broker.Conn())
	t.Cleanup(func() { real.Close() })
	var failures atomic.Int64
	var firstBatch []string
	checkpoint := &metric{}
	flaky := &flakyWriter{w: real, fail: func(call int64, msgs []kafkago.Message) error {
		if call > 3 {
			return nil
		}
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = string(m.Value)
		}
		if firstBatch == nil {
			firstBatch = ids
		} else if fmt.Sprint(ids) != fmt.Sprint(firstBatch) {
			t.Errorf("retry %d sent a different batch", call)
		}
		if call == 3 { // two failures in: nothing may have been checkpointed
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			pos, err := ReadCheckpoint(ctx, broker.Conn(), kafka.RelayCheckpointTopic)
			cancel()
			if err != nil || pos != 0 || checkpoint.Value() != 0 {
				t.Errorf("checkpoint at %d (gauge %v, err %v) while publishing fails", pos, checkpoint.Value(), err)
			}
		}
		failures.Add(1)
		return kafkago.LeaderNotAvailable
	}}
	runRelay(t, Config{Store: store, Kafka: broker.Conn(), Writer: flaky, Metrics: Metrics{Checkpoint: checkpoint}})
	waitCheckpoint(t, broker.Conn(), 60)
	if failures.Load() != 3 {
		t.Fatalf("%d failed writes, want 3", failures.Load())
	}
	s := checkLog(t, store.snapshot(), published(t, broker.Conn()))
	s.wantOnce(t, 60)
}

// TestRelayResubscribesAfterStoreFailure drops the subscription mid-stream: the relay
// resubscribes from its last acknowledged position and loses nothing.
func TestRelayResubscribesAfterStoreFailure(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	store := newMemStore()
	store.failAfter.Store(30)
	store.appendN(100, 9)
	runRelay(t, Config{Store: store, Kafka: broker.Conn(), MaxBatch: 20})
	waitCheckpoint(t, broker.Conn(), 100)
	if n := store.failAfter.Load(); n != 0 {
		t.Fatalf("the subscription never failed (failAfter still %d): the test covers no resubscription", n)
	}
	s := checkLog(t, store.snapshot(), published(t, broker.Conn()))
	s.wantOnce(t, 100)
}

// TestRelaySplitsBatchesBySize keeps each publish call under MaxBatchBytes.
func TestRelaySplitsBatchesBySize(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	store := newMemStore()
	store.appendN(200, 3)
	real := kafka.NewWriter(broker.Conn())
	t.Cleanup(func() { real.Close() })
	var biggest atomic.Int64
	flaky := &flakyWriter{w: real, fail: func(_ int64, msgs []kafkago.Message) error {
		n := 0
		for _, m := range msgs {
			n += messageSize(m)
		}
		if int64(n) > biggest.Load() {
			biggest.Store(int64(n))
		}
		return nil
	}}
	runRelay(t, Config{Store: store, Kafka: broker.Conn(), Writer: flaky, MaxBatchBytes: 4096})
	waitCheckpoint(t, broker.Conn(), 200)
	if biggest.Load() > 4096 {
		t.Fatalf("a publish call carried %d bytes, limit 4096", biggest.Load())
	}
	s := checkLog(t, store.snapshot(), published(t, broker.Conn()))
	s.wantOnce(t, 200)
}

// TestRelayGathersATrickle publishes events that keep coming within BatchInterval of the last
// publish together, and the first one after a quiet spell at once.
func TestRelayGathersATrickle(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	store := newMemStore()
	real := kafka.NewWriter(broker.Conn())
	t.Cleanup(func() { real.Close() })
	var publishes atomic.Int64
	counting := &flakyWriter{w: real, fail: func(_ int64, msgs []kafkago.Message) error {
		if msgs[0].Topic != kafka.RelayCheckpointTopic {
			publishes.Add(1)
		}
		return nil
	}}
	runRelay(t, Config{Store: store, Kafka: broker.Conn(), Writer: counting, BatchInterval: 300 * time.Millisecond})
	store.appendN(1, 1)
	waitCheckpoint(t, broker.Conn(), 1)
	if n := publishes.Load(); n != 1 {
		t.Fatalf("first event: %d publishes, want 1", n)
	}
	for range 30 {
		store.appendN(1, 7)
		time.Sleep(3 * time.Millisecond)
	}
	waitCheckpoint(t, broker.Conn(), 31)
	// One publish per event without the interval; with it, the trickle (about 100 ms) fits in
	// one or two windows (three on a slow machine).
	if n := publishes.Load(); n > 4 {
		t.Errorf("31 events in %d publishes, want at most 4", n)
	}
	s := checkLog(t, store.snapshot(), published(t, broker.Conn()))
	s.wantOnce(t, 31)
}

func TestReadCheckpointOfEmptyTopic(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pos, err := ReadCheckpoint(ctx, broker.Conn(), kafka.RelayCheckpointTopic)
	if err != nil || pos != 0 {
		t.Fatalf("ReadCheckpoint = %d, %v; want 0, nil", pos, err)
	}
}

func TestReadCheckpointRefusesPartitionedTopic(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, broker.Conn(), []string{"samla.bad.checkpoint"}, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCheckpoint(ctx, broker.Conn(), "samla.bad.checkpoint"); err == nil {
		t.Fatal("ReadCheckpoint accepted a topic with 3 partitions")
	}
}

// BenchmarkRelayCatchUp measures publishing a backlog (ns/op is per event), with the
// embedded broker fsyncing every batch as samla run does.
func BenchmarkRelayCatchUp(b *testing.B) {
	broker, err := kafka.StartEmbedded(b.TempDir(), testLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer broker.Close()
	store := newMemStore()
	store.appendN(b.N, 1000)
	checkpoint := &metric{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		done <- New(Config{Store: store, Kafka: broker.Conn(), Logger: testLogger(),
			Metrics: Metrics{Checkpoint: checkpoint}}).Run(ctx)
	}()
	for checkpoint.Value() < float64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cancel()
	<-done
}

// TestBatcherReleaseForgetsThePublishedBatch: an idle relay keeps no published event alive in
// the slices it reuses for the next batch.
func TestBatcherReleaseForgetsThePublishedBatch(t *testing.T) {
	t.Parallel()
	b := &batcher{r: New(Config{Logger: testLogger()}), queue: make(chan eventschema.Envelope, 8), ended: make(chan struct{})}
	for pos := uint64(1); pos <= 5; pos++ {
		b.queue <- eventschema.Envelope{EventID: fmt.Sprint(pos), Type: "collection.status-changed", Stream: "collection-1",
			Position: pos, Payload: json.RawMessage(`{"personal":"x"}`)}
	}
	batch, msgs, err := b.next(context.Background())
	if err != nil || len(batch) != 5 || len(msgs) != 5 {
		t.Fatalf("next: %d events, %d messages, %v; want 5, 5, nil", len(batch), len(msgs), err)
	}
	b.release()
	for i, e := range b.batch[:cap(b.batch)] {
		if e.EventID != "" || e.Payload != nil {
			t.Fatalf("event %d still held after release: %+v", i, e)
		}
	}
	for i, m := range b.msgs[:cap(b.msgs)] {
		if m.Value != nil || m.Key != nil || m.Headers != nil {
			t.Fatalf("message %d still held after release", i)
		}
	}
}
