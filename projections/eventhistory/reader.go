package eventhistory

import (
	"context"
	"errors"
	"fmt"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/query"
)

// Reader serves the history to the query side through its port, query.HistoryReader.
type Reader struct {
	store Store
	keys  eventschema.Keys
}

var _ query.HistoryReader = Reader{}

// NewReader returns the reader over store. keys tells whether the subject of an event's sealed
// personal data has been erased; nothing is opened.
func NewReader(store Store, keys eventschema.Keys) Reader {
	if keys == nil {
		panic("eventhistory.NewReader: keys are required to tell erased subjects")
	}
	return Reader{store: store, keys: keys}
}

// List implements query.HistoryReader. The summary of an event that held personal data carries
// eventschema.ProtectedDataMember: sealed, or erased once its subject's key was destroyed (told
// at this read, so an erasure shows at once) and for an event appended after it, or unsealed
// for an event written before sealing.
// A subject the key store does not know is an error, as it is for every reader of sealed data: a
// lost key store is never shown as erased.
func (r Reader) List(ctx context.Context, tenant, stream string, afterRevision *uint64, limit int) ([]query.HistoryEvent, error) {
	rows, err := r.store.List(ctx, tenant, stream, afterRevision, limit)
	if err != nil {
		return nil, err
	}
	states := map[string]string{} // subject → state: a page is mostly one stream's, so one subject
	out := make([]query.HistoryEvent, len(rows))
	for i, row := range rows {
		state, err := r.protectedData(ctx, row, states)
		if err != nil {
			return nil, fmt.Errorf("history of %s at %d: %w", row.Stream, row.Revision, err)
		}
		summary := row.Summary
		if state != "" && summary != nil { // an unknown type shows its envelope only
			if summary, err = eventschema.WithProtectedData(summary, state); err != nil {
				return nil, fmt.Errorf("history of %s at %d: %w", row.Stream, row.Revision, err)
			}
		}
		out[i] = query.HistoryEvent{
			EventID: row.EventID, Type: row.Type, SchemaVersion: row.SchemaVersion, Tenant: row.Tenant,
			Stream: row.Stream, Revision: row.Revision, Position: row.Position, OccurredAt: row.OccurredAt,
			CorrelationID: row.CorrelationID, CausationID: row.CausationID, Actor: row.Actor, Summary: summary,
		}
	}
	return out, nil
}

// protectedData is the marker of a row: "" when the event held no personal data.
func (r Reader) protectedData(ctx context.Context, row Row, states map[string]string) (string, error) {
	switch row.PersonalData {
	case PersonalPlain:
		return eventschema.ProtectedDataUnsealed, nil
	case PersonalErased:
		return eventschema.ProtectedDataErased, nil
	case PersonalSealed:
	default:
		return "", nil
	}
	if state, ok := states[row.DataSubject]; ok {
		return state, nil
	}
	state := eventschema.ProtectedDataSealed
	_, err := r.keys.Get(ctx, row.DataSubject)
	switch {
	case errors.Is(err, eventschema.ErrSubjectErased):
		state = eventschema.ProtectedDataErased
	case err != nil:
		return "", err
	}
	states[row.DataSubject] = state
	return state, nil
}
