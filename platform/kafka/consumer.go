package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/retry"
)

// ConsumerConfig configures Consume.
type ConsumerConfig struct {
	// Kafka is the cluster to read, with the credentials to read it.
	Kafka Conn
	// GroupID is the consumer group; offsets are committed under it.
	GroupID string
	// Topics are the topics the group reads.
	Topics []string
	// MaxBatch caps the number of messages handed to one handle call (default 500).
	MaxBatch int
	// MaxWait is how long a batch keeps gathering after its first message before it is handled
	// (default 10 ms). It trades a few milliseconds of latency for fewer, larger handler calls
	// (one read-model transaction per batch instead of per event).
	MaxWait time.Duration
	// CommitInterval is how often handled offsets are committed (default
	// DefaultCommitInterval); negative commits every batch synchronously before the next is
	// fetched. Offsets are only ever committed for batches handle has returned nil for, and the
	// reader commits what is pending when it leaves the group (stop, rebalance), so the
	// interval only bounds what a crash makes the group handle again.
	CommitInterval time.Duration
	// OnBatch, when set, is called after each batch has been handled and its offsets
	// committed (or, with a CommitInterval, handed to the reader's next commit), so that the
	// caller can keep metrics (lag = now - Newest, skipped messages).
	OnBatch func(BatchInfo)
	// Follow makes a follower rather than a member of a durable group: it starts at the end of
	// every partition (what came before it is in a read model already) and commits nothing, so
	// its group, which must be unique to the process, leaves nothing behind once it stops. The
	// in-memory status view of a query process reads so.
	Follow bool
	// OnRejoin, when set, is called before the first batch handled after each join of the
	// group (the first one too). A follower, which commits nothing, starts at the end of the
	// stream at every join and so may have skipped events: this is where it learns of it.
	OnRejoin func()
}

// BatchInfo describes one batch that Consume has handled and committed.
type BatchInfo struct {
	// Events is the number of envelopes passed to handle.
	Events int
	// Skipped is the number of messages in the batch that could not be decoded and were
	// skipped (poison messages).
	Skipped int
	// Attempts is how many handle calls the batch took (1 unless handle failed).
	Attempts int
	// Newest is the latest OccurredAt in the batch (zero if it had no events).
	Newest time.Time
	// Committed reports whether the offset commit succeeded (with a CommitInterval: was
	// queued for the next commit); when it did not, the batch is redelivered to whichever
	// member next owns its partitions (handlers are idempotent).
	Committed bool
}

const (
	defaultMaxBatch = 500
	defaultMaxWait  = 10 * time.Millisecond
	// DefaultCommitInterval commits a group's offsets once a second rather than after every
	// batch. Each commit is a round trip, and the embedded broker fsyncs it to groups.log:
	// measured with 200 collections polled to COMPLETED, committing every batch cost ~15 % of
	// the CPU a collection cost (171 → 201 completed per CPU-second with 1 s). A crash makes
	// a group handle up to a second of batches again, which every handler already tolerates.
	DefaultCommitInterval = time.Second
	// fetchMaxWait is the broker-side long-poll of each partition fetch. The broker answers
	// as soon as MinBytes (1) is there, so this does not delay new messages; it only bounds
	// how often an idle partition is polled. At 250 ms an idle `samla run` allocated 7 MB and
	// used 0.64 CPU-s every 30 s, and its heap's garbage grew between the memory role's checks;
	// at 1 s, 2.3 MB and 0.23 CPU-s, with 201 → visible, POST and shutdown (0.1 s) unchanged.
	fetchMaxWait = time.Second
	// fetchMaxBytes bounds what one partition fetch asks for. The broker encodes a whole fetch
	// response in memory before sending it, and kfake keeps each connection's buffer at the
	// largest response it ever sent; a consumer behind the log gets full ones. At
	// message.max.bytes (16 MiB) per fetch the embedded broker held 34 MiB of them after a
	// 30 s POST load, with room for GiBs (every projection reads every partition, ~225
	// connections); at 1 MiB, 9 MiB. A fetch still returns a record batch larger
	// than this whole (fetch v4+ semantics, which kafka-go and kfake speak), so no event is too
	// big to consume; 1 MiB is more than a relay batch per partition (RelayMaxBatchBytes).
	fetchMaxBytes  = 1 << 20
	commitAttempts = 5
	commitTimeout  = 5 * time.Second
)

// Consume reads the topics as a member of the consumer group and hands decoded envelopes to
// handle in batches. A batch's offsets are committed only after handle returned nil; when
// handle fails the same batch is retried with capped exponential backoff, never committed
// and never skipped, so a projection that cannot write its read model stops rather than
// losing events. A message that cannot be decoded is logged, counted and skipped: it can
// never succeed, and leaving it would block its partition for good.
//
// Delivery is at-least-once: after a crash or a rebalance, messages handled but not yet
// committed are delivered again, so handle must be idempotent (by stream and revision).
// Consume returns ctx.Err() when ctx ends, and closes its reader (leaving the group) first.
func Consume(ctx context.Context, cfg ConsumerConfig, logger *slog.Logger, handle func(ctx context.Context, batch []eventschema.Envelope) error) error {
	if logger == nil {
		logger = slog.Default()
	}
	if len(cfg.Kafka.Brokers) == 0 || cfg.GroupID == "" || len(cfg.Topics) == 0 {
		return errors.New("consume: brokers, group id and topics are required")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = defaultMaxBatch
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = defaultMaxWait
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = DefaultCommitInterval
	}
	logger = logger.With("group", cfg.GroupID)

	reader := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:     cfg.Kafka.Brokers,
		Dialer:      cfg.Kafka.Dialer(),
		GroupID:     cfg.GroupID,
		GroupTopics: cfg.Topics,
		MinBytes:    1,
		MaxBytes:    fetchMaxBytes,
		MaxWait:     fetchMaxWait,
		// With an interval, CommitMessages only queues the offsets and the reader commits them
		// every interval and when it leaves the group; without, it returns once the broker
		// has them.
		CommitInterval: max(cfg.CommitInterval, 0),
		StartOffset:    startOffset(cfg.Follow),
		// kafka-go's defaults (3 s heartbeat, 30 s session, 5 s join backoff) make every
		// restart or rebalance take many seconds; these keep it to about a second while
		// staying above a real broker's 6 s group.min.session.timeout.ms.
		HeartbeatInterval: time.Second,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		JoinGroupBackoff:  time.Second,
		ReadBackoffMin:    10 * time.Millisecond,
		ReadBackoffMax:    time.Second,
		ErrorLogger: kafkago.LoggerFunc(func(format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			if strings.Contains(msg, "i/o timeout") {
				// A fetch that timed out under load; the reader reconnects and fetches again by
				// itself, so it is no news to an operator (thousands of these in a burst).
				logger.Debug("kafka reader: " + msg)
				return
			}
			logger.Warn("kafka reader: " + msg)
		}),
	})
	defer func() {
		if err := reader.Close(); err != nil {
			logger.Warn("close kafka reader", "error", err)
		}
	}()

	c := consumer{cfg: cfg, logger: logger, reader: reader, handle: handle}
	return c.run(ctx)
}

// startOffset is where a group without committed offsets starts: a follower at the end, a
// durable group at the beginning (every event, once).
func startOffset(follow bool) int64 {
	if follow {
		return kafkago.LastOffset
	}
	return kafkago.FirstOffset
}

type consumer struct {
	cfg    ConsumerConfig
	logger *slog.Logger
	reader *kafkago.Reader
	handle func(ctx context.Context, batch []eventschema.Envelope) error
}

func (c *consumer) run(ctx context.Context) error {
	msgs := make([]kafkago.Message, 0, c.cfg.MaxBatch)
	for {
		var err error
		msgs, err = c.gather(ctx, msgs[:0])
		if err != nil {
			return err
		}
		if c.cfg.OnRejoin != nil && c.reader.Stats().Rebalances > 0 {
			c.cfg.OnRejoin()
		}
		info := BatchInfo{}
		// A fresh slice per batch: a handler may keep what it was given.
		events := make([]eventschema.Envelope, 0, len(msgs))
		for _, m := range msgs {
			e, derr := eventschema.FromMessage(m.Value)
			if derr != nil {
				info.Skipped++
				// Never log the value: it may carry personal data.
				c.logger.Error("skipping undecodable kafka message", "topic", m.Topic,
					"partition", m.Partition, "offset", m.Offset, "error", derr)
				continue
			}
			events = append(events, e)
			if e.OccurredAt.After(info.Newest) {
				info.Newest = e.OccurredAt
			}
		}
		info.Events = len(events)
		if len(events) > 0 {
			if info.Attempts, err = c.handleWithRetry(ctx, events); err != nil {
				return err
			}
		}
		if !c.cfg.Follow {
			info.Committed = c.commit(ctx, msgs)
		}
		if c.cfg.OnBatch != nil {
			c.cfg.OnBatch(info)
		}
		// msgs is reused for the next batch, but until that one arrives its elements would keep
		// every message of this batch (values, headers) reachable: for an idle group, the
		// largest batch it ever had stays alive, pinning the heap spans the burst filled.
		clear(msgs)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// gather blocks for the first message, then collects more until MaxBatch or MaxWait.
func (c *consumer) gather(ctx context.Context, msgs []kafkago.Message) ([]kafkago.Message, error) {
	var fetchErrs int
	for len(msgs) == 0 {
		m, err := c.reader.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("consume: reader closed: %w", err)
			}
			// The reader retries connections itself; what surfaces here is worth a log
			// line and a pause, not giving up the group.
			fetchErrs++
			c.logger.Warn("kafka fetch failed", "error", err)
			if err := retry.Sleep(ctx, retry.Default.Delay(fetchErrs)); err != nil {
				return nil, err
			}
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) >= c.cfg.MaxBatch {
		return msgs, nil
	}
	// FetchMessage with an expired context returns without taking a message, so nothing
	// fetched is ever lost at the window's edge.
	wctx, cancel := context.WithTimeout(ctx, c.cfg.MaxWait)
	defer cancel()
	for len(msgs) < c.cfg.MaxBatch {
		m, err := c.reader.FetchMessage(wctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				c.logger.Warn("kafka fetch failed", "error", err)
			}
			break // the window is over; handle what there is
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func (c *consumer) handleWithRetry(ctx context.Context, events []eventschema.Envelope) (int, error) {
	for attempt := 1; ; attempt++ {
		err := c.handle(ctx, events)
		if err == nil {
			return attempt, nil
		}
		if ctx.Err() != nil {
			return attempt, ctx.Err()
		}
		wait := retry.Default.Delay(attempt)
		c.logger.Error("handling batch failed, retrying the same batch", "events", len(events),
			"attempt", attempt, "retry_in", wait, "error", err)
		if err := retry.Sleep(ctx, wait); err != nil {
			return attempt, err
		}
	}
}

// commit stores the batch's offsets. A commit that keeps failing (a rebalance took the
// partitions away, the coordinator moved) is given up after a few attempts: the batch has
// been handled, and at worst it is delivered again to an idempotent handler. The commit
// outlives a cancelled ctx for a moment, so that a shutdown right after a handled batch does
// not make the next start redo it.
func (c *consumer) commit(ctx context.Context, msgs []kafkago.Message) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	for attempt := 1; attempt <= commitAttempts; attempt++ {
		err := c.reader.CommitMessages(ctx, msgs...)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.logger.Warn("committing offsets failed", "messages", len(msgs), "attempt", attempt, "error", err)
		if retry.Sleep(ctx, retry.Default.Delay(attempt)) != nil {
			return false
		}
	}
	c.logger.Error("giving up committing offsets; the batch will be delivered again", "messages", len(msgs))
	return false
}
