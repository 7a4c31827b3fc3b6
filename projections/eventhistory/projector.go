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
// It takes envelopes as the event store holds them, sealed, and opens none: each row records
// what the payload held of personal data (sealed under which subject, plain from before
// sealing, or the erased marker of an event appended after its subject's erasure), which
// eventschema.InspectPersonal tells from the sealed form without a key, and the summary is built
// from what the event says publicly, without its personal member (no summary shows personal
// data). So a document's megabytes are never decrypted only to be thrown away, and a lost key
// store does not stop the history; its reader finds out, as every reader of sealed data does.
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
		row := Row{
			Tenant: env.Tenant, Stream: env.Stream, Revision: env.Revision, Position: env.Position,
			EventID: env.EventID, Type: env.Type,
			OccurredAt:    readdb.FromMillis(readdb.Millis(env.OccurredAt)),
			CorrelationID: env.CorrelationID, CausationID: env.CausationID, Actor: env.Actor,
		}
		switch subject, sealed, plain := eventschema.InspectPersonal(env.Payload); {
		case eventschema.PersonalErased(env.Payload):
			row.PersonalData = PersonalErased
		case sealed:
			row.PersonalData, row.DataSubject = PersonalSealed, subject
		case plain:
			row.PersonalData = PersonalPlain
		}
		if row.PersonalData == PersonalSealed || row.PersonalData == PersonalErased {
			// Events from before sealing keep their plain member: the summary of an old
			// status counts its instructions there, and reading it opens nothing.
			public, err := eventschema.WithoutPersonal(env.Payload)
			if err != nil {
				return fmt.Errorf("%s: %s at %s/%d: %w", ProjectorName, env.Type, env.Stream, env.Revision, err)
			}
			env.Payload = public
		}
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
