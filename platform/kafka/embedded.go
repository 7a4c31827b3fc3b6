// Package kafka is the plumbing every role shares to talk to Kafka: an embedded broker for
// `samla run`, topic setup for real clusters, the one writer configuration the relay uses and
// the batch consumer that projections and connectors build on. It wraps
// github.com/segmentio/kafka-go (imported as kafkago) and, for the embedded broker,
// github.com/twmb/franz-go/pkg/kfake.
package kafka

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/samla/samla/eventschema"
)

// RelayCheckpointTopic is the single-partition topic in which the relay keeps the global
// position of the last event it has published (the value of the last message, in decimal).
// Keeping it in Kafka itself means it is lost only together with the log it describes: a
// wiped Kafka gets everything republished instead of a stale checkpoint skipping events.
const RelayCheckpointTopic = "samla.relay.checkpoint"

// DefaultPartitions is the partition count of the event topics in embedded mode. One process
// consumes them and each consumer group handles its batches in order anyway, so more partitions
// only add fetch loops: every partition of every topic a group reads is a connection, a
// goroutine and a fetch buffer on both sides (a load run's heap held ~30 MB of them with 4).
// Clusters get SAMLA_KAFKA_PARTITIONS, and the tests of per-stream order create their own.
const DefaultPartitions = 1

// maxMessageBytes is the embedded broker's message.max.bytes. Kafka's 1 MiB default is too
// tight for events that carry collected insurance data; the relay keeps its own batches well
// below this, so only a single oversized event could ever reach it.
const maxMessageBytes = 16 << 20

// Embedded is an in-process Kafka-protocol broker whose log and consumer-group offsets live
// under a data directory and survive restarts.
//
// Quirks of kfake's DataDir persistence (read from its source at the pinned version and
// covered by the tests in this package):
//   - SeedTopics only applies to a fresh directory: when meta.json exists the persisted state
//     is loaded and the seed list is ignored, so a topic added to eventschema.Topics() later
//     would never appear. StartEmbedded therefore creates every missing topic after start.
//   - Produced batches go to segment files as they arrive, but without SyncWrites they are
//     only fsynced on segment roll and Close: a killed process keeps them (page cache), a
//     power loss may not. Group commits go to groups.log the same way. Close writes a full
//     snapshot. WithSyncWrites(true) (the default here) fsyncs every batch, which is what
//     "acknowledged with acks=all" should mean for the relay checkpoint.
//   - Close saves the classic-group members that are still connected, and the next start
//     restores them until their session timeout runs out, so a consumer that joins right
//     after a restart waits out that timeout before it gets partitions (measured: 10 s with
//     Consume's session timeout). Stop consumers before the broker; then they have left the
//     group and a restart rejoins in milliseconds. A crash saves no members, so it has no
//     such delay.
//   - Committed group offsets expire after offsets.retention.minutes (7 days by default) once
//     a group is empty, which would make every projection replay from the start after a
//     week-long stop. The retention is raised to the maximum.
//   - Without Ports the listener port is random on every start; take Brokers() each time.
//   - Nothing stops two brokers from sharing a directory, so StartEmbedded takes a lock file
//     (.lock, flock) in it.
//   - With EnableSASL every request but ApiVersions and the SASL handshake is refused until the
//     connection has authenticated. No ACLs are enabled, so an authenticated user may do
//     everything (samla's user is a superuser anyway, which would also bypass ACLs). kfake
//     keeps its SASL users in sasl.json (salted SCRAM keys, mode 0644) and, when that file
//     exists, loads them in place of the configured ones: a directory from before SASL has an
//     empty one, which would leave no user at all, and a stale one would lock samla out after a
//     new password file. StartEmbedded therefore deletes sasl.json before the start (the
//     password file is the one source of the credential) and narrows it to 0600 after start
//     and close. kfake's control functions (topicLimits) run before its SASL check and cannot
//     tell whether a connection has authenticated: they refuse oversized requests of anyone,
//     and an unauthenticated CreateTopics within the bounds still counts against
//     maxCreatedPartitions before kfake refuses it. So an outsider can use up that budget
//     (the service's own topics are created in-process, past it), though not create anything.
//   - Topics without an explicit retention.ms fall back to log.retention.ms (7 days), and
//     retention is enforced on every topic as soon as any topic has a retention config. Every
//     topic here is created with retention.ms=-1 and the broker default is -1 too.
type Embedded struct {
	cluster   *kfake.Cluster
	brokers   []string
	dataDir   string
	mechanism sasl.Mechanism
	logger    *slog.Logger
	unlock    func()
	closeOnce sync.Once
	// partitions is how many partitions the event topics get.
	partitions int
}

type embeddedConfig struct {
	port       int
	syncWrites bool
	partitions int
	// authTimeout replaces brokerAuthTimeout when positive (tests).
	authTimeout time.Duration
}

// EmbeddedOption adjusts StartEmbedded.
type EmbeddedOption func(*embeddedConfig)

// WithPort makes the broker listen on 127.0.0.1:port instead of a random port, so that
// outside tools (kcat, kafka-console-consumer) can be pointed at a running `samla run`.
func WithPort(port int) EmbeddedOption { return func(c *embeddedConfig) { c.port = port } }

// WithPartitions gives the event topics n partitions instead of DefaultPartitions: the tests of
// the relay's per-stream partitioning need several.
func WithPartitions(n int) EmbeddedOption { return func(c *embeddedConfig) { c.partitions = n } }

// withAuthTimeout shortens brokerAuthTimeout, for the tests of the broker's port.
func withAuthTimeout(d time.Duration) EmbeddedOption {
	return func(c *embeddedConfig) { c.authTimeout = d }
}

// WithSyncWrites turns per-batch fsync on (default) or off (faster, for throwaway data).
func WithSyncWrites(on bool) EmbeddedOption { return func(c *embeddedConfig) { c.syncWrites = on } }

// StartEmbedded starts a single-broker cluster on 127.0.0.1 whose state lives in dataDir, and
// makes sure every event topic and the relay checkpoint topic exist.
func StartEmbedded(dataDir string, logger *slog.Logger, opts ...EmbeddedOption) (*Embedded, error) {
	if logger == nil {
		logger = slog.Default()
	}
	cfg := embeddedConfig{syncWrites: true, partitions: DefaultPartitions}
	for _, o := range opts {
		o(&cfg)
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("embedded kafka: create data dir: %w", err)
	}
	unlock, err := lockDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka: %w", err)
	}
	password, err := loadOrCreatePassword(filepath.Join(dataDir, PasswordFileName))
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded kafka: %w", err)
	}
	mechanism, err := NewMechanism(EmbeddedMechanism, EmbeddedUser, password)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded kafka: %w", err)
	}
	if err := os.Remove(filepath.Join(dataDir, kfakeSASLFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		unlock()
		return nil, fmt.Errorf("embedded kafka: remove stale %s: %w", kfakeSASLFile, err)
	}
	kopts := []kfake.Opt{
		kfake.EnableSASL(),
		kfake.Superuser(EmbeddedMechanism, EmbeddedUser, password),
		kfake.NumBrokers(1),
		kfake.DataDir(dataDir),
		kfake.DefaultNumPartitions(cfg.partitions),
		// Lets clients (tests, tools) use sessions shorter than a real broker's 6 s
		// minimum, so that a dead member is noticed quickly.
		kfake.GroupMinSessionTimeout(250 * time.Millisecond),
		kfake.BrokerConfigs(map[string]string{
			"log.retention.ms":          "-1",
			"offsets.retention.minutes": strconv.Itoa(1<<31 - 1),
			"message.max.bytes":         strconv.Itoa(maxMessageBytes),
		}),
		kfake.WithLogger(kfakeLogger{logger}),
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			ln, err := net.Listen(network, address)
			if err != nil {
				return nil, err
			}
			fl := newFrameLimitListener(ln, logger)
			if cfg.authTimeout > 0 {
				fl.auth = cfg.authTimeout
			}
			return fl, nil
		}),
	}
	if cfg.port > 0 {
		kopts = append(kopts, kfake.Ports(cfg.port))
	}
	if cfg.syncWrites {
		kopts = append(kopts, kfake.SyncWrites())
	}
	cluster, err := kfake.NewCluster(kopts...)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded kafka: start: %w", err)
	}
	e := &Embedded{cluster: cluster, brokers: cluster.ListenAddrs(), dataDir: dataDir,
		mechanism: mechanism, logger: logger, unlock: unlock, partitions: cfg.partitions}
	e.narrowSASLFile()
	installTopicLimits(cluster, cfg.partitions)
	if err := e.ensureTopics(); err != nil {
		e.Close()
		return nil, err
	}
	logger.Info("embedded kafka started", "brokers", e.brokers, "data_dir", dataDir,
		"sasl_mechanism", EmbeddedMechanism, "sasl_user", EmbeddedUser, "sasl_password_file", e.PasswordFile())
	return e, nil
}

// ensureTopics creates whatever topic is missing; see the SeedTopics quirk above.
func (e *Embedded) ensureTopics() error {
	for _, t := range eventschema.Topics() {
		if e.cluster.TopicInfo(t) != nil {
			continue
		}
		if err := e.cluster.CreateTopic(t, int32(e.partitions), eventTopicConfigs()); err != nil {
			return fmt.Errorf("embedded kafka: create topic %s: %w", t, err)
		}
	}
	if e.cluster.TopicInfo(RelayCheckpointTopic) == nil {
		if err := e.cluster.CreateTopic(RelayCheckpointTopic, 1, checkpointTopicConfigs()); err != nil {
			return fmt.Errorf("embedded kafka: create topic %s: %w", RelayCheckpointTopic, err)
		}
	}
	return nil
}

// Brokers returns the broker addresses. Clients also need the credential: see Conn.
func (e *Embedded) Brokers() []string { return append([]string(nil), e.brokers...) }

// Conn returns the broker addresses with the SASL mechanism that samla's clients authenticate
// with, to hand to writers, readers and EnsureTopics.
func (e *Embedded) Conn() Conn { return Conn{Brokers: e.Brokers(), SASL: e.mechanism} }

// PasswordFile is the file that holds the password of EmbeddedUser, for outside tools and for
// processes pointed at this broker with SAMLA_KAFKA_SASL_PASSWORD_FILE.
func (e *Embedded) PasswordFile() string { return filepath.Join(e.dataDir, PasswordFileName) }

// narrowSASLFile makes kfake's sasl.json (salted SCRAM keys, enough to authenticate with)
// readable by the owner only; kfake writes it 0644.
func (e *Embedded) narrowSASLFile() {
	if err := os.Chmod(filepath.Join(e.dataDir, kfakeSASLFile), 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.logger.Warn("embedded kafka: narrow permissions of "+kfakeSASLFile, "error", err)
	}
}

// Close stops the broker and writes its state to the data directory. Close the clients
// first: see the note on restored group members.
// Close is safe to call more than once.
func (e *Embedded) Close() {
	e.closeOnce.Do(func() {
		e.cluster.Close()
		e.narrowSASLFile()
		e.unlock()
		e.logger.Info("embedded kafka stopped")
	})
}

// eventTopicConfigs keeps the event log forever: Kafka is a distribution channel here, but
// consumers (a new projection, an auditor's replay) may start from offset zero at any time.
func eventTopicConfigs() map[string]string {
	return map[string]string{"retention.ms": "-1"}
}

// checkpointTopicConfigs compacts the checkpoint topic: only its last message matters, and
// the relay writes one per batch, which would otherwise grow without bound.
func checkpointTopicConfigs() map[string]string {
	return map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}
}

// kfakeLogger forwards kfake's warnings and errors to slog; its info and debug levels log
// every request.
type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		k.l.Error("embedded kafka: " + fmt.Sprintf(format, args...))
	case kfake.LogLevelWarn:
		k.l.Warn("embedded kafka: " + fmt.Sprintf(format, args...))
	}
}
