// Package memstore is an in-memory event store for tests and tools. Nothing it stores is
// durable: its events live in the process's memory and are gone when the Store is dropped, so
// it must never back a service. It passes the eventstore contract suite (storetest), so code
// tested against it behaves the same on the real adapters.
//
// Beyond the eventstore.Store contract it guarantees, as the SQLite store does:
//   - Positions are 1, 2, 3, … in commit order, without gaps.
//   - Event ids are UUIDs, kept in canonical lowercase form, and unique across the whole store:
//     reusing one outside an idempotent retry fails with eventstore.ErrDuplicateEventID (or a
//     WrongExpectedRevisionError when the expectation fails as well).
//   - An append of no events checks the expectation and returns the stream's current last
//     revision and position (zeros for a stream without events).
//
// Streams, Events and Appends let a test inspect what was stored.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/eventschema"
)

// ErrClosed is returned by calls on a closed store and ends its subscriptions.
var ErrClosed = errors.New("memory event store closed")

var _ eventstore.Store = (*Store)(nil)

// catchUpBatch is how many events a subscription copies out per turn of the lock.
const catchUpBatch = 256

// Store is the in-memory event store. It is safe for concurrent use.
type Store struct {
	mu sync.Mutex
	// all holds every event in commit order: the event at position p is all[p-1].
	all []eventschema.Envelope
	// streams holds each stream's positions by revision; order names them by first append.
	streams map[string][]uint64
	order   []string
	// ids maps every stored event id to its position.
	ids     map[string]uint64
	appends int
	// committed is closed and replaced by every append that stores events.
	committed chan struct{}

	closed    chan struct{}
	closeOnce sync.Once
}

// New returns an empty store.
func New() *Store {
	return &Store{
		streams:   map[string][]uint64{},
		ids:       map[string]uint64{},
		committed: make(chan struct{}),
		closed:    make(chan struct{}),
	}
}

// Close ends the store's subscriptions with ErrClosed and makes later calls fail with it. It is
// safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

func (s *Store) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventschema.Envelope) (eventstore.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	if stream == "" {
		return eventstore.AppendResult{}, errors.New("append: empty stream name")
	}
	evs, err := eventstore.PrepareEvents(events)
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, ErrClosed)
	}
	positions := s.streams[stream]
	exists := len(positions) > 0
	var head eventstore.AppendResult
	if exists {
		head = eventstore.AppendResult{NextExpectedRevision: uint64(len(positions) - 1), Position: positions[len(positions)-1]}
	}
	found := map[string]eventstore.StoredAt{}
	for _, e := range evs {
		if p, ok := s.ids[e.EventID]; ok {
			at := s.all[p-1]
			found[e.EventID] = eventstore.StoredAt{Stream: at.Stream, Revision: at.Revision, Position: at.Position}
		}
	}
	if res, done, err := eventstore.CheckAppend(stream, expected, head, exists, evs, found); done {
		return res, err
	}

	if !exists {
		s.order = append(s.order, stream)
	}
	for _, e := range evs {
		// The store keeps OccurredAt at millisecond precision in UTC, and a payload of its own.
		e.OccurredAt = e.OccurredAt.UTC().Truncate(time.Millisecond)
		e.Payload = slices.Clone(e.Payload)
		e.Stream, e.Revision, e.Position = stream, uint64(len(positions)), uint64(len(s.all)+1)
		s.all = append(s.all, e)
		positions = append(positions, e.Position)
		s.ids[e.EventID] = e.Position
	}
	s.streams[stream] = positions
	s.appends++
	close(s.committed)
	s.committed = make(chan struct{})
	return eventstore.AppendResult{NextExpectedRevision: uint64(len(positions) - 1), Position: positions[len(positions)-1]}, nil
}

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventschema.Envelope, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() {
		return nil, fmt.Errorf("read stream %s: %w", stream, ErrClosed)
	}
	positions := s.streams[stream]
	if len(positions) == 0 {
		return nil, fmt.Errorf("read stream %s: %w", stream, eventstore.ErrStreamNotFound)
	}
	if from >= uint64(len(positions)) {
		return nil, nil
	}
	positions = positions[from:]
	if limit > 0 && len(positions) > limit {
		positions = positions[:limit]
	}
	out := make([]eventschema.Envelope, len(positions))
	for i, p := range positions {
		out[i] = s.event(p)
	}
	return out, nil
}

// ReadAll implements eventstore.Store.
func (s *Store) ReadAll(ctx context.Context, after uint64, limit int) ([]eventschema.Envelope, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read all: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() {
		return nil, fmt.Errorf("read all: %w", ErrClosed)
	}
	return s.readAll(after, limit), nil
}

// readAll copies up to limit events after position after (limit <= 0: all). The caller holds
// s.mu.
func (s *Store) readAll(after uint64, limit int) []eventschema.Envelope {
	if after >= uint64(len(s.all)) {
		return nil
	}
	n := uint64(len(s.all)) - after
	if limit > 0 && n > uint64(limit) {
		n = uint64(limit)
	}
	out := make([]eventschema.Envelope, n)
	for i := range out {
		out[i] = s.event(after + 1 + uint64(i))
	}
	return out
}

// event copies the event at position p, payload included, so that callers cannot change what
// is stored. The caller holds s.mu.
func (s *Store) event(p uint64) eventschema.Envelope {
	e := s.all[p-1]
	e.Payload = slices.Clone(e.Payload)
	return e
}

// SubscribeAll implements eventstore.Store. It copies events out in batches and hands them to
// handle without holding the lock; when it is caught up it waits for the next append. Taking
// the wake-up channel under the same lock as the read means no commit can slip between them.
func (s *Store) SubscribeAll(ctx context.Context, after uint64, handle func(context.Context, eventschema.Envelope) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.Lock()
		if s.isClosed() {
			s.mu.Unlock()
			return fmt.Errorf("subscribe to all: %w", ErrClosed)
		}
		batch := s.readAll(after, catchUpBatch)
		wake := s.committed
		s.mu.Unlock()

		var err error
		if after, err = eventstore.Deliver(ctx, after, batch, handle); err != nil {
			return err
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return fmt.Errorf("subscribe to all: %w", ErrClosed)
		case <-wake:
		}
	}
}

// Streams returns the names of the streams that have events, in the order of their first
// append.
func (s *Store) Streams() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// Events returns a copy of every event of stream, oldest first; nil for a stream without
// events.
func (s *Store) Events(stream string) []eventschema.Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []eventschema.Envelope
	for _, p := range s.streams[stream] {
		out = append(out, s.event(p))
	}
	return out
}

// Appends returns how many appends stored events. Idempotent retries, conflicts and appends of
// no events store nothing and are not counted.
func (s *Store) Appends() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appends
}
