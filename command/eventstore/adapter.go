package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/samla/samla/eventschema"
)

// What follows is for adapters that keep event ids unique across the whole store and decide
// appends and deliver subscriptions themselves (sqlite, memstore), so that they do it alike.

// ErrDuplicateEventID is an append of an event id that is already stored and is not a retry of
// the append that stored it.
var ErrDuplicateEventID = errors.New("event id already stored")

// PrepareEvents validates the events of an append and returns copies whose event ids are
// canonical, so that lookups by id match however a caller spelled the UUID. Every event needs a
// UUID id of its own within the batch, a type and a JSON payload.
func PrepareEvents(events []eventschema.Envelope) ([]eventschema.Envelope, error) {
	out := make([]eventschema.Envelope, len(events))
	seen := make(map[string]int, len(events))
	for i, e := range events {
		id, err := uuid.Parse(e.EventID)
		if err != nil {
			return nil, fmt.Errorf("event %d: event id %q is not a UUID: %w", i, e.EventID, err)
		}
		e.EventID = id.String()
		if j, dup := seen[e.EventID]; dup {
			return nil, fmt.Errorf("events %d and %d have the same id %s", j, i, e.EventID)
		}
		seen[e.EventID] = i
		if e.Type == "" {
			return nil, fmt.Errorf("event %d (%s): empty type", i, e.EventID)
		}
		if !json.Valid(e.Payload) {
			return nil, fmt.Errorf("event %d (%s): payload is not valid JSON", i, e.EventID)
		}
		out[i] = e
	}
	return out, nil
}

// StoredAt is where a stored event is.
type StoredAt struct {
	Stream             string
	Revision, Position uint64
}

// CheckAppend decides, before anything is written, an append of events (prepared by
// PrepareEvents) to stream expecting expected. head is the stream's last revision and position
// (zeros when exists is false: the stream has no events); found maps those of the events' ids
// that are already stored to where they are.
//
// It returns done when the append writes nothing, with its result or error: an append of no
// events whose expectation holds returns head; a retry of an append that already succeeded
// returns that append's result; otherwise a failed expectation is a *WrongExpectedRevisionError
// and a stored id ErrDuplicateEventID. When it returns not done, the events are to be written
// after head.
func CheckAppend(stream string, expected ExpectedRevision, head AppendResult, exists bool, events []eventschema.Envelope, found map[string]StoredAt) (res AppendResult, done bool, err error) {
	if len(found) > 0 {
		if res, ok := retried(stream, expected, events, found); ok {
			return res, true, nil
		}
	}
	if !expected.Allows(head.NextExpectedRevision, exists) {
		return AppendResult{}, true, &WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: head.NextExpectedRevision, ActualExists: exists}
	}
	if len(events) == 0 {
		return head, true, nil
	}
	for _, e := range events {
		if at, ok := found[e.EventID]; ok {
			return AppendResult{}, true, fmt.Errorf("append to %s: event %s is stored at %s revision %d: %w",
				stream, e.EventID, at.Stream, at.Revision, ErrDuplicateEventID)
		}
	}
	return AppendResult{}, false, nil
}

// retried reports whether the append repeats one that already succeeded: all its events are
// stored in order at the end of what its expectation described, as a lost acknowledgement would
// leave them. It then returns that append's result.
func retried(stream string, expected ExpectedRevision, events []eventschema.Envelope, found map[string]StoredAt) (AppendResult, bool) {
	first, ok := found[events[0].EventID]
	if !ok || first.Stream != stream {
		return AppendResult{}, false
	}
	var last StoredAt
	for i, e := range events {
		at, ok := found[e.EventID]
		if !ok || at.Stream != stream || at.Revision != first.Revision+uint64(i) {
			return AppendResult{}, false
		}
		last = at
	}
	var matches bool
	switch {
	case expected.IsAny():
		matches = true
	case expected.IsNoStream():
		matches = first.Revision == 0
	case expected.IsStreamExists():
		matches = first.Revision > 0
	default:
		rev, _ := expected.ExactRevision()
		matches = first.Revision == rev+1
	}
	if !matches {
		return AppendResult{}, false
	}
	return AppendResult{NextExpectedRevision: last.Revision, Position: last.Position}, true
}

// Deliver hands a batch of a subscription's events to handle in order, for an adapter's
// SubscribeAll. It returns the position of the last event handled (after when none was) and
// stops at the first error: ctx's, or handle's wrapped with the event's position.
func Deliver(ctx context.Context, after uint64, batch []eventschema.Envelope, handle func(context.Context, eventschema.Envelope) error) (uint64, error) {
	for _, e := range batch {
		if err := ctx.Err(); err != nil {
			return after, err
		}
		if err := handle(ctx, e); err != nil {
			return after, fmt.Errorf("subscribe to all: handle event at position %d: %w", e.Position, err)
		}
		after = e.Position
	}
	return after, nil
}
