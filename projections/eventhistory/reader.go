package eventhistory

import (
	"context"

	"github.com/samla/samla/query"
)

// Reader serves the history to the query side through its port, query.HistoryReader.
type Reader struct{ store Store }

var _ query.HistoryReader = Reader{}

// NewReader returns the reader over store.
func NewReader(store Store) Reader { return Reader{store: store} }

// List implements query.HistoryReader.
func (r Reader) List(ctx context.Context, tenant, stream string, afterRevision *uint64, limit int) ([]query.HistoryEvent, error) {
	rows, err := r.store.List(ctx, tenant, stream, afterRevision, limit)
	if err != nil {
		return nil, err
	}
	out := make([]query.HistoryEvent, len(rows))
	for i, row := range rows {
		out[i] = query.HistoryEvent{
			EventID: row.EventID, Type: row.Type, SchemaVersion: row.SchemaVersion, Tenant: row.Tenant,
			Stream: row.Stream, Revision: row.Revision, Position: row.Position, OccurredAt: row.OccurredAt,
			CorrelationID: row.CorrelationID, CausationID: row.CausationID, Actor: row.Actor, Summary: row.Summary,
		}
	}
	return out, nil
}
