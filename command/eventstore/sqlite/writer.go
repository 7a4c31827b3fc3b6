package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/groupcommit"
)

type appendRequest struct {
	ctx      context.Context
	stream   string
	expected eventstore.ExpectedRevision
	events   []eventschema.Envelope
	// done has room for the one outcome, so the writer never blocks on a caller that gave up.
	done chan appendOutcome
}

type appendOutcome struct {
	result eventstore.AppendResult
	err    error
}

// Append implements eventstore.Store. It queues the request for the writer goroutine and waits
// until the group commit that includes it is durable.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventschema.Envelope) (eventstore.AppendResult, error) {
	if stream == "" {
		return eventstore.AppendResult{}, errors.New("append: empty stream name")
	}
	// Validating in the caller's goroutine keeps that work off the single writer, and so does
	// making the events what the file will hold, for the subscriptions' window (recentEvents).
	evs, err := eventstore.PrepareEvents(events)
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	for i := range evs {
		evs[i] = storable(evs[i])
	}
	if s.isClosing() {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, ErrClosed)
	}
	r := &appendRequest{ctx: ctx, stream: stream, expected: expected, events: evs, done: make(chan appendOutcome, 1)}
	select {
	case s.requests <- r:
	case <-s.closing:
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, ErrClosed)
	case <-ctx.Done():
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: not queued: %w", stream, ctx.Err())
	}
	select {
	case out := <-r.done:
		return out.result, out.err
	case <-s.writerDone:
		// The writer answers everything it dequeued before it exits; a request that slipped into
		// the queue after its last look was never seen.
		select {
		case out := <-r.done:
			return out.result, out.err
		default:
			return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, ErrClosed)
		}
	case <-ctx.Done():
		// The writer may still commit it; a retry with the same event ids finds out.
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: outcome unknown: %w", stream, ctx.Err())
	}
}

// runWriter is the only goroutine that writes. Each round takes every request queued so far,
// so requests that arrive while one commit is fsyncing share the next one: the more concurrent
// appenders, the more appends per fsync, with no timer adding latency when there is one.
func (s *Store) runWriter() {
	defer close(s.writerDone)
	batch := make([]*appendRequest, 0, s.cfg.maxBatch)
	for {
		// Closing wins over queued work, which select alone would pick at random.
		if s.isClosing() {
			s.failQueued()
			return
		}
		select {
		case <-s.closing:
			s.failQueued()
			return
		case r := <-s.requests:
			batch = append(batch[:0], r)
		}
		batch = groupcommit.Drain(batch, s.requests, s.cfg.maxBatch)
		s.commitBatch(batch)
		clear(batch) // drop references to finished requests while waiting for the next ones
	}
}

func (s *Store) failQueued() {
	for {
		select {
		case r := <-s.requests:
			r.done <- appendOutcome{err: fmt.Errorf("append to %s: %w", r.stream, ErrClosed)}
		default:
			return
		}
	}
}

// commitBatch runs each request in its own savepoint inside one transaction, so a request that
// conflicts is undone alone, then commits once and answers every caller.
func (s *Store) commitBatch(batch []*appendRequest) {
	// The transaction must not die with one caller's context: it carries the others' appends.
	ctx := context.Background()
	outcomes := make([]appendOutcome, len(batch))
	answer := func() {
		for i, r := range batch {
			r.done <- outcomes[i]
		}
	}
	failAll := func(err error) {
		for i, r := range batch {
			outcomes[i] = appendOutcome{err: fmt.Errorf("append to %s: %w", r.stream, err)}
		}
		answer()
	}

	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		failAll(fmt.Errorf("begin transaction: %w", err))
		return
	}
	w := batchTx{
		head: tx.StmtContext(ctx, s.head), findID: tx.StmtContext(ctx, s.findID), insert: tx.StmtContext(ctx, s.insert),
		savepoint: tx.StmtContext(ctx, s.savepoint), rollbackTo: tx.StmtContext(ctx, s.rollbackTo), release: tx.StmtContext(ctx, s.release),
	}
	if s.recent.wanted() {
		w.stored = &keptEvents{}
	}
	succeeded := 0
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			// Its caller has stopped waiting and was told the outcome is unknown; not writing
			// it keeps that honest and spares the work.
			outcomes[i] = appendOutcome{err: fmt.Errorf("append to %s: %w", r.stream, err)}
			continue
		}
		apply := w.applyInSavepoint
		if len(r.events) == 1 {
			apply = w.applySingle
		}
		out, err := apply(ctx, r)
		if err != nil {
			_ = tx.Rollback()
			failAll(err)
			return
		}
		outcomes[i] = out
		if out.err == nil {
			succeeded++
		}
	}
	if succeeded == 0 {
		if err := tx.Rollback(); err != nil {
			s.recoverWriter()
		}
		answer()
		return
	}
	if err := tx.Commit(); err != nil {
		// database/sql forgets the transaction even if SQLite kept it open (a busy COMMIT), which
		// would make every later BEGIN fail.
		s.recoverWriter()
		for i, r := range batch {
			if outcomes[i].err == nil {
				outcomes[i] = appendOutcome{err: fmt.Errorf("append to %s: commit: %w", r.stream, err)}
			}
		}
		answer()
		return
	}
	s.commits.Add(1)
	if w.stored != nil && !w.stored.overflow {
		// A batch past the window's caps is left out: the window then lacks its positions, and
		// a subscription reads them from the file.
		s.recent.committed(w.stored.events)
	}
	// Only after the commit: a subscriber woken earlier could read before the events are
	// visible and then sleep until the poll.
	s.committed.broadcast()
	answer()
}

func (s *Store) recoverWriter() {
	_, _ = s.wdb.ExecContext(context.Background(), "ROLLBACK")
}

// batchTx is one group commit's transaction with its statements bound to it.
type batchTx struct {
	head, findID, insert           *sql.Stmt
	savepoint, rollbackTo, release *sql.Stmt
	// stored collects the events inserted, as the file holds them, for recentEvents once the
	// transaction commits; nil when no subscription wants them.
	stored *keptEvents
}

// keptEvents are a group commit's inserted events for recentEvents, up to its caps: a batch
// past them (overflow) is not kept at all.
type keptEvents struct {
	events   []eventschema.Envelope
	bytes    int
	overflow bool
}

// keep notes an inserted event (storable: Append prepared it) for recentEvents, as ReadAll
// reads it back from stream/revision, position.
func (w batchTx) keep(e eventschema.Envelope, stream string, revision, position uint64) {
	k := w.stored
	if k == nil || k.overflow {
		return
	}
	if len(k.events) >= maxRecentEvents || k.bytes+len(e.Payload) > maxRecentBytes {
		k.events, k.bytes, k.overflow = nil, 0, true
		return
	}
	e.Stream, e.Revision, e.Position = stream, revision, position
	k.events = append(k.events, e)
	k.bytes += len(e.Payload)
}

// kept is how many events w has kept so far, for undoKept.
func (w batchTx) kept() int {
	if w.stored == nil {
		return 0
	}
	return len(w.stored.events)
}

// undoKept forgets the events kept after the first n: their inserts were rolled back.
func (w batchTx) undoKept(n int) {
	k := w.stored
	if k == nil || k.overflow { // an overflow keeps nothing of the batch anyway
		return
	}
	for _, e := range k.events[n:] {
		k.bytes -= len(e.Payload)
	}
	k.events = k.events[:n]
}

// applyInSavepoint returns the request's outcome, or an error when the transaction itself is
// broken and the whole batch must fail.
func (w batchTx) applyInSavepoint(ctx context.Context, r *appendRequest) (appendOutcome, error) {
	if _, err := w.savepoint.ExecContext(ctx); err != nil {
		return appendOutcome{}, fmt.Errorf("savepoint: %w", err)
	}
	kept := w.kept()
	res, err := w.apply(ctx, r)
	if err != nil {
		if _, rerr := w.rollbackTo.ExecContext(ctx); rerr != nil {
			return appendOutcome{}, fmt.Errorf("roll back to savepoint after %v: %w", err, rerr)
		}
		w.undoKept(kept)
	}
	if _, rerr := w.release.ExecContext(ctx); rerr != nil {
		return appendOutcome{}, fmt.Errorf("release savepoint: %w", rerr)
	}
	return appendOutcome{result: res, err: err}, nil
}

// readHead is where stream stands: its last revision and that event's position, as the
// append's expectation is checked against them; exists is false for a stream without events.
func (w batchTx) readHead(ctx context.Context, stream string) (head eventstore.AppendResult, exists bool, err error) {
	var revision, position int64
	err = w.head.QueryRowContext(ctx, stream).Scan(&revision, &position)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return eventstore.AppendResult{}, false, nil
	case err != nil:
		return eventstore.AppendResult{}, false, fmt.Errorf("append to %s: read last revision: %w", stream, err)
	}
	return eventstore.AppendResult{NextExpectedRevision: uint64(revision), Position: uint64(position)}, true, nil
}

// applySingle appends a request of one event, the common case (a command's one decision), with
// two statements instead of applyInSavepoint's five: it needs no savepoint, because a failed
// INSERT is undone by SQLite alone (the statement aborts, the transaction lives on), and it looks
// its event id up only when the expectation fails or the INSERT finds the id taken, which is
// when a retry or a reused id can be told apart, as CheckAppend does with what lookup found.
func (w batchTx) applySingle(ctx context.Context, r *appendRequest) (appendOutcome, error) {
	head, exists, err := w.readHead(ctx, r.stream)
	if err != nil {
		return appendOutcome{err: err}, nil
	}
	current := head.NextExpectedRevision
	// found stays empty on the first check: an id stored before matters only if the append
	// cannot simply go ahead, and the checks below then ask again with what is stored.
	recheck := func(cause error) (appendOutcome, error) {
		found, err := w.lookup(ctx, r.events)
		if err != nil {
			return appendOutcome{err: fmt.Errorf("append to %s: %w", r.stream, err)}, nil
		}
		if res, done, err := eventstore.CheckAppend(r.stream, r.expected, head, exists, r.events, found); done {
			return appendOutcome{result: res, err: err}, nil
		}
		return appendOutcome{err: fmt.Errorf("append to %s: insert event %s: %w", r.stream, r.events[0].EventID, cause)}, nil
	}
	if _, done, err := eventstore.CheckAppend(r.stream, r.expected, head, exists, r.events, nil); done {
		return recheck(err)
	}
	next := uint64(0)
	if exists {
		next = current + 1
	}
	e := r.events[0]
	res, err := w.insert.ExecContext(ctx, r.stream, int64(next), e.EventID, e.Type, e.SchemaVersion, e.Tenant,
		e.OccurredAt.UnixMilli(), e.CorrelationID, e.CausationID, e.Actor, string(e.Payload))
	if err != nil {
		// Most likely the event id's UNIQUE constraint: a retry of an append that succeeded.
		return recheck(err)
	}
	last, err := res.LastInsertId()
	if err != nil {
		// The row is written but its position unknown: the whole batch fails rather than
		// commit an append whose caller would be told it failed.
		return appendOutcome{}, fmt.Errorf("append to %s: position of event %s: %w", r.stream, e.EventID, err)
	}
	w.keep(e, r.stream, next, uint64(last))
	return appendOutcome{result: eventstore.AppendResult{NextExpectedRevision: next, Position: uint64(last)}}, nil
}

func (w batchTx) apply(ctx context.Context, r *appendRequest) (eventstore.AppendResult, error) {
	head, exists, err := w.readHead(ctx, r.stream)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	found, err := w.lookup(ctx, r.events)
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", r.stream, err)
	}
	current := head.NextExpectedRevision
	if res, done, err := eventstore.CheckAppend(r.stream, r.expected, head, exists, r.events, found); done {
		return res, err
	}

	next := uint64(0)
	if exists {
		next = current + 1
	}
	var last int64
	for i, e := range r.events {
		res, err := w.insert.ExecContext(ctx, r.stream, int64(next)+int64(i), e.EventID, e.Type, e.SchemaVersion, e.Tenant,
			e.OccurredAt.UnixMilli(), e.CorrelationID, e.CausationID, e.Actor, string(e.Payload))
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("append to %s: insert event %s: %w", r.stream, e.EventID, err)
		}
		if last, err = res.LastInsertId(); err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("append to %s: position of event %s: %w", r.stream, e.EventID, err)
		}
		w.keep(e, r.stream, next+uint64(i), uint64(last))
	}
	return eventstore.AppendResult{NextExpectedRevision: next + uint64(len(r.events)) - 1, Position: uint64(last)}, nil
}

// lookup finds which of the events' ids are already stored, and where.
func (w batchTx) lookup(ctx context.Context, events []eventschema.Envelope) (map[string]eventstore.StoredAt, error) {
	var found map[string]eventstore.StoredAt
	for _, e := range events {
		var at eventstore.StoredAt
		var revision, position int64
		err := w.findID.QueryRowContext(ctx, e.EventID).Scan(&at.Stream, &revision, &position)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("look up event id %s: %w", e.EventID, err)
		}
		at.Revision, at.Position = uint64(revision), uint64(position)
		if found == nil {
			found = make(map[string]eventstore.StoredAt, len(events))
		}
		found[e.EventID] = at
	}
	return found, nil
}
