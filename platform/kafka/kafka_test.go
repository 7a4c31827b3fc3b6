package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/samla/samla/eventschema"
)

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startEmbedded(t testing.TB, dir string, opts ...EmbeddedOption) *Embedded {
	t.Helper()
	e, err := StartEmbedded(dir, testLogger(t), append([]EmbeddedOption{WithSyncWrites(false)}, opts...)...)
	if err != nil {
		t.Fatalf("start embedded: %v", err)
	}
	// A cleanup rather than a defer: cleanups run last-in first-out, so consumers started
	// later in the test leave their group before the broker goes away.
	t.Cleanup(e.Close)
	return e
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func envelope(stream string, rev uint64, pos uint64) eventschema.Envelope {
	return eventschema.Envelope{
		EventID:       fmt.Sprintf("00000000-0000-4000-8000-%012d", pos),
		Type:          "collection.status-changed",
		SchemaVersion: 1,
		Tenant:        "client-1",
		Stream:        stream,
		Revision:      rev,
		Position:      pos,
		OccurredAt:    time.Now().UTC().Truncate(time.Millisecond),
		Payload:       json.RawMessage(`{"status":"IN_PROGRESS"}`),
	}
}

func toKafka(t testing.TB, e eventschema.Envelope) kafkago.Message {
	t.Helper()
	m, err := Message(e)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func publish(t testing.TB, conn Conn, msgs ...kafkago.Message) {
	t.Helper()
	w := NewWriter(conn)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// collector runs Consume in the background and records every batch it handles.
type collector struct {
	mu      sync.Mutex
	batches [][]eventschema.Envelope
	infos   []BatchInfo
	cancel  context.CancelFunc
	done    chan error
	changed chan struct{}
}

func consumeInBackground(t testing.TB, conn Conn, group string, fail func(call int) error) *collector {
	t.Helper()
	return consumeWith(t, ConsumerConfig{Kafka: conn, GroupID: group}, fail)
}

// consumeWith is consumeInBackground with the rest of cfg (Follow) as given.
func consumeWith(t testing.TB, base ConsumerConfig, fail func(call int) error) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{cancel: cancel, done: make(chan error, 1), changed: make(chan struct{}, 1)}
	calls := 0
	cfg := ConsumerConfig{
		Kafka: base.Kafka, GroupID: base.GroupID, Topics: eventschema.Topics(), Follow: base.Follow, OnRejoin: base.OnRejoin,
		CommitInterval: base.CommitInterval,
		OnBatch: func(info BatchInfo) {
			c.mu.Lock()
			c.infos = append(c.infos, info)
			c.mu.Unlock()
			c.signal()
		},
	}
	go func() {
		c.done <- Consume(ctx, cfg, testLogger(t), func(_ context.Context, batch []eventschema.Envelope) error {
			calls++
			c.mu.Lock()
			c.batches = append(c.batches, append([]eventschema.Envelope(nil), batch...))
			c.mu.Unlock()
			c.signal()
			if fail != nil {
				return fail(calls)
			}
			return nil
		})
	}()
	t.Cleanup(func() { c.stop(t) })
	return c
}

func (c *collector) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// stop cancels Consume and waits for it to leave the group.
func (c *collector) stop(t testing.TB) {
	t.Helper()
	if c.cancel == nil {
		return
	}
	c.cancel()
	c.cancel = nil
	select {
	case err := <-c.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Consume returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Consume did not return after cancel")
	}
}

// waitFor polls cond (under the collector's lock) until it holds or the timeout passes.
func (c *collector) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// handled returns the events of every batch, in handling order.
func (c *collector) handled() []eventschema.Envelope {
	var out []eventschema.Envelope
	for _, b := range c.batches {
		out = append(out, b...)
	}
	return out
}

func (c *collector) committedEvents() int {
	n := 0
	for _, i := range c.infos {
		if i.Committed {
			n += i.Events
		}
	}
	return n
}

func TestEmbeddedCreatesTopics(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	for _, topic := range append(eventschema.Topics(), RelayCheckpointTopic) {
		info := e.cluster.TopicInfo(topic)
		if info == nil {
			t.Fatalf("topic %s missing", topic)
		}
		if got := info.Configs["retention.ms"]; got == nil || *got != "-1" {
			t.Errorf("topic %s retention.ms = %v, want -1", topic, got)
		}
	}
	if n := len(e.cluster.PartitionInfos(RelayCheckpointTopic)); n != 1 {
		t.Errorf("checkpoint topic has %d partitions, want 1", n)
	}
	if n := len(e.cluster.PartitionInfos(eventschema.Topic("collection"))); n != DefaultPartitions {
		t.Errorf("collection topic has %d partitions, want %d", n, DefaultPartitions)
	}
}

func TestEmbeddedRefusesSharedDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEmbedded(t, dir)
	if second, err := StartEmbedded(dir, testLogger(t)); err == nil {
		second.Close()
		t.Fatal("a second broker started on a data directory in use")
	}
	e.Close()
	startEmbedded(t, dir) // free again once the first one closed
}

// TestEmbeddedRestartKeepsLogAndOffsets produces, consumes part of the log with a group,
// restarts the broker on the same directory and checks that both the messages and the
// group's committed offsets are still there.
func TestEmbeddedRestartKeepsLogAndOffsets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	e := startEmbedded(t, dir, WithPort(port))
	if want := fmt.Sprintf("127.0.0.1:%d", port); e.Brokers()[0] != want {
		t.Fatalf("brokers %v, want %s", e.Brokers(), want)
	}
	var first []kafkago.Message
	for i := range 10 {
		first = append(first, toKafka(t, envelope(fmt.Sprintf("collection-%d", i%3), uint64(i/3), uint64(i+1))))
	}
	publish(t, e.Conn(), first...)

	c := consumeInBackground(t, e.Conn(), "restart-group", nil)
	c.waitFor(t, "10 committed events", func() bool { return c.committedEvents() == 10 })
	c.stop(t)
	e.Close()

	e = startEmbedded(t, dir, WithPort(port)) // the same port is free again at once
	// The whole log is still there, from offset zero.
	if got := countMessages(t, e.Conn(), eventschema.Topic("collection")); got != 10 {
		t.Fatalf("after restart the collection topic holds %d messages, want 10", got)
	}
	// The group resumes after its committed offsets: it sees only what comes next.
	publish(t, e.Conn(), toKafka(t, envelope("collection-9", 0, 11)))
	c = consumeInBackground(t, e.Conn(), "restart-group", nil)
	c.waitFor(t, "the new event", func() bool { return len(c.handled()) >= 1 })
	time.Sleep(100 * time.Millisecond) // room for a wrongly redelivered old batch to show up
	c.mu.Lock()
	got := c.handled()
	c.mu.Unlock()
	if len(got) != 1 || got[0].Position != 11 {
		t.Fatalf("after restart the group handled %d events (first position %d), want only position 11", len(got), got[0].Position)
	}
}

// TestEmbeddedCrashKeepsAcknowledgedWrites copies the data directory of a running broker
// (what a killed process leaves behind, since Close never runs) and starts a broker on the
// copy.
func TestEmbeddedCrashKeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, err := StartEmbedded(dir, testLogger(t)) // with SyncWrites, as samla run uses it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	var msgs []kafkago.Message
	for i := range 20 {
		msgs = append(msgs, toKafka(t, envelope(fmt.Sprintf("consent-%d", i%4), uint64(i/4), uint64(i+1))))
	}
	publish(t, e.Conn(), msgs...)
	c := consumeInBackground(t, e.Conn(), "crash-group", nil)
	c.waitFor(t, "20 committed events", func() bool { return c.committedEvents() == 20 })
	c.stop(t)

	crashed := filepath.Join(t.TempDir(), "crashed")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatalf("copy data dir: %v", err)
	}
	// os.CopyFS creates files 0644, which the password file may not be.
	if err := os.Chmod(filepath.Join(crashed, PasswordFileName), 0o600); err != nil {
		t.Fatal(err)
	}
	e2 := startEmbedded(t, crashed)
	if got := countMessages(t, e2.Conn(), eventschema.Topic("consent")); got != 20 {
		t.Fatalf("after a crash the consent topic holds %d messages, want 20", got)
	}
	publish(t, e2.Conn(), toKafka(t, envelope("consent-9", 0, 21)))
	c = consumeInBackground(t, e2.Conn(), "crash-group", nil)
	c.waitFor(t, "the new event", func() bool { return len(c.handled()) >= 1 })
	c.mu.Lock()
	got := c.handled()
	c.mu.Unlock()
	if got[0].Position != 21 {
		t.Fatalf("after a crash the group restarted at position %d, want 21 (offsets lost)", got[0].Position)
	}
}

// countMessages reads a topic's partitions from the start, without a group.
func countMessages(t testing.TB, kc Conn, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kc.Dialer().DialContext(ctx, "tcp", kc.Brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range parts {
		pc, err := kc.Dialer().DialLeader(ctx, "tcp", kc.Brokers[0], topic, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		first, last, err := pc.ReadOffsets()
		pc.Close()
		if err != nil {
			t.Fatal(err)
		}
		total += int(last - first)
	}
	return total
}

func TestConsumeCommitsOnlyAfterHandleSucceeds(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	var msgs []kafkago.Message
	for i := range 5 {
		msgs = append(msgs, toKafka(t, envelope("cancellation-a", uint64(i), uint64(i+1))))
	}
	publish(t, e.Conn(), msgs...)

	failure := errors.New("read model unavailable")
	c := consumeInBackground(t, e.Conn(), "retry-group", func(call int) error {
		if call == 1 {
			return failure
		}
		return nil
	})
	c.waitFor(t, "5 committed events", func() bool { return c.committedEvents() == 5 })
	c.mu.Lock()
	if len(c.batches) < 2 {
		t.Fatalf("handle called %d times, want a failed call and its retry", len(c.batches))
	}
	failed, retried := c.batches[0], c.batches[1]
	if len(failed) != len(retried) {
		t.Fatalf("retry got %d events, the failed call %d: want the same batch", len(retried), len(failed))
	}
	for i := range failed {
		if failed[i].EventID != retried[i].EventID {
			t.Fatalf("retry differs from the failed batch at %d", i)
		}
	}
	if c.infos[0].Attempts != 2 {
		t.Errorf("first committed batch took %d attempts, want 2", c.infos[0].Attempts)
	}
	c.mu.Unlock()
	c.stop(t)

	// A new member of the group starts after the committed offsets.
	publish(t, e.Conn(), toKafka(t, envelope("cancellation-a", 5, 6)))
	c2 := consumeInBackground(t, e.Conn(), "retry-group", nil)
	c2.waitFor(t, "the new event", func() bool { return len(c2.handled()) >= 1 })
	time.Sleep(100 * time.Millisecond)
	c2.mu.Lock()
	defer c2.mu.Unlock()
	if got := c2.handled(); len(got) != 1 || got[0].Position != 6 {
		t.Fatalf("second consumer handled %d events, want only position 6", len(got))
	}
}

// TestConsumeCommitsEveryBatchWithoutInterval: with a negative CommitInterval each batch's
// offsets are with the broker before the next batch, as with the interval after a stop.
func TestConsumeCommitsEveryBatchWithoutInterval(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	publish(t, e.Conn(), toKafka(t, envelope("client-b", 0, 1)), toKafka(t, envelope("client-b", 1, 2)))
	c := consumeWith(t, ConsumerConfig{Kafka: e.Conn(), GroupID: "sync-group", CommitInterval: -1}, nil)
	c.waitFor(t, "2 committed events", func() bool { return c.committedEvents() == 2 })
	// With the broker before the consumer leaves its group (which commits what is pending,
	// interval or not).
	if got := committedOffset(t, e.Conn(), "sync-group", eventschema.Topic("client")); got != 2 {
		t.Fatalf("the group's committed offset before the stop is %d, want 2 (both events)", got)
	}
	c.stop(t)

	publish(t, e.Conn(), toKafka(t, envelope("client-b", 2, 3)))
	c2 := consumeWith(t, ConsumerConfig{Kafka: e.Conn(), GroupID: "sync-group", CommitInterval: -1}, nil)
	c2.waitFor(t, "the new event", func() bool { return len(c2.handled()) >= 1 })
	time.Sleep(100 * time.Millisecond) // room for a wrongly redelivered old batch to show up
	c2.mu.Lock()
	defer c2.mu.Unlock()
	if got := c2.handled(); len(got) != 1 || got[0].Position != 3 {
		t.Fatalf("second consumer handled %d events, want only position 3", len(got))
	}
}

// committedOffset is the offset group has committed on partition 0 of topic (-1 for none).
func committedOffset(t *testing.T, conn Conn, group, topic string) int64 {
	t.Helper()
	client := &kafkago.Client{Addr: kafkago.TCP(conn.Brokers...), Timeout: 5 * time.Second, Transport: conn.transport()}
	resp, err := client.OffsetFetch(context.Background(), &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0}}})
	if err != nil || resp.Error != nil {
		t.Fatalf("fetch the offsets of %s: %v, %v", group, err, resp.Error)
	}
	for _, p := range resp.Topics[topic] {
		if p.Partition == 0 {
			return p.CommittedOffset
		}
	}
	return -1
}

// TestConsumeNeverCommitsFailedBatch stops a consumer whose handler never succeeds: the
// next member of the group gets the same events.
func TestConsumeNeverCommitsFailedBatch(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	publish(t, e.Conn(), toKafka(t, envelope("client-a", 0, 1)), toKafka(t, envelope("client-a", 1, 2)))
	c := consumeInBackground(t, e.Conn(), "failing-group", func(int) error { return errors.New("down") })
	c.waitFor(t, "two failed attempts", func() bool { return len(c.batches) >= 2 })
	c.stop(t)
	c.mu.Lock()
	if len(c.infos) != 0 {
		t.Fatalf("%d batches reported done while handle kept failing", len(c.infos))
	}
	c.mu.Unlock()

	c2 := consumeInBackground(t, e.Conn(), "failing-group", nil)
	c2.waitFor(t, "both events again", func() bool { return c2.committedEvents() == 2 })
	c2.mu.Lock()
	defer c2.mu.Unlock()
	if got := c2.handled(); got[0].Position != 1 || got[1].Position != 2 {
		t.Fatalf("redelivered positions %d, %d; want 1, 2", got[0].Position, got[1].Position)
	}
}

func TestConsumeSkipsPoisonMessages(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	topic := eventschema.Topic("user")
	good := toKafka(t, envelope("user-1", 0, 2))
	publish(t, e.Conn(),
		kafkago.Message{Topic: topic, Key: []byte("user-1"), Value: []byte("not json")},
		kafkago.Message{Topic: topic, Key: []byte("user-1"), Value: []byte(`{"payload":{}}`)},
		good)

	c := consumeInBackground(t, e.Conn(), "poison-group", nil)
	c.waitFor(t, "the good event", func() bool { return len(c.handled()) == 1 })
	c.waitFor(t, "skips counted", func() bool {
		skipped := 0
		for _, i := range c.infos {
			skipped += i.Skipped
		}
		return skipped == 2
	})
	c.stop(t)

	// Everything, poison included, was committed: a new member sees nothing old.
	publish(t, e.Conn(), toKafka(t, envelope("user-1", 1, 3)))
	c2 := consumeInBackground(t, e.Conn(), "poison-group", nil)
	c2.waitFor(t, "the new event", func() bool { return len(c2.handled()) >= 1 })
	c2.mu.Lock()
	defer c2.mu.Unlock()
	if got := c2.handled(); got[0].Position != 3 {
		t.Fatalf("second consumer started at position %d, want 3", got[0].Position)
	}
}

func TestEnsureTopics(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics := []string{"samla.extra.events", eventschema.Topic("collection")}
	for range 2 { // the second call finds them all and succeeds
		if err := EnsureTopics(ctx, e.Conn(), topics, 3); err != nil {
			t.Fatalf("EnsureTopics: %v", err)
		}
	}
	info := e.cluster.TopicInfo("samla.extra.events")
	if info == nil {
		t.Fatal("topic not created")
	}
	if got := info.Configs["retention.ms"]; got == nil || *got != "-1" {
		t.Errorf("retention.ms = %v, want -1", got)
	}
	if n := len(e.cluster.PartitionInfos("samla.extra.events")); n != 3 {
		t.Errorf("%d partitions, want 3", n)
	}
	if n := len(e.cluster.PartitionInfos(eventschema.Topic("collection"))); n != DefaultPartitions {
		t.Errorf("existing topic changed to %d partitions", n)
	}
	if err := EnsureCheckpointTopic(ctx, e.Conn()); err != nil {
		t.Fatalf("EnsureCheckpointTopic: %v", err)
	}
}

// BenchmarkPublishToConsume measures the latency from a synchronous, acknowledged write of
// one event to its arrival in a consumer's handler, on the embedded broker.
func BenchmarkPublishToConsume(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("syncWrites=%v", sync), func(b *testing.B) {
			e, err := StartEmbedded(b.TempDir(), testLogger(b), WithSyncWrites(sync))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			arrived := make(chan struct{}, 1)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- Consume(ctx, ConsumerConfig{Kafka: e.Conn(), GroupID: "bench", Topics: eventschema.Topics(), MaxWait: time.Millisecond},
					testLogger(b), func(_ context.Context, batch []eventschema.Envelope) error {
						for range batch {
							arrived <- struct{}{}
						}
						return nil
					})
			}()
			w := NewWriter(e.Conn())
			defer w.Close()
			// Warm up until the group is joined.
			if err := w.WriteMessages(ctx, toKafka(b, envelope("collection-w", 0, 1))); err != nil {
				b.Fatal(err)
			}
			<-arrived
			b.ResetTimer()
			for i := range b.N {
				if err := w.WriteMessages(ctx, toKafka(b, envelope("collection-b", uint64(i), uint64(i+2)))); err != nil {
					b.Fatal(err)
				}
				<-arrived
			}
			b.StopTimer()
			cancel()
			<-done
		})
	}
}

// untilFollowing publishes events of stream from revision next on until the follower f handles
// one (it joins at some moment; only events published from then on reach it), and returns the
// revision of the last one published.
func untilFollowing(t *testing.T, e *Embedded, f *collector, stream string, next uint64) uint64 {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; next++ {
		publish(t, e.Conn(), toKafka(t, envelope(stream, next, next+1)))
		f.mu.Lock()
		got := len(f.handled())
		f.mu.Unlock()
		if got > 0 {
			return next
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower never got an event published after it started")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsumeFollowing: a follower starts at the end of the stream and commits nothing, so a
// durable member of the same group later starts from the beginning.
func TestConsumeFollowing(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	for i := range 3 {
		publish(t, e.Conn(), toKafka(t, envelope("collection-f", uint64(i), uint64(i+1))))
	}
	f := consumeWith(t, ConsumerConfig{Kafka: e.Conn(), GroupID: "follower-group", Follow: true}, nil)
	next := untilFollowing(t, e, f, "collection-f", 3)
	f.stop(t)
	f.mu.Lock()
	for _, ev := range f.handled() {
		if ev.Position <= 3 {
			t.Errorf("the follower got position %d, published before it started", ev.Position)
		}
	}
	for _, info := range f.infos {
		if info.Committed {
			t.Error("the follower committed offsets")
		}
	}
	f.mu.Unlock()
	d := consumeInBackground(t, e.Conn(), "follower-group", nil)
	d.waitFor(t, "every event from the start", func() bool { return len(d.handled()) >= int(next)+1 })
}

// TestConsumeEventLargerThanAFetch: a fetch is bounded (fetchMaxBytes) to bound the broker's
// memory, yet an event bigger than the bound (up to message.max.bytes) is still consumed, with
// the events around it.
func TestConsumeEventLargerThanAFetch(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	big := envelope("collection-big", 0, 2)
	big.Payload = json.RawMessage(`{"status":"IN_PROGRESS","pad":"` + strings.Repeat("x", 3*fetchMaxBytes) + `"}`)
	publish(t, e.Conn(),
		toKafka(t, envelope("collection-big", 0, 1)), toKafka(t, big), toKafka(t, envelope("collection-big", 1, 3)))
	c := consumeInBackground(t, e.Conn(), "big-group", nil)
	c.waitFor(t, "3 events", func() bool { return len(c.handled()) >= 3 })
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.handled()
	if len(got) != 3 || got[1].Position != 2 || len(got[1].Payload) != len(big.Payload) {
		t.Fatalf("handled %d events; want 3 with the big one (%d bytes) whole in the middle", len(got), len(big.Payload))
	}
}
