package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// EnsureTopics creates the topics that are missing on a real cluster, with the given partition
// count, the broker's default replication factor and retention.ms=-1 (the event log is kept
// forever). Topics that already exist are left as they are, partition count included:
// changing it would move streams to other partitions and break per-stream order.
func EnsureTopics(ctx context.Context, conn Conn, topics []string, partitions int) error {
	if partitions <= 0 {
		return fmt.Errorf("ensure topics: partitions must be positive, got %d", partitions)
	}
	cfgs := make([]kafkago.TopicConfig, len(topics))
	for i, t := range topics {
		cfgs[i] = topicConfig(t, partitions, eventTopicConfigs())
	}
	return createTopics(ctx, conn, cfgs)
}

// EnsureCheckpointTopic creates the relay's single-partition, compacted checkpoint topic on a
// real cluster if it is missing.
func EnsureCheckpointTopic(ctx context.Context, conn Conn) error {
	return createTopics(ctx, conn, []kafkago.TopicConfig{
		topicConfig(RelayCheckpointTopic, 1, checkpointTopicConfigs()),
	})
}

func topicConfig(topic string, partitions int, configs map[string]string) kafkago.TopicConfig {
	tc := kafkago.TopicConfig{
		Topic:         topic,
		NumPartitions: partitions,
		// -1 asks for the broker's default.replication.factor (CreateTopics v4+), so the
		// same code works on a one-broker development cluster and a production one.
		ReplicationFactor: -1,
	}
	for k, v := range configs {
		tc.ConfigEntries = append(tc.ConfigEntries, kafkago.ConfigEntry{ConfigName: k, ConfigValue: v})
	}
	return tc
}

func createTopics(ctx context.Context, conn Conn, topics []kafkago.TopicConfig) error {
	if len(conn.Brokers) == 0 {
		return errors.New("create topics: no brokers")
	}
	tr := conn.transport()
	defer tr.CloseIdleConnections()
	client := &kafkago.Client{Addr: kafkago.TCP(conn.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	res, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: topics})
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	var errs []error
	for topic, terr := range res.Errors {
		if terr != nil && !errors.Is(terr, kafkago.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("create topic %s: %w", topic, terr))
		}
	}
	return errors.Join(errs...)
}
