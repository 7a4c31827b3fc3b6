// Package repository is the one way an aggregate changes: Update loads it from the event store,
// runs a decide function on it, appends what the aggregate recorded at the revision it was
// loaded at, and on a conflict loads and decides again. It is the one place where domain events
// meet envelopes. Repository is generic over the aggregate, so every aggregate (collection,
// client, and those to come) is stored the same way, described by its domain.Kind.
package repository

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/domain"
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

const (
	// DefaultMaxAttempts bounds the load/decide/append rounds of one Update. A conflict means
	// another writer appended in between (for a collection: the connector's claim or status
	// change, or a client's racing retry); aggregates move a few times per minute at most, so a
	// handful of rounds always suffices unless something is badly wrong, and then the caller gets
	// an error rather than a hang.
	DefaultMaxAttempts = 5
	// DefaultAppendTimeout bounds one append. The append runs without the caller's cancellation
	// (see Update), so this is what stops it when the store hangs.
	DefaultAppendTimeout = 10 * time.Second
)

// Option configures a Repository.
type Option func(*settings)

type settings struct {
	now           func() time.Time
	maxAttempts   int
	appendTimeout time.Duration
	keys          eventschema.Keys
}

// WithClock sets the clock of the envelopes' occurred-at; the default is time.Now.
func WithClock(now func() time.Time) Option { return func(s *settings) { s.now = now } }

// WithMaxAttempts sets how many load/decide/append rounds Update makes before it gives up on
// conflicts (DefaultMaxAttempts when n < 1).
func WithMaxAttempts(n int) Option { return func(s *settings) { s.maxAttempts = n } }

// WithAppendTimeout bounds one append (DefaultAppendTimeout when d <= 0).
func WithAppendTimeout(d time.Duration) Option { return func(s *settings) { s.appendTimeout = d } }

// WithKeys seals the personal member of every event appended under the aggregate's data subject
// and opens it on Load (crypto-shredding, eventschema.SealPersonal). Every repository of the
// running service has it; without it events are stored as the registry encodes them, which
// only tests that look at plain payloads want, and a sealed stream does not load.
func WithKeys(keys eventschema.Keys) Option { return func(s *settings) { s.keys = keys } }

// dataSubject is implemented by the aggregates whose events carry personal data (a collection,
// a user): the subject their personal data is sealed under (domain.UserSubject and the like).
type dataSubject interface{ DataSubject() string }

// Repository loads and updates the aggregates of one kind.
type Repository[A domain.Aggregate] struct {
	store    Store
	registry *eventschema.Registry
	kind     domain.Kind[A]
	settings
}

// New builds a repository for the aggregates of kind, e.g. New(store, registry, collection.Kind).
func New[A domain.Aggregate](store Store, registry *eventschema.Registry, kind domain.Kind[A], opts ...Option) *Repository[A] {
	s := settings{now: time.Now, maxAttempts: DefaultMaxAttempts, appendTimeout: DefaultAppendTimeout}
	for _, o := range opts {
		o(&s)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxAttempts < 1 {
		s.maxAttempts = DefaultMaxAttempts
	}
	if s.appendTimeout <= 0 {
		s.appendTimeout = DefaultAppendTimeout
	}
	return &Repository[A]{store: store, registry: registry, kind: kind, settings: s}
}

// Load rebuilds the aggregate with this id from its stream. A stream without events is an
// aggregate without events (Version 0), not an error.
func (r *Repository[A]) Load(ctx context.Context, id string) (A, error) {
	stream := r.kind.Stream(id)
	agg := r.kind.New()
	envs, err := r.store.ReadStream(ctx, stream, 0, 0)
	if errors.Is(err, eventstore.ErrStreamNotFound) {
		return agg, nil
	}
	if err != nil {
		var zero A
		return zero, fmt.Errorf("load %s: %w", stream, err)
	}
	if err := r.open(ctx, envs); err != nil {
		var zero A
		return zero, fmt.Errorf("load %s: %w", stream, err)
	}
	events, err := r.registry.DecodeAll(envs)
	if err != nil {
		var zero A
		return zero, fmt.Errorf("load %s: %w", stream, err)
	}
	if err := domain.Rehydrate(agg, events...); err != nil {
		var zero A
		return zero, fmt.Errorf("load %s: %w", stream, err)
	}
	return agg, nil
}

// Refresh returns agg as it is when the stream of id holds no event after it (one read of at
// most two events, none decoded), else the aggregate loaded anew. agg must be as a Load or an
// Update of this repository returned it; one with recorded events not yet stored is loaded
// anew too. It is the cheap look of a process that keeps an aggregate between its steps:
// reading, decoding and opening a whole stream to learn that nothing happened was two fifths
// of the CPU of 13,000 collections waiting for their users.
func (r *Repository[A]) Refresh(ctx context.Context, id string, agg A) (A, error) {
	if v := agg.StoredVersion(); v > 0 && agg.Version() == v {
		// The last event agg has and the one after it, if any: one query on the SQLite store,
		// where a read past the end takes a second to tell it from a missing stream.
		last := uint64(v - 1)
		tail, err := r.store.ReadStream(ctx, r.kind.Stream(id), last, 2)
		if err == nil && len(tail) == 1 && tail[0].Revision == last {
			return agg, nil
		}
		// Newer events, or a failed read: Load reads the stream again and reports its own error.
	}
	return r.Load(ctx, id)
}

// UpdateOption adjusts one Update.
type UpdateOption func(*update)

type update struct {
	newID bool
	from  any // an A to decide on in the first round, see From
}

// NewID says the id was just generated (a fresh UUID), so its stream cannot have events yet:
// the first round decides on an empty aggregate without reading the stream, which keeps a read
// off the hot path. Should the stream exist after all, the append's no-stream expectation fails
// and the next round loads it as usual.
func NewID() UpdateOption { return func(u *update) { u.newID = true } }

// From makes the first round decide on agg, the aggregate as a Load or an Update of this
// repository returned it, instead of reading its stream again: a session that changes one
// aggregate in several steps reads it once. Should the stream have moved on meanwhile, the
// append's expected revision fails and the next round loads it as usual, so a stale agg costs
// a round, never a wrong append. That holds only for a round that appends: a decide that
// records nothing has nothing fenced, decides on agg as it is and returns it without a read, so
// a caller that acts on a no-op result must know agg is current. decide changes agg in place:
// the caller gives it up and keeps what Update returns. agg must be non-nil and of the id Update is given; one with
// recorded events not yet stored (a failed decide or append left them) is not used.
func From[A domain.Aggregate](agg A) UpdateOption { return func(u *update) { u.from = agg } }

// Update is the one way to change an aggregate: load it, run decide on it, and append the events
// decide made it record, expecting the stream to be where it was loaded. On a conflict (another
// writer appended meanwhile) it loads the new state and decides again, up to the repository's
// attempts; giving up returns an error that wraps eventstore.ErrWrongExpectedRevision. decide
// may therefore run more than once and must change nothing but the aggregate.
//
// It returns the updated aggregate (its recorded events now stored) and where the append landed;
// a decide that records nothing appends nothing and returns a zero AppendResult. When decide
// fails, Update returns the aggregate as decide left it and decide's error unchanged, and
// appends nothing.
//
// The append does not stop when ctx is cancelled: an append that the store made durable must be
// reported as done, not lost to a client that went away in the meantime (the client's retry
// then finds it). It is bounded by the repository's append timeout instead. Loads do stop with
// ctx, as nothing is decided yet.
func (r *Repository[A]) Update(ctx context.Context, id string, meta Meta, decide func(A) error, opts ...UpdateOption) (A, eventstore.AppendResult, error) {
	var o update
	for _, opt := range opts {
		opt(&o)
	}
	var zero A
	stream := r.kind.Stream(id)
	var conflict error
	from, fromOK := o.from.(A)
	for attempt := 1; attempt <= r.maxAttempts; attempt++ {
		var agg A
		switch {
		case attempt == 1 && o.newID:
			agg = r.kind.New()
		case attempt == 1 && fromOK && len(from.Recorded()) == 0:
			agg = from
		default:
			var err error
			if agg, err = r.Load(ctx, id); err != nil {
				return zero, eventstore.AppendResult{}, err
			}
		}
		if err := decide(agg); err != nil {
			return agg, eventstore.AppendResult{}, err
		}
		recorded := agg.Recorded()
		if len(recorded) == 0 {
			return agg, eventstore.AppendResult{}, nil
		}
		res, err := r.append(ctx, stream, agg.StoredVersion(), meta, subjectOf(agg), recorded)
		if err == nil {
			domain.MarkStored(agg)
			return agg, res, nil
		}
		if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			return zero, eventstore.AppendResult{}, err
		}
		conflict = err
	}
	return zero, eventstore.AppendResult{}, fmt.Errorf("update %s: gave up after %d conflicting attempts: %w", stream, r.maxAttempts, conflict)
}

// subjectOf is the aggregate's data subject, "" for one whose events carry no personal data.
func subjectOf(agg any) string {
	if s, ok := agg.(dataSubject); ok {
		return s.DataSubject()
	}
	return ""
}

// open replaces the sealed personal members of envs with the plain ones; an erased subject's
// events lose theirs. A lost key is an error: nothing is decided on an aggregate whose
// personal data cannot be read.
func (r *Repository[A]) open(ctx context.Context, envs []eventschema.Envelope) error {
	if r.keys == nil {
		return nil
	}
	for i := range envs {
		payload, _, err := eventschema.OpenPersonal(ctx, r.keys, envs[i].Payload)
		if err != nil {
			return fmt.Errorf("%s at revision %d: %w", envs[i].Type, envs[i].Revision, err)
		}
		envs[i].Payload = payload
	}
	return nil
}

// seal seals the personal member of an encoded event under subject. An erased subject's event
// is appended without it: the rest of the event still happened.
func (r *Repository[A]) seal(ctx context.Context, subject, typ string, payload json.RawMessage) (json.RawMessage, error) {
	if r.keys == nil || !eventschema.PlainPersonal(payload) {
		return payload, nil
	}
	if subject == "" {
		// Personal data with no subject to seal it under would be stored in plain text forever.
		return nil, fmt.Errorf("%s carries personal data, but its aggregate names no data subject", typ)
	}
	sealed, _, err := eventschema.SealPersonal(ctx, r.keys, subject, payload)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	return sealed, nil
}

// append stores events after the stream's first version events, whatever becomes of ctx.
func (r *Repository[A]) append(ctx context.Context, stream string, version int, meta Meta, subject string, events []domain.Event) (eventstore.AppendResult, error) {
	envs := make([]eventschema.Envelope, 0, len(events))
	now := r.now().UTC().Truncate(time.Millisecond)
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.appendTimeout)
	defer cancel()
	for _, e := range events {
		typ, schemaVersion, payload, err := r.registry.Encode(e)
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
		}
		if payload, err = r.seal(actx, subject, typ, payload); err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
		}
		envs = append(envs, eventschema.Envelope{
			EventID: uuid.NewString(), Type: typ, SchemaVersion: schemaVersion, Tenant: meta.Tenant,
			OccurredAt: now, CorrelationID: meta.CorrelationID, CausationID: meta.CausationID,
			Actor: meta.Actor, Payload: payload,
		})
	}
	res, err := r.store.Append(actx, stream, eventstore.AfterVersion(version), envs)
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	return res, nil
}
