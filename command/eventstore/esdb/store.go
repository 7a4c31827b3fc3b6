// Package esdb is the EventStoreDB (and KurrentDB) adapter of the event store port, on the
// official gRPC client github.com/EventStore/EventStore-Client-Go/v4.
//
// Mapping: the envelope's EventID is the event's UUID, Type its event type, Payload its JSON data
// and eventschema.Metadata its JSON user metadata. Reading maps back and fills Stream, Revision
// (the event number) and Position (the commit position in $all).
//
// Positions: EventStoreDB gives every event of an implicit transaction (every append over gRPC)
// its own log position, with commit position equal to prepare position. The port's single
// uint64 position is therefore the commit position, and reading or subscribing after it resumes
// from Position{Commit: p, Prepare: p}. A position must be one the store handed out (or 0): a
// real server cannot read $all from the middle of a log record.
package esdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	esdbclient "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/internal/esdbconn"
	"github.com/samla/samla/platform/retry"
)

// ErrClosed is returned by every call on a closed store.
var ErrClosed = esdbconn.ErrClosed

const (
	// unlimited is the read count for "all events". The wire field is a uint64, but the server
	// keeps counts in a signed 64-bit integer.
	unlimited = uint64(math.MaxInt64)
)

// Store is an eventstore.Store on EventStoreDB. It is safe for concurrent use.
type Store struct {
	client *esdbconn.Client
}

var _ eventstore.Store = (*Store)(nil)

// Open parses an EventStoreDB connection string such as "esdb://127.0.0.1:2113?tls=false" and
// returns a store on it. It does not connect: the client discovers the node on first use, so a
// service can start before its database is reachable.
func Open(connectionString string) (*Store, error) {
	c, err := esdbconn.Open(connectionString)
	if err != nil {
		return nil, err
	}
	return &Store{client: c}, nil
}

// Close closes the client; calls in flight fail and later calls return ErrClosed.
func (s *Store) Close() error { return s.client.Close() }

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventschema.Envelope) (eventstore.AppendResult, error) {
	if len(events) == 0 {
		// EventStoreDB accepts an empty append but has no last event to report.
		return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %s: no events", stream)
	}
	data := make([]esdbclient.EventData, len(events))
	for i, e := range events {
		d, err := toEventData(e)
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %s: %w", stream, err)
		}
		data[i] = d
	}
	opts := esdbclient.AppendToStreamOptions{ExpectedRevision: toExpectedRevision(expected)}

	var written *esdbclient.WriteResult
	err := s.client.Do(ctx, func(c *esdbclient.Client) error {
		var err error
		written, err = c.AppendToStream(ctx, stream, opts, data...)
		return err
	})
	if esdbconn.HasCode(err, esdbclient.ErrorCodeWrongExpectedVersion) {
		return s.conflict(ctx, stream, expected, data, err)
	}
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %s: %w", stream, err)
	}
	res := eventstore.AppendResult{NextExpectedRevision: written.NextExpectedVersion, Position: written.CommitPosition}
	if res.Position == 0 {
		// Older servers answer an idempotent retry without a position (no event sits at 0:
		// the log starts with system records): look the last event up.
		last, err := s.eventAt(ctx, stream, res.NextExpectedRevision)
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %s: find the position of revision %d: %w", stream, res.NextExpectedRevision, err)
		}
		res.Position = last.Position.Commit
	}
	return res, nil
}

// conflict turns the server's wrong expected version into the port's error, unless the append
// is a retry whose events are already where it expected them: then it returns what the first
// append returned, as the port promises. Servers recognise most retries themselves; this covers
// the rest (for example a retry after the server's id cache moved on).
func (s *Store) conflict(ctx context.Context, stream string, expected eventstore.ExpectedRevision, data []esdbclient.EventData, wrong error) (eventstore.AppendResult, error) {
	if res, ok, err := s.findRetry(ctx, stream, expected, data); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %s: check for a retry after %v: %w", stream, wrong, err)
	} else if ok {
		return res, nil
	}
	conflict := &eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected}
	if actual, exists, ok := parseActual(wrong); ok {
		conflict.Actual, conflict.ActualExists = actual, exists
	} else {
		last, err := s.lastEvent(ctx, stream)
		switch {
		case errors.Is(err, eventstore.ErrStreamNotFound):
		case err != nil:
			return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %s: %w (reading its revision: %v)", stream, conflict, err)
		default:
			conflict.Actual, conflict.ActualExists = last.EventNumber, true
		}
	}
	return eventstore.AppendResult{}, conflict
}

// findRetry reports whether the events already sit right after the expected revision.
func (s *Store) findRetry(ctx context.Context, stream string, expected eventstore.ExpectedRevision, data []esdbclient.EventData) (eventstore.AppendResult, bool, error) {
	var from uint64
	switch rev, exact := expected.ExactRevision(); {
	case exact:
		from = rev + 1
	case expected.IsNoStream():
		from = 0
	default:
		// Any never conflicts, and StreamExists only on a stream without events.
		return eventstore.AppendResult{}, false, nil
	}
	var found []*esdbclient.RecordedEvent
	err := s.readStream(ctx, stream, from, uint64(len(data)), func() { found = nil }, func(e *esdbclient.RecordedEvent) error {
		found = append(found, e)
		return nil
	})
	if errors.Is(err, eventstore.ErrStreamNotFound) {
		return eventstore.AppendResult{}, false, nil
	}
	if err != nil {
		return eventstore.AppendResult{}, false, err
	}
	if len(found) != len(data) {
		return eventstore.AppendResult{}, false, nil
	}
	for i, e := range found {
		if e.EventID != data[i].EventID {
			return eventstore.AppendResult{}, false, nil
		}
	}
	last := found[len(found)-1]
	return eventstore.AppendResult{NextExpectedRevision: last.EventNumber, Position: last.Position.Commit}, true, nil
}

// The client reports a conflict only as text: "... expecting '<expected>' but got '<actual>'",
// where actual is a revision or no_stream.
var actualPattern = regexp.MustCompile(`but got '([^']*)'`)

func parseActual(err error) (revision uint64, exists, ok bool) {
	m := actualPattern.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, false, false
	}
	if m[1] == "no_stream" {
		return 0, false, true
	}
	n, perr := strconv.ParseUint(m[1], 10, 64)
	if perr != nil {
		return 0, false, false
	}
	return n, true, true
}

func toExpectedRevision(e eventstore.ExpectedRevision) esdbclient.ExpectedRevision {
	if rev, ok := e.ExactRevision(); ok {
		return esdbclient.Revision(rev)
	}
	switch {
	case e.IsNoStream():
		return esdbclient.NoStream{}
	case e.IsStreamExists():
		return esdbclient.StreamExists{}
	default:
		return esdbclient.Any{}
	}
}

func toEventData(e eventschema.Envelope) (esdbclient.EventData, error) {
	id, err := uuid.Parse(e.EventID)
	if err != nil {
		return esdbclient.EventData{}, fmt.Errorf("event id %q is not a UUID: %w", e.EventID, err)
	}
	if e.Type == "" {
		return esdbclient.EventData{}, fmt.Errorf("event %s has no type", e.EventID)
	}
	m := e.Metadata()
	// The port stores OccurredAt at millisecond precision in UTC, whatever the writer passed.
	m.OccurredAt = m.OccurredAt.Truncate(time.Millisecond).UTC()
	meta, err := json.Marshal(m)
	if err != nil {
		return esdbclient.EventData{}, fmt.Errorf("encode metadata of event %s: %w", e.EventID, err)
	}
	return esdbclient.EventData{
		EventID:     id,
		EventType:   e.Type,
		ContentType: esdbclient.ContentTypeJson,
		Data:        e.Payload,
		Metadata:    meta,
	}, nil
}

func toEnvelope(r *esdbclient.RecordedEvent) (eventschema.Envelope, error) {
	e := eventschema.Envelope{
		EventID:  r.EventID.String(),
		Type:     r.EventType,
		Stream:   r.StreamID,
		Revision: r.EventNumber,
		Position: r.Position.Commit,
		Payload:  json.RawMessage(r.Data),
	}
	if len(r.UserMetadata) > 0 {
		var m eventschema.Metadata
		if err := json.Unmarshal(r.UserMetadata, &m); err != nil {
			return eventschema.Envelope{}, fmt.Errorf("decode metadata of %s/%d: %w", r.StreamID, r.EventNumber, err)
		}
		m.OccurredAt = m.OccurredAt.UTC()
		e = e.WithMetadata(m)
	}
	return e, nil
}

// isSystem reports the server's own events ($settings, $stats-…, projections' links), which
// are not Samla's and never leave the adapter through ReadAll or SubscribeAll.
func isSystem(r *esdbclient.RecordedEvent) bool {
	return strings.HasPrefix(r.EventType, "$") || strings.HasPrefix(r.StreamID, "$")
}

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventschema.Envelope, error) {
	count := unlimited
	if limit > 0 {
		count = uint64(limit)
	}
	var out []eventschema.Envelope
	err := s.readStream(ctx, stream, from, count, func() { out = nil }, func(r *esdbclient.RecordedEvent) error {
		e, err := toEnvelope(r)
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("esdb: read %s from %d: %w", stream, from, err)
	}
	return out, nil
}

// readStream reads up to count events of stream forwards from revision from. A stream without
// events is eventstore.ErrStreamNotFound. restart runs before each attempt, so that a read
// repeated on a new client starts over.
func (s *Store) readStream(ctx context.Context, stream string, from, count uint64, restart func(), each func(*esdbclient.RecordedEvent) error) error {
	opts := esdbclient.ReadStreamOptions{Direction: esdbclient.Forwards, From: esdbclient.Revision(from)}
	return s.client.Do(ctx, func(c *esdbclient.Client) error {
		restart()
		rs, err := c.ReadStream(ctx, stream, opts, count)
		if err != nil {
			return err
		}
		defer rs.Close()
		for {
			ev, err := rs.Recv()
			switch {
			case errors.Is(err, io.EOF):
				return nil
			case esdbconn.HasCode(err, esdbclient.ErrorCodeResourceNotFound):
				return eventstore.ErrStreamNotFound
			case err != nil:
				return err
			}
			if err := each(ev.OriginalEvent()); err != nil {
				return err
			}
		}
	})
}

// eventAt reads the event at revision of stream.
func (s *Store) eventAt(ctx context.Context, stream string, revision uint64) (*esdbclient.RecordedEvent, error) {
	var found *esdbclient.RecordedEvent
	err := s.readStream(ctx, stream, revision, 1, func() {}, func(e *esdbclient.RecordedEvent) error {
		found = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("no event at revision %d", revision)
	}
	return found, nil
}

// lastEvent reads the last event of stream.
func (s *Store) lastEvent(ctx context.Context, stream string) (*esdbclient.RecordedEvent, error) {
	var found *esdbclient.RecordedEvent
	opts := esdbclient.ReadStreamOptions{Direction: esdbclient.Backwards, From: esdbclient.End{}}
	err := s.client.Do(ctx, func(c *esdbclient.Client) error {
		rs, err := c.ReadStream(ctx, stream, opts, 1)
		if err != nil {
			return err
		}
		defer rs.Close()
		ev, err := rs.Recv()
		switch {
		case errors.Is(err, io.EOF), esdbconn.HasCode(err, esdbclient.ErrorCodeResourceNotFound):
			return eventstore.ErrStreamNotFound
		case err != nil:
			return err
		}
		found = ev.OriginalEvent()
		return nil
	})
	return found, err
}

// HeadPosition returns the commit position of the last event in $all, system events included,
// or 0 when the log is empty: how far a follower of $all has to go.
func (s *Store) HeadPosition(ctx context.Context) (uint64, error) {
	var head uint64
	opts := esdbclient.ReadAllOptions{Direction: esdbclient.Backwards, From: esdbclient.End{}}
	err := s.client.Do(ctx, func(c *esdbclient.Client) error {
		rs, err := c.ReadAll(ctx, opts, 1)
		if err != nil {
			return err
		}
		defer rs.Close()
		ev, err := rs.Recv()
		switch {
		case errors.Is(err, io.EOF):
			head = 0
			return nil
		case err != nil:
			return err
		}
		head = ev.OriginalEvent().Position.Commit
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("esdb: read the head of $all: %w", err)
	}
	return head, nil
}

// allPosition is where to read or subscribe to $all for events after the position after.
func allPosition(after uint64) esdbclient.AllPosition {
	if after == 0 {
		return esdbclient.Start{}
	}
	return esdbclient.Position{Commit: after, Prepare: after}
}

// ReadAll implements eventstore.Store. System events are skipped; they still count towards a
// page read from the server, so a page may bring fewer events than asked and the read goes on
// from where it stopped.
func (s *Store) ReadAll(ctx context.Context, after uint64, limit int) ([]eventschema.Envelope, error) {
	var out []eventschema.Envelope
	cursor := after
	for {
		count := unlimited
		if limit > 0 {
			// One more than needed: reading from a position includes the event at it.
			count = uint64(limit-len(out)) + 1
		}
		page, next, seen, err := s.readAllPage(ctx, cursor, count, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("esdb: read all after %d: %w", after, err)
		}
		out = append(out, page...)
		cursor = next
		if (limit > 0 && len(out) >= limit) || seen < count {
			return out, nil
		}
	}
}

// readAllPage reads up to count events of $all from the position after, and returns the
// non-system ones after it (at most want when want > 0), the position of the last event it
// looked at, and how many events the server sent.
func (s *Store) readAllPage(ctx context.Context, after, count uint64, want int) (page []eventschema.Envelope, next, seen uint64, err error) {
	opts := esdbclient.ReadAllOptions{Direction: esdbclient.Forwards, From: allPosition(after)}
	err = s.client.Do(ctx, func(c *esdbclient.Client) error {
		page, next, seen = nil, after, 0
		rs, err := c.ReadAll(ctx, opts, count)
		if err != nil {
			return err
		}
		defer rs.Close()
		for {
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			seen++
			r := ev.OriginalEvent()
			if r.Position.Commit <= next {
				continue
			}
			next = r.Position.Commit
			if isSystem(r) {
				continue
			}
			e, err := toEnvelope(r)
			if err != nil {
				return err
			}
			page = append(page, e)
			if want > 0 && len(page) == want {
				return nil
			}
		}
	})
	return page, next, seen, err
}

// SubscribeAll implements eventstore.Store with a catch-up subscription to $all that the server
// filters to non-system event types (and the adapter again, by type and stream). When the
// subscription drops it resubscribes after the last event it delivered, so every event is
// delivered once, in order, across drops and server restarts.
func (s *Store) SubscribeAll(ctx context.Context, after uint64, handle func(context.Context, eventschema.Envelope) error) error {
	last := after
	for attempt := 1; ; attempt++ {
		progressed, err := s.subscribeOnce(ctx, &last, handle)
		var herr handlerError
		switch {
		case errors.As(err, &herr):
			return herr.err
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrClosed):
			return ErrClosed
		case permanent(err):
			return fmt.Errorf("esdb: subscribe to $all after %d: %w", last, err)
		}
		if progressed {
			attempt = 1 // the failure is a fresh one
		}
		if err := retry.Sleep(ctx, retry.Default.Delay(attempt)); err != nil {
			return err
		}
	}
}

// handlerError marks the handler's error, which ends the subscription as it is.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

// decodeError marks an event the adapter cannot map; resubscribing would meet it again.
type decodeError struct{ err error }

func (e decodeError) Error() string { return e.err.Error() }
func (e decodeError) Unwrap() error { return e.err }

// permanent reports errors that resubscribing cannot cure.
func permanent(err error) bool {
	var d decodeError
	if errors.As(err, &d) {
		return true
	}
	for _, code := range []esdbclient.ErrorCode{
		esdbclient.ErrorCodeUnauthenticated,
		esdbclient.ErrorCodeAccessDenied,
		esdbclient.ErrorCodeUnsupportedFeature,
		esdbclient.ErrorCodeParsing,
	} {
		if esdbconn.HasCode(err, code) {
			return true
		}
	}
	return false
}

// subscribeOnce runs one subscription from *last until it drops, advancing *last past every
// event it handles or skips. It reports whether any event arrived.
func (s *Store) subscribeOnce(ctx context.Context, last *uint64, handle func(context.Context, eventschema.Envelope) error) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var sub *esdbclient.Subscription
	err := s.client.Do(ctx, func(c *esdbclient.Client) error {
		var err error
		sub, err = c.SubscribeToAll(ctx, esdbclient.SubscribeToAllOptions{
			From:   allPosition(*last),
			Filter: esdbclient.ExcludeSystemEventsFilter(),
		})
		return err
	})
	if err != nil {
		return false, err
	}
	defer sub.Close()
	progressed := false
	for {
		msg := sub.Recv()
		if msg.SubscriptionDropped != nil {
			return progressed, msg.SubscriptionDropped.Error
		}
		if msg.EventAppeared == nil {
			continue // Checkpoints, caught-up and fell-behind notices carry nothing to deliver.
		}
		progressed = true
		r := msg.EventAppeared.OriginalEvent()
		// A subscription starts after its position, but a server that repeats the event at
		// it must not make the handler see it twice.
		if r.Position.Commit <= *last {
			continue
		}
		if isSystem(r) {
			*last = r.Position.Commit
			continue
		}
		e, err := toEnvelope(r)
		if err != nil {
			return progressed, decodeError{err}
		}
		if err := ctx.Err(); err != nil {
			return progressed, err
		}
		if err := handle(ctx, e); err != nil {
			return progressed, handlerError{err}
		}
		*last = r.Position.Commit
	}
}
