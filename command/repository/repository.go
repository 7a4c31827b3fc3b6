// Package repository loads aggregates from the event store and saves their decisions with
// optimistic concurrency. It is the one place where domain events meet envelopes.
package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
)

// Store is the part of the event store a repository needs.
type Store interface {
	Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventschema.Envelope) (eventstore.AppendResult, error)
	ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventschema.Envelope, error)
}

// Meta is who and what caused an append; it travels in every envelope.
type Meta struct {
	Tenant        string
	CorrelationID string
	CausationID   string
	Actor         string
}

// Repository loads and saves aggregates.
type Repository struct {
	store    Store
	registry *eventschema.Registry
	now      func() time.Time
}

// New builds a repository. now is the clock used for occurred-at; nil means time.Now.
func New(store Store, registry *eventschema.Registry, now func() time.Time) *Repository {
	if now == nil {
		now = time.Now
	}
	return &Repository{store: store, registry: registry, now: now}
}

// Load reads and decodes every event of a stream. A missing stream is no events, not an error.
func (r *Repository) Load(ctx context.Context, stream string) ([]domain.Event, error) {
	envs, err := r.store.ReadStream(ctx, stream, 0, 0)
	if errors.Is(err, eventstore.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", stream, err)
	}
	return r.registry.DecodeAll(envs)
}

// LoadCollection rebuilds a collection; Exists() is false when it was never started.
func (r *Repository) LoadCollection(ctx context.Context, collectionID string) (*collection.Collection, error) {
	events, err := r.Load(ctx, collection.StreamName(collectionID))
	if err != nil {
		return nil, err
	}
	return collection.Rehydrate(events)
}

// LoadClient rebuilds a client; Exists() is false when it was never registered.
func (r *Repository) LoadClient(ctx context.Context, clientID string) (*client.Client, error) {
	events, err := r.Load(ctx, client.StreamName(clientID))
	if err != nil {
		return nil, err
	}
	return client.Rehydrate(events)
}

// Save appends the events an aggregate decided, expecting the stream to be at the version the
// aggregate was loaded at. Nothing to save is a no-op.
func (r *Repository) Save(ctx context.Context, stream string, version int, meta Meta, events []domain.Event) (eventstore.AppendResult, error) {
	if len(events) == 0 {
		return eventstore.AppendResult{}, nil
	}
	envs := make([]eventschema.Envelope, 0, len(events))
	now := r.now().UTC().Truncate(time.Millisecond)
	for _, e := range events {
		typ, version, payload, err := r.registry.Encode(e)
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("save %s: %w", stream, err)
		}
		envs = append(envs, eventschema.Envelope{
			EventID: uuid.NewString(), Type: typ, SchemaVersion: version, Tenant: meta.Tenant,
			OccurredAt: now, CorrelationID: meta.CorrelationID, CausationID: meta.CausationID,
			Actor: meta.Actor, Payload: payload,
		})
	}
	res, err := r.store.Append(ctx, stream, eventstore.AfterVersion(version), envs)
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("save %s: %w", stream, err)
	}
	return res, nil
}
