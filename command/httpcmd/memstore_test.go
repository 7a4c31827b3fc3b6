package httpcmd_test

import (
	"context"
	"sync"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/eventschema"
)

// memStore is the smallest event store the repository can run on: streams in a map, optimistic
// concurrency as the port defines it. Test code only.
type memStore struct {
	mu       sync.Mutex
	streams  map[string][]eventschema.Envelope
	position uint64
	appends  int
}

func newMemStore() *memStore { return &memStore{streams: map[string][]eventschema.Envelope{}} }

func (s *memStore) Append(_ context.Context, stream string, expected eventstore.ExpectedRevision, events []eventschema.Envelope) (eventstore.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.streams[stream]
	exists := len(cur) > 0
	var last uint64
	if exists {
		last = uint64(len(cur) - 1)
	}
	if !expected.Allows(last, exists) {
		return eventstore.AppendResult{}, &eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: last, ActualExists: exists}
	}
	s.appends++
	var res eventstore.AppendResult
	for _, e := range events {
		s.position++
		e.Stream, e.Revision, e.Position = stream, uint64(len(cur)), s.position
		cur = append(cur, e)
		res = eventstore.AppendResult{NextExpectedRevision: e.Revision, Position: e.Position}
	}
	s.streams[stream] = cur
	return res, nil
}

func (s *memStore) ReadStream(_ context.Context, stream string, from uint64, limit int) ([]eventschema.Envelope, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.streams[stream]
	if len(cur) == 0 {
		return nil, eventstore.ErrStreamNotFound
	}
	var out []eventschema.Envelope
	for _, e := range cur[min(int(from), len(cur)):] {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, e)
	}
	return out, nil
}
