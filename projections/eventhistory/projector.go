package eventhistory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
)

// ProjectorName names the projection; its Kafka consumer group is derived from it.
const ProjectorName = "event-history"

// personalField is the payload field in which every event keeps its personal data.
const personalField = "personal"

// Projector turns every event, of every category, into a history row.
type Projector struct {
	reg   *eventschema.Registry
	store Store
}

// NewProjector returns the projector writing to store; reg upcasts old payloads.
func NewProjector(reg *eventschema.Registry, store Store) *Projector {
	return &Projector{reg: reg, store: store}
}

// Name is the projection's stable name.
func (p *Projector) Name() string { return ProjectorName }

// Handle stores the batch's events in one Insert, without their personal data.
func (p *Projector) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	if len(batch) == 0 {
		return nil
	}
	rows := make([]Row, 0, len(batch))
	for _, env := range batch {
		r, err := p.row(env)
		if err != nil {
			return fmt.Errorf("%s: %w", ProjectorName, err)
		}
		rows = append(rows, r)
	}
	if err := p.store.Insert(ctx, rows); err != nil {
		return fmt.Errorf("%s: write %d rows: %w", ProjectorName, len(rows), err)
	}
	return nil
}

func (p *Projector) row(env eventschema.Envelope) (Row, error) {
	payload, version, err := p.current(env)
	if err != nil {
		return Row{}, err
	}
	payload, err = StripPersonal(payload)
	if err != nil {
		return Row{}, fmt.Errorf("%s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
	}
	return Row{
		Tenant: env.Tenant, Stream: env.Stream, Revision: env.Revision, Position: env.Position,
		EventID: env.EventID, Type: env.Type, SchemaVersion: version,
		OccurredAt:    readdb.FromMillis(readdb.Millis(env.OccurredAt)),
		CorrelationID: env.CorrelationID, CausationID: env.CausationID, Actor: env.Actor,
		Payload: payload,
	}, nil
}

// current upcasts a payload to its type's current schema version before the personal field is
// removed, because old versions did not keep personal data apart (collection.started v1 has the
// personal number in its input map). A type or version this build does not know was written by
// a newer writer, which follows the rule that personal data lives in "personal"; it is stored
// as written rather than stopping the audit trail.
func (p *Projector) current(env eventschema.Envelope) (json.RawMessage, int, error) {
	current, err := p.reg.CurrentVersion(env.Type)
	if errors.Is(err, eventschema.ErrUnknownType) || (err == nil && env.SchemaVersion > current) {
		return env.Payload, env.SchemaVersion, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
	}
	payload, err := p.reg.Upcast(env.Type, env.SchemaVersion, env.Payload)
	if err != nil {
		return nil, 0, fmt.Errorf("upcast %s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
	}
	return payload, current, nil
}

// StripPersonal returns payload, compacted, without its top-level "personal" field. Every other
// value is kept as written (numbers are not reformatted; keys may be reordered); a payload that
// is not a JSON object is refused, since nothing could then say where its personal data is.
func StripPersonal(payload json.RawMessage) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("payload is not a JSON object: %w", err)
	}
	if fields == nil {
		return nil, fmt.Errorf("payload is not a JSON object: %s", payload)
	}
	if _, ok := fields[personalField]; !ok {
		return compact(payload)
	}
	delete(fields, personalField)
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("re-encode payload: %w", err)
	}
	return out, nil
}

func compact(payload json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, payload); err != nil {
		return nil, fmt.Errorf("compact payload: %w", err)
	}
	return buf.Bytes(), nil
}
