package eventhistory

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/samla/samla/domain"

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
	return p.HandleOpened(ctx, batch, nil, nil)
}

// HandleOpened is Handle of a batch a rebuild has taken apart already, for every read model at
// once: parts[i] is eventschema.OpenPersonalParts of batch[i]'s payload, and events[i] the event
// decoded from its opened payload (nil when it did not decode or is of a type this build does
// not know). The rows are Handle's: the summaries come from the public part of each event, as
// the projector never opens one itself. parts or events may be nil.
func (p *Projector) HandleOpened(ctx context.Context, batch []eventschema.Envelope,
	parts []eventschema.PersonalParts, events []domain.Event) error {
	if len(batch) == 0 {
		return nil
	}
	rows := make([]Row, 0, len(batch))
	for i, env := range batch {
		var (
			part eventschema.PersonalParts
			ev   domain.Event
		)
		if parts != nil {
			part = parts[i]
		} else if scan, err := eventschema.ScanPersonal(env.Payload); err == nil {
			part = scan.Inspect() // one scan for what the next two read, and for Public
		} else {
			// A member the scan refuses: the two readers answer it as they always did.
			part.Subject, part.Sealed, part.Plain = eventschema.InspectPersonal(env.Payload)
			part.Marker = eventschema.PersonalErased(env.Payload)
		}
		if events != nil {
			ev = events[i]
		}
		row, err := p.row(env, part, ev)
		if err != nil {
			return fmt.Errorf("%s: %s at %s/%d: %w", ProjectorName, env.Type, env.Stream, env.Revision, err)
		}
		rows = append(rows, row)
	}
	if err := p.store.Insert(ctx, rows); err != nil {
		return fmt.Errorf("%s: write %d rows: %w", ProjectorName, len(rows), err)
	}
	return nil
}

// row is env's history row. part tells what its personal member holds (Public may be nil); ev,
// when not nil, is the event decoded from env's payload opened.
func (p *Projector) row(env eventschema.Envelope, part eventschema.PersonalParts, ev domain.Event) (Row, error) {
	row := Row{
		Tenant: env.Tenant, Stream: env.Stream, Revision: env.Revision, Position: env.Position,
		EventID: env.EventID, Type: env.Type,
		OccurredAt:    readdb.FromMillis(readdb.Millis(env.OccurredAt)),
		CorrelationID: env.CorrelationID, CausationID: env.CausationID, Actor: env.Actor,
	}
	switch {
	case part.Marker:
		row.PersonalData = PersonalErased
	case part.Sealed:
		row.PersonalData, row.DataSubject = PersonalSealed, part.Subject
	case part.Plain:
		row.PersonalData = PersonalPlain
	}
	var (
		summary json.RawMessage
		version int
		err     error
	)
	switch {
	case row.PersonalData != PersonalSealed && row.PersonalData != PersonalErased:
		// Events from before sealing keep their plain member: the summary of an old status
		// counts its instructions there, and reading it opens nothing. Opening left such a
		// payload as it was, so ev is its decoding.
		summary, version, err = p.reg.AuditSummaryDecoded(env, ev)
	default:
		var ok bool
		summary, version, ok, err = p.reg.AuditSummaryOpened(env, ev) // not ok for a nil ev
		if err == nil && !ok {
			public := part.Public()
			if public == nil {
				if public, err = eventschema.WithoutPersonal(env.Payload); err != nil {
					return Row{}, err
				}
			}
			env.Payload = public
			summary, version, err = p.reg.AuditSummary(env)
		}
	}
	if err != nil {
		return Row{}, err
	}
	row.Summary, row.SchemaVersion = summary, version
	return row, nil
}
