package main

import (
	"context"
	"errors"

	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/eventhistory"
	"github.com/samla/samla/query"
)

// statusReader adapts the collection-status read model to the query side's port.
type statusReader struct{ store collectionstatus.Store }

func (r statusReader) Get(ctx context.Context, tenant, collectionID string) (query.StatusView, error) {
	row, err := r.store.Get(ctx, tenant, collectionID)
	if errors.Is(err, collectionstatus.ErrNotFound) {
		return query.StatusView{}, query.ErrNotFound
	}
	if err != nil {
		return query.StatusView{}, err
	}
	view := query.StatusView{
		CollectionID: row.CollectionID, Tenant: row.Tenant, Company: row.Company, Product: row.Product,
		LoginMethod: row.LoginMethod, APIVersion: row.APIVersion, UserUUID: row.UserUUID, Status: row.Status,
		ExtraInformation: row.ExtraInformation, RequiredInputTypes: row.RequiredInputTypes, Message: row.Message,
		QRStartSecret: row.QRStartSecret, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
	}
	for _, in := range row.Instructions {
		view.Instructions = append(view.Instructions, query.InstructionView{
			RequestID: in.RequestID, Method: in.Method, URL: in.URL, Headers: in.Headers, Body: in.Body})
	}
	if o := row.EIDOrder; o != nil {
		view.EIDOrder = &query.EIDOrderView{QRStartToken: o.QRStartToken, AutoStartToken: o.AutoStartToken, StartedAt: o.StartedAt}
	}
	return view, nil
}

// historyReader adapts the audit read model to the query side's port.
type historyReader struct{ store eventhistory.Store }

func (r historyReader) List(ctx context.Context, tenant, stream string, afterRevision *uint64, limit int) ([]query.HistoryEvent, error) {
	rows, err := r.store.List(ctx, tenant, stream, afterRevision, limit)
	if err != nil {
		return nil, err
	}
	out := make([]query.HistoryEvent, len(rows))
	for i, row := range rows {
		out[i] = query.HistoryEvent{
			EventID: row.EventID, Type: row.Type, SchemaVersion: row.SchemaVersion, Tenant: row.Tenant,
			Stream: row.Stream, Revision: row.Revision, Position: row.Position, OccurredAt: row.OccurredAt,
			CorrelationID: row.CorrelationID, CausationID: row.CausationID, Actor: row.Actor, Payload: row.Payload,
		}
	}
	return out, nil
}
