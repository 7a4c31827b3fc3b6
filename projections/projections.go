// Package projections runs the read side's projectors: consumers that fold events from Kafka
// into read models (collection status, event history, API keys, collected data, users, consents; readmodels.go
// lists them), each with a SQLite and a ClickHouse adapter. It opens the read models as one bundle, runs each projector in its own
// consumer group, and rebuilds every read model from the event store.
//
// Kafka stays out of this package: Run takes a ConsumeFunc, which the caller adapts from
// platform/kafka, so projections can be driven (and tested) by anything that delivers batches.
package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/metrics"
)

// Projector folds batches of events into one read model. Handle must be idempotent by
// (stream, revision): delivery is at-least-once, and a rebuild replays everything.
type Projector interface {
	// Name is stable for the life of the read model: the consumer group is derived from it.
	Name() string
	Handle(ctx context.Context, batch []eventschema.Envelope) error
}

// ConsumeFunc consumes every event topic as member of consumer group groupID, calling handle
// with batches of envelopes in partition order, and commits a batch's offsets only after handle
// returned nil for it. It blocks until ctx ends or handle fails, returning that error.
// platform/kafka.Consume, given the group id, eventschema.Topics() and a batch size and wait,
// is the production implementation.
type ConsumeFunc func(ctx context.Context, groupID string, handle func(ctx context.Context, batch []eventschema.Envelope) error) error

// GroupID is the Kafka consumer group of a projection. Each projection has its own group so
// that each read model keeps its own offsets and one slow model does not hold back the others.
func GroupID(projection string) string { return "samla.projection." + projection }

// Run consumes events into p until ctx ends or a batch fails. Offsets are committed by consume
// only after Handle returned, so a crash between the read-model write and the commit replays
// the batch, which the projectors ignore by revision. m may be nil (no metrics).
func Run(ctx context.Context, p Projector, consume ConsumeFunc, m *metrics.Metrics) error {
	name := p.Name()
	err := consume(ctx, GroupID(name), func(ctx context.Context, batch []eventschema.Envelope) error {
		if len(batch) == 0 {
			return nil
		}
		if err := p.Handle(ctx, batch); err != nil {
			return fmt.Errorf("projection %s: batch of %d ending at %s/%d: %w", name, len(batch),
				batch[len(batch)-1].Stream, batch[len(batch)-1].Revision, err)
		}
		if m != nil {
			m.ProjectionEvents.WithLabelValues(name).Add(float64(len(batch)))
			m.ProjectionBatches.WithLabelValues(name).Inc()
			m.ProjectionLag.WithLabelValues(name).Set(time.Since(batch[len(batch)-1].OccurredAt).Seconds())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("run projection %s: %w", name, err)
	}
	return nil
}
