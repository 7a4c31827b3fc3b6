// Package eventlog builds the envelopes the projections' tests feed their projectors, the way
// the event store would assign them: real payloads encoded by the schema registry, per-stream
// revisions from 0 and a global position that grows across streams.
package eventlog

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/eventschema"
)

// Log is an in-memory event log for tests.
type Log struct {
	t         testing.TB
	reg       *eventschema.Registry
	position  uint64
	revisions map[string]uint64
	all       []eventschema.Envelope
}

// New returns an empty log using a fresh registry.
func New(t testing.TB) *Log {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatalf("new registry: %v", err)
	}
	return &Log{t: t, reg: reg, revisions: map[string]uint64{}}
}

// Registry is the registry the log encodes with.
func (l *Log) Registry() *eventschema.Registry { return l.reg }

// Append encodes ev through the registry (validating it against its schema) and returns its
// envelope at the next revision of stream.
func (l *Log) Append(tenant, stream string, at time.Time, ev domain.Event) eventschema.Envelope {
	l.t.Helper()
	typ, version, payload, err := l.reg.Encode(ev)
	if err != nil {
		l.t.Fatalf("encode %s: %v", ev.EventType(), err)
	}
	rev, ok := l.revisions[stream]
	if ok {
		rev++
	}
	l.revisions[stream] = rev
	l.position++
	env := eventschema.Envelope{
		EventID: newID(l.t), Type: typ, SchemaVersion: version, Tenant: tenant, Stream: stream,
		Revision: rev, Position: l.position, OccurredAt: at.UTC().Truncate(time.Millisecond),
		CorrelationID: "corr-" + stream, CausationID: fmt.Sprintf("cause-%d", l.position),
		Actor: "client:" + tenant, Payload: payload,
	}
	l.all = append(l.all, env)
	return env
}

// AppendRaw stores an envelope as given (for payloads no current writer produces, such as old
// schema versions), assigning its revision and position.
func (l *Log) AppendRaw(env eventschema.Envelope) eventschema.Envelope {
	rev, ok := l.revisions[env.Stream]
	if ok {
		rev++
	}
	l.revisions[env.Stream] = rev
	l.position++
	env.Revision, env.Position = rev, l.position
	if env.EventID == "" {
		env.EventID = newID(l.t)
	}
	l.all = append(l.all, env)
	return env
}

// All returns every envelope appended so far, in position order.
func (l *Log) All() []eventschema.Envelope { return append([]eventschema.Envelope(nil), l.all...) }

// ReadAll serves the log like the event store's ReadAll, for rebuild tests.
func (l *Log) ReadAll(_ context.Context, after uint64, limit int) ([]eventschema.Envelope, error) {
	var out []eventschema.Envelope
	for _, e := range l.all {
		if e.Position > after {
			out = append(out, e)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

func newID(t testing.TB) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random id: %v", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
