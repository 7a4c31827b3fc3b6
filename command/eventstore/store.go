// Package eventstore is the write side's port to the event store, with one contract suite
// (storetest) that every adapter passes: embedded SQLite (sqlite), EventStoreDB (esdb) and, for
// tests and tools only, in memory (memstore).
package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/samla/samla/eventschema"
)

// Store appends events to streams with optimistic concurrency and reads them back, per stream
// and across all streams in commit order.
type Store interface {
	// Append stores events at the end of stream if the stream is at the expected revision, and
	// returns only once they are durable. It is idempotent on event ids: retrying an append whose
	// events were already stored (a lost acknowledgement) with the same expected revision returns
	// the first result and stores nothing new. The envelopes' Stream, Revision and Position are
	// ignored and assigned by the store.
	Append(ctx context.Context, stream string, expected ExpectedRevision, events []eventschema.Envelope) (AppendResult, error)
	// ReadStream returns up to limit events of stream from revision from on, oldest first
	// (limit <= 0: all). A stream that has no events is ErrStreamNotFound.
	ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventschema.Envelope, error)
	// ReadAll returns up to limit events of all streams with a position greater than after, in
	// commit order. Position 0 is before the first event.
	ReadAll(ctx context.Context, after uint64, limit int) ([]eventschema.Envelope, error)
	// SubscribeAll delivers every event with a position greater than after, in commit order:
	// first those already stored (catch-up), then each new one as it is committed (live). It
	// blocks until ctx ends (returning ctx.Err()), the handler fails (returning its error) or
	// the store fails. The envelope's payload may be shared with the store and with other
	// subscriptions: a handler reads it, and copies it to keep or change it.
	SubscribeAll(ctx context.Context, after uint64, handle func(context.Context, eventschema.Envelope) error) error
	// Close releases the store.
	Close() error
}

// AppendResult tells where an append landed.
type AppendResult struct {
	// NextExpectedRevision is the revision of the last event appended: pass Exact(it) next time.
	NextExpectedRevision uint64
	// Position is the global commit position of the last event appended.
	Position uint64
}

type expectation int

const (
	expectAny expectation = iota
	expectNoStream
	expectStreamExists
	expectExact
)

// ExpectedRevision is the optimistic-concurrency condition of an append.
type ExpectedRevision struct {
	kind     expectation
	revision uint64
}

// Any appends whatever the stream's state.
func Any() ExpectedRevision { return ExpectedRevision{kind: expectAny} }

// NoStream appends only to a stream that has no events yet.
func NoStream() ExpectedRevision { return ExpectedRevision{kind: expectNoStream} }

// StreamExists appends only to a stream that has events.
func StreamExists() ExpectedRevision { return ExpectedRevision{kind: expectStreamExists} }

// Exact appends only if the stream's last event has this revision (revisions start at 0).
func Exact(revision uint64) ExpectedRevision {
	return ExpectedRevision{kind: expectExact, revision: revision}
}

// AfterVersion is the expectation for an aggregate that has folded version events: NoStream for
// 0, otherwise Exact(version-1).
func AfterVersion(version int) ExpectedRevision {
	if version <= 0 {
		return NoStream()
	}
	return Exact(uint64(version - 1))
}

// IsAny, IsNoStream, IsStreamExists and ExactRevision let adapters translate the expectation.
func (e ExpectedRevision) IsAny() bool          { return e.kind == expectAny }
func (e ExpectedRevision) IsNoStream() bool     { return e.kind == expectNoStream }
func (e ExpectedRevision) IsStreamExists() bool { return e.kind == expectStreamExists }

// ExactRevision returns the revision and true for an Exact expectation.
func (e ExpectedRevision) ExactRevision() (uint64, bool) { return e.revision, e.kind == expectExact }

// Allows reports whether a stream whose last revision is current (exists=false: no events)
// satisfies the expectation.
func (e ExpectedRevision) Allows(current uint64, exists bool) bool {
	switch e.kind {
	case expectAny:
		return true
	case expectNoStream:
		return !exists
	case expectStreamExists:
		return exists
	default:
		return exists && current == e.revision
	}
}

func (e ExpectedRevision) String() string {
	switch e.kind {
	case expectAny:
		return "any"
	case expectNoStream:
		return "no stream"
	case expectStreamExists:
		return "stream exists"
	default:
		return fmt.Sprintf("revision %d", e.revision)
	}
}

var (
	// ErrWrongExpectedRevision is an optimistic-concurrency conflict; test with errors.Is.
	ErrWrongExpectedRevision = errors.New("wrong expected revision")
	// ErrStreamNotFound is a read of a stream that has no events.
	ErrStreamNotFound = errors.New("stream not found")
)

// WrongExpectedRevisionError carries the details of a conflict.
type WrongExpectedRevisionError struct {
	Stream   string
	Expected ExpectedRevision
	// Actual is the stream's last revision; ActualExists is false when the stream has no events.
	Actual       uint64
	ActualExists bool
}

func (e *WrongExpectedRevisionError) Error() string {
	actual := "no stream"
	if e.ActualExists {
		actual = fmt.Sprintf("revision %d", e.Actual)
	}
	return fmt.Sprintf("append to %s expected %s, stream is at %s: %s", e.Stream, e.Expected, actual, ErrWrongExpectedRevision)
}

func (e *WrongExpectedRevisionError) Unwrap() error { return ErrWrongExpectedRevision }
