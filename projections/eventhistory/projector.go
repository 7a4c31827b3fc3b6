package eventhistory

import (
	"context"
	"fmt"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
)

// ProjectorName names the projection; its Kafka consumer group is derived from it. It is
// "-v2" since the history keeps audit summaries instead of payloads: the new consumer group
// projects every event again, from the start of the topics, into the new table.
const ProjectorName = "event-history-v2"

// Projector turns every event, of every category, into a history row.
type Projector struct {
	reg   *eventschema.Registry
	store Store
}

// NewProjector returns the projector writing to store; reg summarises the events.
func NewProjector(reg *eventschema.Registry, store Store) *Projector {
	return &Projector{reg: reg, store: store}
}

// Name is the projection's stable name.
func (p *Projector) Name() string { return ProjectorName }

// Handle stores the batch's events, each with its audit summary, in one Insert.
func (p *Projector) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	if len(batch) == 0 {
		return nil
	}
	rows := make([]Row, 0, len(batch))
	for _, env := range batch {
		summary, version, err := p.reg.AuditSummary(env)
		if err != nil {
			return fmt.Errorf("%s: %s at %s/%d: %w", ProjectorName, env.Type, env.Stream, env.Revision, err)
		}
		rows = append(rows, Row{
			Tenant: env.Tenant, Stream: env.Stream, Revision: env.Revision, Position: env.Position,
			EventID: env.EventID, Type: env.Type, SchemaVersion: version,
			OccurredAt:    readdb.FromMillis(readdb.Millis(env.OccurredAt)),
			CorrelationID: env.CorrelationID, CausationID: env.CausationID, Actor: env.Actor,
			Summary: summary,
		})
	}
	if err := p.store.Insert(ctx, rows); err != nil {
		return fmt.Errorf("%s: write %d rows: %w", ProjectorName, len(rows), err)
	}
	return nil
}
