// Package relay is the only writer to Kafka: it follows the event store's $all stream from a
// checkpoint kept in Kafka itself and publishes every event, in commit order, to its
// category's topic (key = stream), moving the checkpoint only after Kafka acknowledged the
// events (acks=all). Delivery is at-least-once: a crash between an acknowledged batch and its
// checkpoint publishes that batch again on restart, and consumers are idempotent by
// (stream, revision).
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/kafka"
	"github.com/samla/samla/platform/retry"
)

// Store is the part of the event store the relay reads: the catch-up-then-live subscription
// to every event after a global position (eventstore.Store satisfies it).
type Store interface {
	SubscribeAll(ctx context.Context, after uint64, handle func(context.Context, eventschema.Envelope) error) error
}

// Writer publishes messages synchronously and returns once they are acknowledged.
// *kafkago.Writer from kafka.NewWriter satisfies it.
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafkago.Message) error
}

// Counter and Gauge are the parts of prometheus.Counter and prometheus.Gauge the relay uses,
// so that metrics stay optional and this package does not depend on a metrics library.
type (
	Counter interface{ Add(float64) }
	Gauge   interface{ Set(float64) }
)

// Metrics are optional; nil fields are skipped.
type Metrics struct {
	// Published counts events acknowledged by Kafka (a batch republished after a failed
	// checkpoint counts again).
	Published Counter
	// PublishLag is set after each batch to now minus the OccurredAt of its last event, in
	// seconds: how far Kafka trails the event store.
	PublishLag Gauge
	// Checkpoint is the global position of the last checkpoint written.
	Checkpoint Gauge
}

// Config configures a Relay.
type Config struct {
	// Store is the event store to follow.
	Store Store
	// Kafka is used to read the checkpoint, and to build the writer when Writer is nil.
	Kafka kafka.Conn
	// Writer publishes events and checkpoints. When nil, Run creates kafka.NewWriter(Kafka)
	// for the events and kafka.NewCheckpointWriter(Kafka) for the checkpoints and closes
	// them on return; a writer passed in is the caller's to close.
	Writer Writer
	Logger *slog.Logger
	// Metrics are optional.
	Metrics Metrics
	// MaxBatch caps the events of one publish call (default and maximum
	// kafka.WriterBatchSize, 500).
	MaxBatch int
	// MaxBatchBytes caps the encoded size of one publish call (default
	// kafka.RelayMaxBatchBytes), so that no partition's share is split into several produce
	// requests. A single larger event is published alone.
	MaxBatchBytes int
	// CheckpointTopic defaults to kafka.RelayCheckpointTopic.
	CheckpointTopic string
	// BatchInterval is the least time from the start of one publish to the next (default
	// DefaultBatchInterval; negative: none). A batch whose first event comes sooner keeps
	// taking events until it has passed (or the batch is full): under a steady trickle of
	// appends each publish carries more events. Every publish is two produce requests (events,
	// checkpoint), each fsynced by the embedded broker, and a fetch and a batch in every
	// consumer group downstream, whatever its size. The first event after a quiet spell is
	// published at once.
	BatchInterval time.Duration
}

// DefaultBatchInterval bounds a busy relay to about 20 publishes a second; it adds at most
// 50 ms to an event's way to Kafka, and only while events keep coming (a client polls a
// collection about once a second, and a poll right after the 201 reads the event store). At
// 20 ms, collections created one after another over one connection and left to complete took
// 7.8 ms of CPU each (median of six runs, alternating) against 5.3 at 50 ms, and the
// harness's 800 completed 154–169 per CPU-second against 173–191: every publish costs the
// broker's fsyncs and every consumer group a fetch, a decode and a read-model transaction.
// 100 ms took no less.
const DefaultBatchInterval = 50 * time.Millisecond

// Relay publishes the event store's events to Kafka. Run only one per event store.
type Relay struct {
	cfg Config
	log *slog.Logger
}

const (
	// checkpointKey is the key of every checkpoint message, so that compaction keeps the last.
	checkpointKey = "relay"
	// recordOverhead approximates the per-record bytes Kafka adds to key, value and headers.
	recordOverhead = 64
	// shutdownGrace bounds how long a stop waits for the batch in flight and its checkpoint.
	shutdownGrace = 5 * time.Second
)

// New returns a relay; Run starts it.
func New(cfg Config) *Relay {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = kafka.WriterBatchSize
	}
	cfg.MaxBatch = min(cfg.MaxBatch, kafka.WriterBatchSize)
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = kafka.RelayMaxBatchBytes
	}
	if cfg.CheckpointTopic == "" {
		cfg.CheckpointTopic = kafka.RelayCheckpointTopic
	}
	if cfg.BatchInterval == 0 {
		cfg.BatchInterval = DefaultBatchInterval
	}
	return &Relay{cfg: cfg, log: cfg.Logger.With("role", "relay")}
}

// Run reads the checkpoint, follows the store after it and publishes until ctx ends, when it
// returns ctx.Err(). Failures of Kafka or of the subscription are retried with backoff, from
// the last acknowledged position, so Run only returns early for a broken configuration.
func (r *Relay) Run(ctx context.Context) error {
	if r.cfg.Store == nil {
		return errors.New("relay: no event store")
	}
	if len(r.cfg.Kafka.Brokers) == 0 {
		return errors.New("relay: no brokers")
	}
	w, cw := r.cfg.Writer, r.cfg.Writer
	if w == nil {
		kw, kcw := kafka.NewWriter(r.cfg.Kafka), kafka.NewCheckpointWriter(r.cfg.Kafka)
		defer func() {
			for _, x := range []*kafkago.Writer{kw, kcw} {
				if err := x.Close(); err != nil {
					r.log.Warn("close kafka writer", "error", err)
				}
			}
		}()
		w, cw = kw, kcw
	}

	var acked uint64
	err := r.retry(ctx, "reading relay checkpoint", func() (err error) {
		acked, err = ReadCheckpoint(ctx, r.cfg.Kafka, r.cfg.CheckpointTopic)
		return err
	})
	if err != nil {
		return err
	}
	r.log.Info("relay starting", "checkpoint", acked)
	setGauge(r.cfg.Metrics.Checkpoint, float64(acked))

	for attempt := 1; ; attempt++ {
		next, err := r.follow(ctx, w, cw, acked)
		if next > acked {
			attempt = 1 // progress was made: the failure is a fresh one
		}
		acked = next
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := retry.Default.Delay(attempt)
		r.log.Error("event store subscription ended, resubscribing", "after", acked, "retry_in", wait, "error", err)
		if err := retry.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// follow subscribes after acked and publishes until the subscription or ctx ends. It returns
// the position of the last checkpointed event, from which the next subscription resumes;
// events queued but not yet acknowledged are simply read again.
func (r *Relay) follow(ctx context.Context, w, cw Writer, acked uint64) (uint64, error) {
	subCtx, cancel := context.WithCancel(ctx)
	b := &batcher{
		r: r,
		// The subscription runs ahead into this queue while a batch is being acknowledged;
		// its size bounds how far ahead.
		queue: make(chan eventschema.Envelope, 2*r.cfg.MaxBatch),
		ended: make(chan struct{}),
		last:  acked,
	}
	go func() {
		defer close(b.ended)
		b.subErr = r.cfg.Store.SubscribeAll(subCtx, acked, func(ctx context.Context, e eventschema.Envelope) error {
			select {
			case b.queue <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	// The subscription must be over before Run returns, so that the caller can close the
	// store behind it.
	defer func() {
		cancel()
		<-b.ended
	}()

	// A batch that has been taken is finished even when ctx ends meanwhile: its writes run
	// under opCtx, which outlives ctx by shutdownGrace, so that a clean stop leaves a
	// checkpoint that matches the log and a restart republishes nothing. Retries stop with
	// ctx.
	opCtx, opCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer opCancel()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(shutdownGrace, opCancel) })
	defer stopGrace()

	for {
		if ctx.Err() != nil {
			return acked, ctx.Err()
		}
		batch, msgs, err := b.next(ctx)
		if err != nil {
			return acked, err
		}
		last := batch[len(batch)-1]
		start := time.Now()
		if r.cfg.BatchInterval > 0 {
			b.gatherUntil = start.Add(r.cfg.BatchInterval)
		}
		err = r.retry(ctx, "publishing batch", func() error { return w.WriteMessages(opCtx, msgs...) },
			"events", len(msgs), "lastPosition", last.Position)
		if err != nil {
			return acked, err // only ctx ends the retries
		}
		published := time.Now()
		if c := r.cfg.Metrics.Published; c != nil {
			c.Add(float64(len(batch)))
		}
		setGauge(r.cfg.Metrics.PublishLag, time.Since(last.OccurredAt).Seconds())
		cp := kafkago.Message{
			Topic: r.cfg.CheckpointTopic,
			Key:   []byte(checkpointKey),
			Value: []byte(strconv.FormatUint(last.Position, 10)),
		}
		err = r.retry(ctx, "writing relay checkpoint", func() error { return cw.WriteMessages(opCtx, cp) },
			"position", last.Position)
		if err != nil {
			return acked, err
		}
		acked = last.Position
		setGauge(r.cfg.Metrics.Checkpoint, float64(acked))
		r.log.Debug("batch published", "events", len(batch), "checkpoint", acked,
			"publish", published.Sub(start), "checkpointWrite", time.Since(published))
		b.release()
	}
}

// batcher turns the subscription's one-event-at-a-time handler calls into batches.
type batcher struct {
	r      *Relay
	queue  chan eventschema.Envelope
	ended  chan struct{} // closed when SubscribeAll has returned; subErr is then set
	subErr error
	// held is an event that did not fit the previous batch by size; it starts the next one.
	held *eventschema.Envelope
	// last is the position of the last event put in a batch.
	last uint64

	batch []eventschema.Envelope
	msgs  []kafkago.Message
	size  int
	// gatherUntil is when the next batch may be published at the earliest (Config.BatchInterval
	// after the last publish started): a batch begun sooner waits for more events until then.
	gatherUntil time.Time
}

// next waits for the first event, then takes what is queued up to the batch limits. Batches
// form on their own under load, because events queue up while the previous batch is being
// acknowledged (and kafka-go's writer holds each call for its BatchTimeout); until gatherUntil
// it also waits for more. It fails only when ctx or the subscription ended (or an event cannot
// be encoded) before a batch could be returned.
func (b *batcher) next(ctx context.Context) ([]eventschema.Envelope, []kafkago.Message, error) {
	b.batch, b.msgs, b.size = b.batch[:0], b.msgs[:0], 0
	if b.held != nil {
		e := *b.held
		b.held = nil
		if _, err := b.add(e); err != nil {
			return nil, nil, err
		}
	}
	for len(b.batch) == 0 {
		select {
		case e := <-b.queue:
			if _, err := b.add(e); err != nil {
				return nil, nil, err
			}
		case <-b.ended:
			// Events the subscription queued before it ended are still good.
			select {
			case e := <-b.queue:
				if _, err := b.add(e); err != nil {
					return nil, nil, err
				}
				continue
			default:
			}
			return nil, nil, fmt.Errorf("subscription: %w", errOrEnded(b.subErr))
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for len(b.batch) < b.r.cfg.MaxBatch {
		var e eventschema.Envelope
		select {
		case e = <-b.queue:
		default:
			wait := time.Until(b.gatherUntil)
			if wait <= 0 {
				return b.batch, b.msgs, nil
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			}
			select {
			case e = <-b.queue:
			case <-timer.C:
				return b.batch, b.msgs, nil
			case <-b.ended:
				// The next call takes what the subscription queued before it ended.
				return b.batch, b.msgs, nil
			case <-ctx.Done():
				// The batch is published: a clean stop leaves a checkpoint that matches the log.
				return b.batch, b.msgs, nil
			}
		}
		fits, err := b.add(e)
		if err != nil {
			return nil, nil, err
		}
		if !fits {
			b.held = &e
			break
		}
	}
	return b.batch, b.msgs, nil
}

// release drops the published batch's events and messages. The slices are reused for the
// next batch, but until it comes their elements would keep the last batch's payloads and
// encoded values alive while the relay is idle.
func (b *batcher) release() {
	clear(b.batch) // next starts the next batch at length 0
	clear(b.msgs)
}

// add appends e to the batch unless that would pass MaxBatchBytes (a first event always
// fits).
func (b *batcher) add(e eventschema.Envelope) (bool, error) {
	if e.Position <= b.last {
		// The store promises strictly increasing positions after `after`; a repeated one
		// would only be a duplicate on Kafka.
		b.r.log.Warn("event store repeated a position; skipped", "position", e.Position, "after", b.last)
		return true, nil
	}
	m, err := kafka.Message(e)
	if err != nil {
		// Never skipped: the relay stops here (retrying) rather than lose an event.
		return false, fmt.Errorf("relay: %w", err)
	}
	n := messageSize(m)
	if len(b.batch) > 0 && b.size+n > b.r.cfg.MaxBatchBytes {
		return false, nil
	}
	b.batch, b.msgs = append(b.batch, e), append(b.msgs, m)
	b.size += n
	b.last = e.Position
	return true, nil
}

func errOrEnded(err error) error {
	if err == nil {
		return errors.New("ended without error")
	}
	return err
}

// retry runs op until it succeeds, with capped exponential backoff, and gives up only when
// ctx ends. Publishing retries the whole batch: a failed write may have stored part of it, and
// writing it all again only duplicates, in order, what consumers already ignore.
func (r *Relay) retry(ctx context.Context, what string, op func() error, logArgs ...any) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := retry.Default.Delay(attempt)
		r.log.Error(what+" failed, retrying", append(logArgs, "attempt", attempt, "retry_in", wait, "error", err)...)
		if err := retry.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

func messageSize(m kafkago.Message) int {
	n := recordOverhead + len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

func setGauge(g Gauge, v float64) {
	if g != nil {
		g.Set(v)
	}
}

// ReadCheckpoint returns the global position in the last message of the single-partition
// checkpoint topic, or 0 when the topic is empty (nothing published yet).
func ReadCheckpoint(ctx context.Context, conn kafka.Conn, topic string) (uint64, error) {
	if len(conn.Brokers) == 0 {
		return 0, errors.New("read checkpoint: no brokers")
	}
	dialer := conn.Dialer()
	var errs []error
	for _, b := range conn.Brokers {
		pos, err := readCheckpointFrom(ctx, dialer, b, topic)
		if err == nil {
			return pos, nil
		}
		errs = append(errs, err)
	}
	return 0, fmt.Errorf("read checkpoint: %w", errors.Join(errs...))
}

func readCheckpointFrom(ctx context.Context, dialer *kafkago.Dialer, broker, topic string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := dialer.DialLeader(ctx, "tcp", broker, topic, 0)
	if err != nil {
		return 0, fmt.Errorf("dial %s: %w", broker, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return 0, fmt.Errorf("set deadline: %w", err)
		}
	}
	// With more partitions the hash balancer could put a checkpoint where this never looks,
	// and the relay would restart from an older one.
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		return 0, fmt.Errorf("read partitions of %s: %w", topic, err)
	}
	if len(parts) != 1 {
		return 0, fmt.Errorf("checkpoint topic %s has %d partitions, want exactly 1", topic, len(parts))
	}
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return 0, fmt.Errorf("read offsets of %s: %w", topic, err)
	}
	if last <= first {
		return 0, nil
	}
	if _, err := conn.Seek(last-1, kafkago.SeekAbsolute); err != nil {
		return 0, fmt.Errorf("seek %s to %d: %w", topic, last-1, err)
	}
	batch := conn.ReadBatch(1, 1<<20)
	var value []byte
	for {
		m, err := batch.ReadMessage()
		if err != nil {
			break
		}
		value = m.Value
	}
	if err := batch.Close(); err != nil {
		return 0, fmt.Errorf("read %s at %d: %w", topic, last-1, err)
	}
	if value == nil {
		return 0, fmt.Errorf("read %s at %d: no message", topic, last-1)
	}
	pos, err := strconv.ParseUint(string(value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse checkpoint in %s: %w", topic, err)
	}
	return pos, nil
}
