// The bus: Kafka (embedded or a cluster), the relay that feeds it and the projections it feeds.

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/samla/samla/command/relay"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/kafka"
	"github.com/samla/samla/projections"
)

func (s *Service) openKafka(ctx context.Context) error {
	if brokers := s.cfg.Brokers(); len(brokers) > 0 {
		conn, err := s.cfg.KafkaConn()
		if err != nil {
			return err
		}
		s.cluster = conn
		if err := kafka.EnsureTopics(ctx, conn, eventschema.Topics(), s.cfg.KafkaPartitions); err != nil {
			return fmt.Errorf("create Kafka topics: %w", err)
		}
		if err := kafka.EnsureCheckpointTopic(ctx, conn); err != nil {
			return fmt.Errorf("create relay checkpoint topic: %w", err)
		}
		return nil
	}
	broker, err := kafka.StartEmbedded(filepath.Join(s.cfg.DataDir, "kafka"), s.log.With("role", "kafka"))
	if err != nil {
		return fmt.Errorf("start embedded Kafka: %w", err)
	}
	s.broker = broker
	s.cluster = broker.Conn()
	s.closers = append(s.closers, func() error { broker.Close(); return nil })
	s.addrs["kafka"] = strings.Join(s.cluster.Brokers, ",")
	return nil
}

func (s *Service) startRelay(ctx context.Context) {
	r := relay.New(relay.Config{
		Store: s.store, Kafka: s.cluster, Logger: s.log,
		Metrics: relay.Metrics{Published: s.metrics.RelayPublished, PublishLag: s.metrics.RelayLag, Checkpoint: s.metrics.RelayCheckpoint},
	})
	s.runRole(ctx, "relay", r.Run)
}

func (s *Service) consume(groupID string, topics []string) projections.ConsumeFunc {
	return s.consumeWith(kafka.ConsumerConfig{GroupID: groupID, Topics: topics})
}

// consumeWith is consume with the rest of cfg (a follower's) as given; the brokers, their
// credentials and the gather window are the process's.
func (s *Service) consumeWith(cfg kafka.ConsumerConfig) projections.ConsumeFunc {
	cfg.Kafka, cfg.MaxWait = s.cluster, consumerGatherWindow
	return func(ctx context.Context, _ string, handle func(context.Context, []eventschema.Envelope) error) error {
		return kafka.Consume(ctx, cfg, s.log, handle) // Consume adds the group to its logger itself
	}
}

func (s *Service) startProjections(ctx context.Context) {
	for _, p := range s.models.Projectors() {
		p := p
		consume := s.consume(projections.GroupID(p.Name()), projections.Topics(p))
		s.runRole(ctx, "projection "+p.Name(), func(ctx context.Context) error {
			return projections.Run(ctx, p, consume, s.metrics)
		})
	}
}

// consumerGatherWindow is how long a consumer waits for more messages after the first of a
// batch. Under load batches fill up anyway; when idle the window is pure latency between an
// append and its read model, so it is kept short.
const consumerGatherWindow = 2 * time.Millisecond
