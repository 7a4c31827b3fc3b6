package eventstore

import (
	"context"
	"errors"
	"time"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/metrics"
)

// Instrumented records appends (count by category and outcome, durable latency) around any
// adapter, so every adapter is measured the same way.
type Instrumented struct {
	Store
	m *metrics.Metrics
}

// Instrument wraps a store.
func Instrument(s Store, m *metrics.Metrics) *Instrumented { return &Instrumented{Store: s, m: m} }

// Append records the outcome and latency of the wrapped append.
func (s *Instrumented) Append(ctx context.Context, stream string, expected ExpectedRevision, events []eventschema.Envelope) (AppendResult, error) {
	start := time.Now()
	res, err := s.Store.Append(ctx, stream, expected, events)
	outcome := "ok"
	switch {
	case errors.Is(err, ErrWrongExpectedRevision):
		outcome = "conflict"
	case err != nil:
		outcome = "error"
	default:
		s.m.AppendDuration.Observe(time.Since(start).Seconds())
	}
	s.m.Appends.WithLabelValues(eventschema.Category(stream), outcome).Inc()
	return res, err
}
