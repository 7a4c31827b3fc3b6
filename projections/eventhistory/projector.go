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
//
// It takes envelopes as the event store holds them, sealed, and opens them itself
// (eventschema.OpenPersonal) rather than through projections.Opening, because each row records
// what the sealed payload held: whether it had personal data, and under which subject (which
// the opened payload no longer tells). A lost key stops it as it stops every projection.
type Projector struct {
	reg   *eventschema.Registry
	store Store
	keys  eventschema.Keys
}

// NewProjector returns the projector writing to store; reg summarises the events and keys opens
// them.
func NewProjector(reg *eventschema.Registry, store Store, keys eventschema.Keys) *Projector {
	if keys == nil {
		panic("eventhistory.NewProjector: keys are required to open sealed events")
	}
	return &Projector{reg: reg, store: store, keys: keys}
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
		row := Row{
			Tenant: env.Tenant, Stream: env.Stream, Revision: env.Revision, Position: env.Position,
			EventID: env.EventID, Type: env.Type,
			OccurredAt:    readdb.FromMillis(readdb.Millis(env.OccurredAt)),
			CorrelationID: env.CorrelationID, CausationID: env.CausationID, Actor: env.Actor,
		}
		switch subject, sealed, plain := eventschema.InspectPersonal(env.Payload); {
		case sealed:
			row.PersonalData, row.DataSubject = PersonalSealed, subject
		case plain:
			row.PersonalData = PersonalPlain
		}
		opened, _, err := eventschema.OpenPersonal(ctx, p.keys, env.Payload)
		if err != nil {
			return fmt.Errorf("%s: open %s at %s/%d: %w", ProjectorName, env.Type, env.Stream, env.Revision, err)
		}
		env.Payload = opened
		summary, version, err := p.reg.AuditSummary(env)
		if err != nil {
			return fmt.Errorf("%s: %s at %s/%d: %w", ProjectorName, env.Type, env.Stream, env.Revision, err)
		}
		row.Summary, row.SchemaVersion = summary, version
		rows = append(rows, row)
	}
	if err := p.store.Insert(ctx, rows); err != nil {
		return fmt.Errorf("%s: write %d rows: %w", ProjectorName, len(rows), err)
	}
	return nil
}
