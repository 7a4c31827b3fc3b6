// Package storetest is the contract suite every eventstore.Store adapter must pass. An adapter's
// test calls Run with a function that opens a new, empty store; the suite never closes stores
// itself, so open registers the cleanup.
//
// Besides the port's documentation, the suite pins down these semantics:
//   - Revisions start at 0 and are contiguous per stream. Positions are greater than 0 and
//     strictly increase in commit order across streams; they need not be contiguous.
//   - AppendResult names the last event of the append: its revision and its position.
//   - OccurredAt is stored at millisecond precision (truncated) and read back in UTC.
//   - Payload is read back as semantically equal JSON (a store may re-encode it, but must not
//     lose number precision).
//   - Reading a stream from a revision past its end returns no events and no error; only a
//     stream without events is ErrStreamNotFound.
//   - A retry of already stored event ids with the expected revision they were first appended
//     at returns the first result, even when the stream has grown since; with another expected
//     revision it is a WrongExpectedRevisionError.
//   - SubscribeAll returns an error that errors.Is the handler's error, or ctx.Err().
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/eventschema"
)

const (
	// testTimeout bounds a whole subtest so that a hanging adapter fails instead of stalling CI.
	testTimeout = 15 * time.Second
	// waitTimeout bounds one wait for a delivery or a return.
	waitTimeout = 5 * time.Second
)

// Run runs the contract suite; every subtest opens its own empty store with open.
func Run(t *testing.T, open func(t *testing.T) eventstore.Store) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s eventstore.Store)
	}{
		{"AppendNoStreamCreatesStream", testAppendNoStreamCreatesStream},
		{"ExpectedNoStream", testExpectedNoStream},
		{"ExpectedStreamExists", testExpectedStreamExists},
		{"ExpectedAny", testExpectedAny},
		{"ExpectedExact", testExpectedExact},
		{"RevisionsStartAtZeroAndAreContiguous", testRevisionsContiguous},
		{"PositionsIncreaseInCommitOrder", testPositionsIncrease},
		{"ReadStreamFromRevisionWithLimit", testReadStreamFromWithLimit},
		{"ReadStreamNotFound", testReadStreamNotFound},
		{"ReadAllAfterPositionWithLimit", testReadAllAfterWithLimit},
		{"EnvelopeRoundTrip", testEnvelopeRoundTrip},
		{"IdempotentRetry", testIdempotentRetry},
		{"BatchIsAtomic", testBatchIsAtomic},
		{"ConcurrentAppendsToOneStreamOneWins", testConcurrentSameStream},
		{"ConcurrentAppendsToManyStreams", testConcurrentManyStreams},
		{"SubscribeAllFromEmptyStore", testSubscribeFromEmpty},
		{"SubscribeAllCatchUpThenLive", testSubscribeCatchUpThenLive},
		{"SubscribeAllAfterPosition", testSubscribeAfterPosition},
		{"SubscribeAllCatchUpManyEvents", testSubscribeManyEvents},
		{"SubscribeAllDuringConcurrentAppends", testSubscribeDuringConcurrentAppends},
		{"SubscribeAllHandlerErrorStops", testSubscribeHandlerError},
		{"SubscribeAllContextEnds", testSubscribeContextEnds},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			if s == nil {
				t.Fatal("open returned a nil store")
			}
			tc.run(t, s)
		})
	}
}

// NewEvent builds an envelope with a fresh UUID event id and correlation id, schema version 1,
// a test tenant and actor, and OccurredAt now at millisecond precision. payload must marshal to
// a JSON object; nil means {}.
func NewEvent(eventType string, payload map[string]any) eventschema.Envelope {
	if payload == nil {
		payload = map[string]any{}
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		panic(fmt.Sprintf("storetest: payload of %s does not marshal: %v", eventType, err))
	}
	return eventschema.Envelope{
		EventID:       uuid.NewString(),
		Type:          eventType,
		SchemaVersion: 1,
		Tenant:        "tenant-storetest",
		OccurredAt:    time.Now().UTC().Truncate(time.Millisecond),
		CorrelationID: uuid.NewString(),
		Actor:         "storetest",
		Payload:       raw,
	}
}

// NewStream returns a stream name of category that no other test uses.
func NewStream(category string) string { return category + "-" + uuid.NewString() }

func events(n int, eventType string) []eventschema.Envelope {
	out := make([]eventschema.Envelope, n)
	for i := range out {
		out[i] = NewEvent(eventType, map[string]any{"i": i})
	}
	return out
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func mustAppend(t *testing.T, ctx context.Context, s eventstore.Store, stream string, expected eventstore.ExpectedRevision, evs ...eventschema.Envelope) eventstore.AppendResult {
	t.Helper()
	res, err := s.Append(ctx, stream, expected, evs)
	if err != nil {
		t.Fatalf("append %d events to %s expecting %s: %v", len(evs), stream, expected, err)
	}
	return res
}

func mustReadStream(t *testing.T, ctx context.Context, s eventstore.Store, stream string, from uint64, limit int) []eventschema.Envelope {
	t.Helper()
	evs, err := s.ReadStream(ctx, stream, from, limit)
	if err != nil {
		t.Fatalf("read %s from %d limit %d: %v", stream, from, limit, err)
	}
	return evs
}

func mustReadAll(t *testing.T, ctx context.Context, s eventstore.Store, after uint64, limit int) []eventschema.Envelope {
	t.Helper()
	evs, err := s.ReadAll(ctx, after, limit)
	if err != nil {
		t.Fatalf("read all after %d limit %d: %v", after, limit, err)
	}
	return evs
}

// wantConflict checks that err is a WrongExpectedRevisionError with these details.
func wantConflict(t *testing.T, err error, stream string, expected eventstore.ExpectedRevision, actual uint64, actualExists bool) {
	t.Helper()
	if err == nil {
		t.Fatalf("append to %s expecting %s succeeded, want a wrong expected revision", stream, expected)
	}
	if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Fatalf("append to %s expecting %s: error %v is not ErrWrongExpectedRevision", stream, expected, err)
	}
	var werr *eventstore.WrongExpectedRevisionError
	if !errors.As(err, &werr) {
		t.Fatalf("append to %s expecting %s: error %v carries no *WrongExpectedRevisionError", stream, expected, err)
	}
	if werr.Stream != stream {
		t.Errorf("conflict stream = %q, want %q", werr.Stream, stream)
	}
	if werr.Expected != expected {
		t.Errorf("conflict expected = %s, want %s", werr.Expected, expected)
	}
	if werr.ActualExists != actualExists {
		t.Errorf("conflict actual exists = %v, want %v", werr.ActualExists, actualExists)
	}
	if actualExists && werr.Actual != actual {
		t.Errorf("conflict actual revision = %d, want %d", werr.Actual, actual)
	}
}

// wantIDs checks that got holds exactly the events with these ids, in this order.
func wantIDs(t *testing.T, what string, got []eventschema.Envelope, want ...eventschema.Envelope) {
	t.Helper()
	gotIDs := make([]string, len(got))
	for i, e := range got {
		gotIDs[i] = e.EventID
	}
	wantIDs := make([]string, len(want))
	for i, e := range want {
		wantIDs[i] = e.EventID
	}
	if !reflect.DeepEqual(gotIDs, wantIDs) {
		t.Fatalf("%s: event ids\n got %v\nwant %v", what, gotIDs, wantIDs)
	}
}

// wantPlacement checks the store-assigned fields of events read back from one stream.
func wantPlacement(t *testing.T, what string, got []eventschema.Envelope, stream string, firstRevision uint64) {
	t.Helper()
	for i, e := range got {
		if e.Stream != stream {
			t.Errorf("%s: event %d stream = %q, want %q", what, i, e.Stream, stream)
		}
		if want := firstRevision + uint64(i); e.Revision != want {
			t.Errorf("%s: event %d revision = %d, want %d", what, i, e.Revision, want)
		}
	}
	wantIncreasingPositions(t, what, got)
}

func wantIncreasingPositions(t *testing.T, what string, got []eventschema.Envelope) {
	t.Helper()
	for i, e := range got {
		if e.Position == 0 {
			t.Fatalf("%s: event %d has position 0", what, i)
		}
		if i > 0 && e.Position <= got[i-1].Position {
			t.Fatalf("%s: event %d position %d not after %d", what, i, e.Position, got[i-1].Position)
		}
	}
}

// jsonEqual compares JSON documents by value, keeping numbers exact.
func jsonEqual(a, b []byte) (bool, error) {
	decode := func(raw []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		if d.More() {
			return nil, errors.New("trailing data after JSON value")
		}
		return v, nil
	}
	va, err := decode(a)
	if err != nil {
		return false, fmt.Errorf("decode %q: %w", a, err)
	}
	vb, err := decode(b)
	if err != nil {
		return false, fmt.Errorf("decode %q: %w", b, err)
	}
	return reflect.DeepEqual(va, vb), nil
}

// envelopeDiff describes how got differs from want in every field, or returns "".
func envelopeDiff(got, want eventschema.Envelope) string {
	var diffs []string
	add := func(field string, g, w any) { diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"EventID", got.EventID, want.EventID},
		{"Type", got.Type, want.Type},
		{"SchemaVersion", got.SchemaVersion, want.SchemaVersion},
		{"Tenant", got.Tenant, want.Tenant},
		{"Stream", got.Stream, want.Stream},
		{"Revision", got.Revision, want.Revision},
		{"Position", got.Position, want.Position},
		{"CorrelationID", got.CorrelationID, want.CorrelationID},
		{"CausationID", got.CausationID, want.CausationID},
		{"Actor", got.Actor, want.Actor},
	} {
		if f.got != f.want {
			add(f.name, f.got, f.want)
		}
	}
	if !got.OccurredAt.Equal(want.OccurredAt) || got.OccurredAt.Location() != want.OccurredAt.Location() {
		add("OccurredAt", got.OccurredAt, want.OccurredAt)
	}
	if eq, err := jsonEqual(got.Payload, want.Payload); err != nil {
		diffs = append(diffs, "Payload: "+err.Error())
	} else if !eq {
		add("Payload", string(got.Payload), string(want.Payload))
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprint(diffs)
}

// stored is what a store must read back for an appended envelope.
func stored(in eventschema.Envelope, stream string, revision, position uint64) eventschema.Envelope {
	out := in
	out.Stream, out.Revision, out.Position = stream, revision, position
	out.OccurredAt = in.OccurredAt.Truncate(time.Millisecond).UTC()
	return out
}

func testAppendNoStreamCreatesStream(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("collection")
	e := NewEvent("collection.created", map[string]any{"n": 1})
	res := mustAppend(t, ctx, s, stream, eventstore.NoStream(), e)
	if res.NextExpectedRevision != 0 {
		t.Errorf("next expected revision = %d, want 0", res.NextExpectedRevision)
	}
	if res.Position == 0 {
		t.Errorf("position = 0, want > 0")
	}
	got := mustReadStream(t, ctx, s, stream, 0, 0)
	wantIDs(t, "read stream", got, e)
	wantPlacement(t, "read stream", got, stream, 0)
	if got[0].Position != res.Position {
		t.Errorf("read position = %d, append said %d", got[0].Position, res.Position)
	}
}

func testExpectedNoStream(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("collection")
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), events(2, "a")...)
	_, err := s.Append(ctx, stream, eventstore.NoStream(), events(1, "b"))
	wantConflict(t, err, stream, eventstore.NoStream(), 1, true)
	if got := mustReadStream(t, ctx, s, stream, 0, 0); len(got) != 2 {
		t.Fatalf("stream has %d events after a conflict, want 2", len(got))
	}
}

func testExpectedStreamExists(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("consent")
	_, err := s.Append(ctx, stream, eventstore.StreamExists(), events(1, "a"))
	wantConflict(t, err, stream, eventstore.StreamExists(), 0, false)
	if _, err := s.ReadStream(ctx, stream, 0, 0); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("read after a failed StreamExists append: err = %v, want ErrStreamNotFound", err)
	}
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), events(1, "a")...)
	res := mustAppend(t, ctx, s, stream, eventstore.StreamExists(), events(2, "b")...)
	if res.NextExpectedRevision != 2 {
		t.Errorf("next expected revision = %d, want 2", res.NextExpectedRevision)
	}
}

func testExpectedAny(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("user")
	res := mustAppend(t, ctx, s, stream, eventstore.Any(), events(1, "a")...)
	if res.NextExpectedRevision != 0 {
		t.Errorf("any on a new stream: next expected revision = %d, want 0", res.NextExpectedRevision)
	}
	res = mustAppend(t, ctx, s, stream, eventstore.Any(), events(2, "b")...)
	if res.NextExpectedRevision != 2 {
		t.Errorf("any on an existing stream: next expected revision = %d, want 2", res.NextExpectedRevision)
	}
	wantPlacement(t, "read stream", mustReadStream(t, ctx, s, stream, 0, 0), stream, 0)
}

func testExpectedExact(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("cancellation")
	_, err := s.Append(ctx, stream, eventstore.Exact(0), events(1, "a"))
	wantConflict(t, err, stream, eventstore.Exact(0), 0, false)

	mustAppend(t, ctx, s, stream, eventstore.NoStream(), events(1, "a")...)
	res := mustAppend(t, ctx, s, stream, eventstore.Exact(0), events(1, "b")...)
	if res.NextExpectedRevision != 1 {
		t.Fatalf("next expected revision = %d, want 1", res.NextExpectedRevision)
	}
	for _, stale := range []uint64{0, 2, 7} {
		_, err := s.Append(ctx, stream, eventstore.Exact(stale), events(1, "c"))
		wantConflict(t, err, stream, eventstore.Exact(stale), 1, true)
	}
	res = mustAppend(t, ctx, s, stream, eventstore.Exact(res.NextExpectedRevision), events(1, "c")...)
	if res.NextExpectedRevision != 2 {
		t.Fatalf("next expected revision = %d, want 2", res.NextExpectedRevision)
	}
	if got := mustReadStream(t, ctx, s, stream, 0, 0); len(got) != 3 {
		t.Fatalf("stream has %d events, want 3", len(got))
	}
	// AfterVersion is how aggregates call Append: a stream folded to version 3 is at revision 2.
	mustAppend(t, ctx, s, stream, eventstore.AfterVersion(3), events(1, "d")...)
	other := NewStream("cancellation")
	mustAppend(t, ctx, s, other, eventstore.AfterVersion(0), events(1, "a")...)
}

func testRevisionsContiguous(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("collection")
	var all []eventschema.Envelope
	next := eventstore.NoStream()
	for i, n := range []int{1, 3, 2, 1} {
		batch := events(n, "collection.step")
		res := mustAppend(t, ctx, s, stream, next, batch...)
		all = append(all, batch...)
		if want := uint64(len(all) - 1); res.NextExpectedRevision != want {
			t.Fatalf("append %d: next expected revision = %d, want %d", i, res.NextExpectedRevision, want)
		}
		got := mustReadStream(t, ctx, s, stream, res.NextExpectedRevision, 1)
		if len(got) != 1 || got[0].Position != res.Position || got[0].EventID != batch[n-1].EventID {
			t.Fatalf("append %d: result %+v does not name the last event appended (read %+v)", i, res, got)
		}
		next = eventstore.Exact(res.NextExpectedRevision)
	}
	got := mustReadStream(t, ctx, s, stream, 0, 0)
	wantIDs(t, "read stream", got, all...)
	wantPlacement(t, "read stream", got, stream, 0)
}

func testPositionsIncrease(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	a, b, c := NewStream("collection"), NewStream("consent"), NewStream("user")
	var order []eventschema.Envelope
	var last uint64
	step := func(stream string, expected eventstore.ExpectedRevision, n int) {
		t.Helper()
		batch := events(n, "step")
		res := mustAppend(t, ctx, s, stream, expected, batch...)
		if res.Position <= last {
			t.Fatalf("append to %s: position %d not after previous %d", stream, res.Position, last)
		}
		last = res.Position
		order = append(order, batch...)
	}
	step(a, eventstore.NoStream(), 1)
	step(b, eventstore.NoStream(), 2)
	step(a, eventstore.Exact(0), 1)
	step(c, eventstore.Any(), 1)
	step(b, eventstore.StreamExists(), 3)
	got := mustReadAll(t, ctx, s, 0, 0)
	wantIDs(t, "read all", got, order...)
	wantIncreasingPositions(t, "read all", got)
	if got[len(got)-1].Position != last {
		t.Fatalf("last position read = %d, last append said %d", got[len(got)-1].Position, last)
	}
}

func testReadStreamFromWithLimit(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream, other := NewStream("collection"), NewStream("collection")
	first, second := events(2, "a"), events(4, "b")
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), first...)
	mustAppend(t, ctx, s, other, eventstore.NoStream(), events(3, "noise")...)
	mustAppend(t, ctx, s, stream, eventstore.Exact(1), second...)
	all := append(append([]eventschema.Envelope{}, first...), second...)

	cases := []struct {
		from  uint64
		limit int
		want  []eventschema.Envelope
	}{
		{0, 0, all},
		{0, -1, all},
		{0, 100, all},
		{0, 1, all[:1]},
		{2, 3, all[2:5]},
		{4, 10, all[4:]},
		{5, 0, all[5:]},
		{6, 0, nil},
		{1000, 5, nil},
	}
	for _, c := range cases {
		what := fmt.Sprintf("read stream from %d limit %d", c.from, c.limit)
		got := mustReadStream(t, ctx, s, stream, c.from, c.limit)
		wantIDs(t, what, got, c.want...)
		wantPlacement(t, what, got, stream, c.from)
	}
}

func testReadStreamNotFound(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	for _, from := range []uint64{0, 3} {
		_, err := s.ReadStream(ctx, NewStream("collection"), from, 0)
		if !errors.Is(err, eventstore.ErrStreamNotFound) {
			t.Fatalf("read of a stream without events from %d: err = %v, want ErrStreamNotFound", from, err)
		}
	}
	// Another stream's events don't make this one exist.
	mustAppend(t, ctx, s, NewStream("collection"), eventstore.NoStream(), events(1, "a")...)
	if _, err := s.ReadStream(ctx, NewStream("collection"), 0, 10); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Fatalf("read of a stream without events in a non-empty store: err = %v, want ErrStreamNotFound", err)
	}
}

func testReadAllAfterWithLimit(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	for _, limit := range []int{0, 10} {
		if got := mustReadAll(t, ctx, s, 0, limit); len(got) != 0 {
			t.Fatalf("read all of an empty store limit %d: %d events", limit, len(got))
		}
	}
	a, b := NewStream("collection"), NewStream("consent")
	e := events(5, "step")
	mustAppend(t, ctx, s, a, eventstore.NoStream(), e[0])
	mustAppend(t, ctx, s, b, eventstore.NoStream(), e[1], e[2])
	mustAppend(t, ctx, s, a, eventstore.Exact(0), e[3])
	mustAppend(t, ctx, s, b, eventstore.Exact(1), e[4])

	all := mustReadAll(t, ctx, s, 0, 0)
	wantIDs(t, "read all", all, e...)
	wantIncreasingPositions(t, "read all", all)
	placement := []struct {
		stream   string
		revision uint64
	}{{a, 0}, {b, 0}, {b, 1}, {a, 1}, {b, 2}}
	for i, p := range placement {
		if all[i].Stream != p.stream || all[i].Revision != p.revision {
			t.Errorf("read all event %d at %s/%d, want %s/%d", i, all[i].Stream, all[i].Revision, p.stream, p.revision)
		}
	}
	cases := []struct {
		after uint64
		limit int
		want  []eventschema.Envelope
	}{
		{0, -1, e},
		{0, 2, e[:2]},
		{all[0].Position, 0, e[1:]},
		{all[1].Position, 2, e[2:4]},
		{all[3].Position, 10, e[4:]},
		{all[4].Position, 0, nil},
		{all[4].Position + 1000, 1, nil},
	}
	for _, c := range cases {
		got := mustReadAll(t, ctx, s, c.after, c.limit)
		wantIDs(t, fmt.Sprintf("read all after %d limit %d", c.after, c.limit), got, c.want...)
	}
	// A position between two events (stores need not number them contiguously) reads from the
	// next one.
	if all[2].Position-all[1].Position > 1 {
		got := mustReadAll(t, ctx, s, all[1].Position+1, 1)
		wantIDs(t, "read all after a position between events", got, e[2])
	}
}

func testEnvelopeRoundTrip(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("collection")
	full := eventschema.Envelope{
		EventID:       uuid.NewString(),
		Type:          "collection.status-changed",
		SchemaVersion: 3,
		Tenant:        "client-42",
		// Stream, Revision and Position are the store's to assign.
		Stream:        "bogus-stream",
		Revision:      77,
		Position:      12345,
		OccurredAt:    time.Date(2024, 2, 29, 23, 59, 58, 987654321, time.FixedZone("CET", 3600)),
		CorrelationID: uuid.NewString(),
		CausationID:   uuid.NewString(),
		Actor:         "api-key:sandbox",
		Payload: json.RawMessage(`{"status":"completed","big":12345678901234567,"ratio":0.25,` +
			`"nested":{"list":[1,"two",{"three":null}],"empty":{}},"text":"åäö \"quoted\" <tag> & \\ \u2028",` +
			`"flag":true,"personal":{"personalNumber":"199001011234"}}`),
	}
	minimal := eventschema.Envelope{
		EventID:       uuid.NewString(),
		Type:          "collection.created",
		SchemaVersion: 1,
		Tenant:        "client-1",
		OccurredAt:    time.UnixMilli(1_700_000_000_123).In(time.Local),
		Payload:       json.RawMessage(`{}`),
	}
	res := mustAppend(t, ctx, s, stream, eventstore.NoStream(), full, minimal)

	fromStream := mustReadStream(t, ctx, s, stream, 0, 0)
	if len(fromStream) != 2 {
		t.Fatalf("read stream: %d events, want 2", len(fromStream))
	}
	fromAll := mustReadAll(t, ctx, s, 0, 0)
	if len(fromAll) != 2 {
		t.Fatalf("read all: %d events, want 2", len(fromAll))
	}
	if fromStream[1].Position != res.Position {
		t.Fatalf("position of the last event = %d, append said %d", fromStream[1].Position, res.Position)
	}
	for i, in := range []eventschema.Envelope{full, minimal} {
		want := stored(in, stream, uint64(i), fromStream[i].Position)
		if d := envelopeDiff(fromStream[i], want); d != "" {
			t.Errorf("read stream event %d: %s", i, d)
		}
		if d := envelopeDiff(fromAll[i], want); d != "" {
			t.Errorf("read all event %d: %s", i, d)
		}
		if loc := fromStream[i].OccurredAt.Location(); loc != time.UTC {
			t.Errorf("read stream event %d: OccurredAt location = %v, want UTC", i, loc)
		}
	}
	if got, want := fromStream[0].OccurredAt, time.Date(2024, 2, 29, 22, 59, 58, 987000000, time.UTC); !got.Equal(want) {
		t.Errorf("OccurredAt = %v, want %v (truncated to the millisecond)", got, want)
	}
	wantIncreasingPositions(t, "read stream", fromStream)
}

func testIdempotentRetry(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("collection")
	a, b, c, d := NewEvent("a", nil), NewEvent("b", nil), NewEvent("c", nil), NewEvent("d", nil)

	first := mustAppend(t, ctx, s, stream, eventstore.NoStream(), a, b)
	retry := mustAppend(t, ctx, s, stream, eventstore.NoStream(), a, b)
	if retry != first {
		t.Fatalf("retry of a NoStream append = %+v, first result %+v", retry, first)
	}

	second := mustAppend(t, ctx, s, stream, eventstore.Exact(first.NextExpectedRevision), c)
	retry = mustAppend(t, ctx, s, stream, eventstore.Exact(first.NextExpectedRevision), c)
	if retry != second {
		t.Fatalf("retry of an Exact append = %+v, first result %+v", retry, second)
	}

	// The acknowledgement was lost and someone appended since: the retry still finds its events.
	mustAppend(t, ctx, s, stream, eventstore.Exact(second.NextExpectedRevision), d)
	retry = mustAppend(t, ctx, s, stream, eventstore.Exact(first.NextExpectedRevision), c)
	if retry != second {
		t.Fatalf("retry of an Exact append after a later append = %+v, first result %+v", retry, second)
	}

	// The same ids at another expected revision are not a retry.
	_, err := s.Append(ctx, stream, eventstore.Exact(0), []eventschema.Envelope{c})
	wantConflict(t, err, stream, eventstore.Exact(0), 3, true)
	_, err = s.Append(ctx, stream, eventstore.NoStream(), []eventschema.Envelope{c})
	wantConflict(t, err, stream, eventstore.NoStream(), 3, true)

	got := mustReadStream(t, ctx, s, stream, 0, 0)
	wantIDs(t, "read stream after retries", got, a, b, c, d)
	wantPlacement(t, "read stream after retries", got, stream, 0)
	wantIDs(t, "read all after retries", mustReadAll(t, ctx, s, 0, 0), a, b, c, d)
}

func testBatchIsAtomic(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("collection")
	x, y, z := NewEvent("x", nil), NewEvent("y", nil), NewEvent("z", nil)
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), x)

	_, err := s.Append(ctx, stream, eventstore.NoStream(), []eventschema.Envelope{y, z})
	wantConflict(t, err, stream, eventstore.NoStream(), 0, true)
	_, err = s.Append(ctx, stream, eventstore.Exact(5), []eventschema.Envelope{y, z})
	wantConflict(t, err, stream, eventstore.Exact(5), 0, true)

	wantIDs(t, "read stream after conflicts", mustReadStream(t, ctx, s, stream, 0, 0), x)
	wantIDs(t, "read all after conflicts", mustReadAll(t, ctx, s, 0, 0), x)

	// Had the conflicting batch left y behind, its id would now be taken.
	res := mustAppend(t, ctx, s, stream, eventstore.Exact(0), y, z)
	if res.NextExpectedRevision != 2 {
		t.Fatalf("next expected revision = %d, want 2", res.NextExpectedRevision)
	}
	got := mustReadStream(t, ctx, s, stream, 0, 0)
	wantIDs(t, "read stream", got, x, y, z)
	wantPlacement(t, "read stream", got, stream, 0)
}

func testConcurrentSameStream(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("collection")
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), NewEvent("created", nil))
	const writers, rounds = 8, 5
	for round := range rounds {
		expected := eventstore.Exact(uint64(round))
		candidates := events(writers, "claimed")
		errs := make([]error, writers)
		results := make([]eventstore.AppendResult, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				results[i], errs[i] = s.Append(ctx, stream, expected, candidates[i:i+1])
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both appended at %s", round, winner, i, expected)
				}
				winner = i
			case errors.Is(err, eventstore.ErrWrongExpectedRevision):
				wantConflict(t, err, stream, expected, uint64(round+1), true)
			default:
				t.Fatalf("round %d: writer %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer appended at %s", round, expected)
		}
		if results[winner].NextExpectedRevision != uint64(round+1) {
			t.Fatalf("round %d: winner's next expected revision = %d, want %d", round, results[winner].NextExpectedRevision, round+1)
		}
		got := mustReadStream(t, ctx, s, stream, uint64(round+1), 0)
		wantIDs(t, fmt.Sprintf("round %d: read stream", round), got, candidates[winner])
	}
	got := mustReadStream(t, ctx, s, stream, 0, 0)
	if len(got) != rounds+1 {
		t.Fatalf("stream has %d events, want %d", len(got), rounds+1)
	}
	wantPlacement(t, "read stream", got, stream, 0)
}

func testConcurrentManyStreams(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	const writers, appends = 8, 25
	streams := make([]string, writers)
	written := make([][]eventschema.Envelope, writers)
	positions := make([][]uint64, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		streams[w] = NewStream("collection")
		wg.Go(func() {
			<-start
			expected := eventstore.NoStream()
			for i := range appends {
				e := NewEvent("step", map[string]any{"writer": w, "i": i})
				res, err := s.Append(ctx, streams[w], expected, []eventschema.Envelope{e})
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				if res.NextExpectedRevision != uint64(i) {
					t.Errorf("writer %d append %d: next expected revision = %d", w, i, res.NextExpectedRevision)
					return
				}
				if n := len(positions[w]); n > 0 && res.Position <= positions[w][n-1] {
					t.Errorf("writer %d append %d: position %d not after %d", w, i, res.Position, positions[w][n-1])
					return
				}
				written[w] = append(written[w], e)
				positions[w] = append(positions[w], res.Position)
				expected = eventstore.Exact(res.NextExpectedRevision)
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	all := mustReadAll(t, ctx, s, 0, 0)
	if len(all) != writers*appends {
		t.Fatalf("read all: %d events, want %d", len(all), writers*appends)
	}
	wantIncreasingPositions(t, "read all", all)
	type placed struct {
		stream   string
		revision uint64
		position uint64
	}
	want := map[string]placed{}
	for w := range writers {
		for i, e := range written[w] {
			want[e.EventID] = placed{streams[w], uint64(i), positions[w][i]}
		}
	}
	for _, e := range all {
		p, ok := want[e.EventID]
		if !ok {
			t.Fatalf("read all: unknown or duplicate event %s", e.EventID)
		}
		delete(want, e.EventID)
		if (placed{e.Stream, e.Revision, e.Position}) != p {
			t.Fatalf("read all: event %s at %s/%d position %d, append said %s/%d position %d",
				e.EventID, e.Stream, e.Revision, e.Position, p.stream, p.revision, p.position)
		}
	}
	for w := range writers {
		got := mustReadStream(t, ctx, s, streams[w], 0, 0)
		wantIDs(t, fmt.Sprintf("writer %d: read stream", w), got, written[w]...)
		wantPlacement(t, fmt.Sprintf("writer %d: read stream", w), got, streams[w], 0)
	}
}

// subscription runs SubscribeAll in the background and hands events to the test.
type subscription struct {
	events chan eventschema.Envelope
	done   chan error
	cancel context.CancelFunc
	ended  bool
}

func subscribe(t *testing.T, ctx context.Context, s eventstore.Store, after uint64) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	sub := &subscription{events: make(chan eventschema.Envelope, 4096), done: make(chan error, 1), cancel: cancel}
	go func() {
		sub.done <- s.SubscribeAll(ctx, after, func(hctx context.Context, e eventschema.Envelope) error {
			select {
			case sub.events <- e:
				return nil
			case <-hctx.Done():
				return hctx.Err()
			}
		})
	}()
	t.Cleanup(func() {
		if !sub.ended {
			cancel()
			select {
			case <-sub.done:
			case <-time.After(waitTimeout):
				t.Errorf("subscription did not return within %s of its context ending", waitTimeout)
			}
		}
	})
	return sub
}

func (sub *subscription) next(t *testing.T) eventschema.Envelope {
	t.Helper()
	select {
	case e := <-sub.events:
		return e
	case err := <-sub.done:
		sub.ended = true
		t.Fatalf("subscription ended while an event was due: %v", err)
	case <-time.After(waitTimeout):
		t.Fatalf("no event delivered within %s", waitTimeout)
	}
	return eventschema.Envelope{}
}

// expect reads len(want) events and checks they are want, in order.
func (sub *subscription) expect(t *testing.T, what string, want ...eventschema.Envelope) []eventschema.Envelope {
	t.Helper()
	got := make([]eventschema.Envelope, len(want))
	for i := range want {
		got[i] = sub.next(t)
	}
	wantIDs(t, what, got, want...)
	return got
}

// expectOnly proves that nothing but want arrives before a sentinel appended afterwards: no
// duplicate and no stray event.
func (sub *subscription) expectOnly(t *testing.T, ctx context.Context, s eventstore.Store, what string, want ...eventschema.Envelope) []eventschema.Envelope {
	t.Helper()
	got := sub.expect(t, what, want...)
	sentinel := NewEvent("sentinel", nil)
	mustAppend(t, ctx, s, NewStream("sentinel"), eventstore.NoStream(), sentinel)
	sub.expect(t, what+": sentinel after them", sentinel)
	return got
}

// stop cancels the subscription and checks it returns the context's error.
func (sub *subscription) stop(t *testing.T) {
	t.Helper()
	sub.cancel()
	select {
	case err := <-sub.done:
		sub.ended = true
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("subscription returned %v after cancel, want context.Canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("subscription did not return within %s of cancel", waitTimeout)
	}
}

// wantSameAsStored checks that delivered events equal what ReadAll returns, field by field.
func wantSameAsStored(t *testing.T, ctx context.Context, s eventstore.Store, after uint64, got []eventschema.Envelope) {
	t.Helper()
	stored := mustReadAll(t, ctx, s, after, len(got))
	if len(stored) != len(got) {
		t.Fatalf("read all after %d: %d events, delivered %d", after, len(stored), len(got))
	}
	for i := range got {
		if d := envelopeDiff(got[i], stored[i]); d != "" {
			t.Fatalf("delivered event %d differs from stored: %s", i, d)
		}
	}
}

func testSubscribeFromEmpty(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	sub := subscribe(t, ctx, s, 0)
	stream := NewStream("collection")
	e := events(3, "live")
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), e[0])
	sub.expect(t, "first live event", e[0])
	mustAppend(t, ctx, s, stream, eventstore.Exact(0), e[1], e[2])
	got := sub.expectOnly(t, ctx, s, "live batch", e[1], e[2])
	wantPlacement(t, "live batch", got, stream, 1)
	sub.stop(t)
}

func testSubscribeCatchUpThenLive(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	a, b := NewStream("collection"), NewStream("consent")
	e := events(7, "step")
	mustAppend(t, ctx, s, a, eventstore.NoStream(), e[0], e[1])
	mustAppend(t, ctx, s, b, eventstore.NoStream(), e[2])

	sub := subscribe(t, ctx, s, 0)
	got := sub.expect(t, "catch-up", e[:3]...)

	mustAppend(t, ctx, s, a, eventstore.Exact(1), e[3])
	mustAppend(t, ctx, s, b, eventstore.Exact(0), e[4], e[5])
	mustAppend(t, ctx, s, a, eventstore.StreamExists(), e[6])
	got = append(got, sub.expectOnly(t, ctx, s, "live", e[3:]...)...)
	wantIncreasingPositions(t, "delivered", got)
	wantSameAsStored(t, ctx, s, 0, got)
	sub.stop(t)
}

func testSubscribeAfterPosition(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("collection")
	e := events(6, "step")
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), e[:3]...)
	mustAppend(t, ctx, s, NewStream("user"), eventstore.NoStream(), e[3])
	all := mustReadAll(t, ctx, s, 0, 0)

	sub := subscribe(t, ctx, s, all[1].Position)
	got := sub.expect(t, "catch-up after the second event", e[2], e[3])
	mustAppend(t, ctx, s, stream, eventstore.Exact(2), e[4], e[5])
	got = append(got, sub.expectOnly(t, ctx, s, "live", e[4], e[5])...)
	wantSameAsStored(t, ctx, s, all[1].Position, got)
	sub.stop(t)

	// From the last position there is nothing to catch up on.
	last := mustReadAll(t, ctx, s, 0, 0)
	tail := subscribe(t, ctx, s, last[len(last)-1].Position)
	live := NewEvent("live", nil)
	mustAppend(t, ctx, s, stream, eventstore.Exact(4), live)
	tail.expectOnly(t, ctx, s, "subscription from the last position", live)
	tail.stop(t)
}

func testSubscribeManyEvents(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	const batches, perBatch = 12, 100
	streams := []string{NewStream("collection"), NewStream("consent"), NewStream("user")}
	var all []eventschema.Envelope
	next := map[string]eventstore.ExpectedRevision{}
	for i := range batches {
		stream := streams[i%len(streams)]
		batch := events(perBatch, "bulk")
		exp, ok := next[stream]
		if !ok {
			exp = eventstore.NoStream()
		}
		res := mustAppend(t, ctx, s, stream, exp, batch...)
		next[stream] = eventstore.Exact(res.NextExpectedRevision)
		all = append(all, batch...)
	}
	sub := subscribe(t, ctx, s, 0)
	got := sub.expect(t, "catch-up over many events", all...)
	wantIncreasingPositions(t, "catch-up over many events", got)
	live := NewEvent("live", nil)
	mustAppend(t, ctx, s, streams[0], next[streams[0]], live)
	got = append(got, sub.expectOnly(t, ctx, s, "live after a long catch-up", live)...)
	wantSameAsStored(t, ctx, s, 0, got)
	sub.stop(t)

	middle := got[perBatch*batches/2-1].Position
	mid := subscribe(t, ctx, s, middle)
	mid.expect(t, "catch-up from the middle", all[perBatch*batches/2:]...)
	mid.stop(t)
}

func testSubscribeDuringConcurrentAppends(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	mustAppend(t, ctx, s, NewStream("collection"), eventstore.NoStream(), events(3, "before")...)
	sub := subscribe(t, ctx, s, 0)

	const writers, appends = 4, 15
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 3
	for w := range writers {
		wg.Go(func() {
			stream := NewStream("collection")
			expected := eventstore.NoStream()
			for i := range appends {
				batch := events(1+i%2, "during")
				res, err := s.Append(ctx, stream, expected, batch)
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				mu.Lock()
				total += len(batch)
				mu.Unlock()
				expected = eventstore.Exact(res.NextExpectedRevision)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	want := mustReadAll(t, ctx, s, 0, 0)
	if len(want) != total {
		t.Fatalf("read all: %d events, appended %d", len(want), total)
	}
	got := sub.expectOnly(t, ctx, s, "delivered during concurrent appends", want...)
	wantSameAsStored(t, ctx, s, 0, got)
	sub.stop(t)
}

func testSubscribeHandlerError(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	boom := errors.New("handler failed")
	stream := NewStream("collection")
	e := events(4, "step")
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), e[0], e[1])

	// The handler fails during catch-up.
	var calls []string
	done := make(chan error, 1)
	go func() {
		done <- s.SubscribeAll(ctx, 0, func(_ context.Context, ev eventschema.Envelope) error {
			calls = append(calls, ev.EventID)
			if len(calls) == 2 {
				return boom
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("subscription returned %v, want the handler's error", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("subscription did not return within %s of the handler failing", waitTimeout)
	}
	if want := []string{e[0].EventID, e[1].EventID}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("handler called with %v, want %v", calls, want)
	}

	// The handler fails on a live event.
	seen := make(chan string, 10)
	go func() {
		done <- s.SubscribeAll(ctx, 0, func(_ context.Context, ev eventschema.Envelope) error {
			seen <- ev.EventID
			if ev.EventID == e[2].EventID {
				return boom
			}
			return nil
		})
	}()
	for range 2 {
		select {
		case <-seen:
		case <-time.After(waitTimeout):
			t.Fatalf("catch-up event not delivered within %s", waitTimeout)
		}
	}
	mustAppend(t, ctx, s, stream, eventstore.Exact(1), e[2], e[3])
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("subscription returned %v, want the handler's error", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("subscription did not return within %s of the handler failing", waitTimeout)
	}
	close(seen)
	var after []string
	for id := range seen {
		after = append(after, id)
	}
	if want := []string{e[2].EventID}; !reflect.DeepEqual(after, want) {
		t.Fatalf("handler called after catch-up with %v, want only %v", after, want)
	}
}

func testSubscribeContextEnds(t *testing.T, s eventstore.Store) {
	ctx := testContext(t)
	stream := NewStream("collection")
	e := NewEvent("step", nil)
	mustAppend(t, ctx, s, stream, eventstore.NoStream(), e)

	// Cancelled while waiting for live events.
	sub := subscribe(t, ctx, s, 0)
	sub.expect(t, "catch-up", e)
	sub.stop(t)

	// Cancelled before it starts.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := runSubscription(t, s, cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("subscription with a cancelled context returned %v, want context.Canceled", err)
	}

	// A deadline ends it too.
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if err := runSubscription(t, s, short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("subscription past its deadline returned %v, want context.DeadlineExceeded", err)
	}
}

func runSubscription(t *testing.T, s eventstore.Store, ctx context.Context) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- s.SubscribeAll(ctx, 0, func(context.Context, eventschema.Envelope) error { return nil })
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("subscription did not return within %s of its context ending", waitTimeout)
		return nil
	}
}
