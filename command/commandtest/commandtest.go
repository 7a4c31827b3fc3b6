// Package commandtest runs given/when/then scenarios at the command level, over the in-memory
// event store: given events on streams, when a command on an application service, then the
// events the command appended (or an error and nothing appended). It is domaintest one layer
// up: domaintest checks what an aggregate decides, commandtest what a service stores, through
// the repository, the registry and the envelopes.
//
//	sc := commandtest.New(t, now)
//	svc := app.NewCollectionService(catalog, commandtest.Repository(sc, collection.Kind),
//		commandtest.Repository(sc, user.Kind), sc.Clock())
//	sc.Given(collection.StreamName(id), started, claimed).
//		When(func(ctx context.Context) error { _, err := svc.SupplyInfo(ctx, cmd); return err }).
//		Then(collection.InputSupplied{…})
package commandtest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/eventschema"
)

// Scenario is one command-level case. Given stores at once, so that a test may build its
// service on Store after Given; the command runs in Then or ThenError.
type Scenario struct {
	t        *testing.T
	store    *memstore.Store
	registry *eventschema.Registry
	now      time.Time
	when     func(context.Context) error
}

// New starts a scenario over an empty in-memory store whose clock stands at now.
func New(t *testing.T, now time.Time) *Scenario {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return &Scenario{t: t, store: memstore.New(), registry: reg, now: now}
}

// Store is the scenario's event store.
func (s *Scenario) Store() *memstore.Store { return s.store }

// Clock is the scenario's clock: it always says the now given to New.
func (s *Scenario) Clock() func() time.Time { return func() time.Time { return s.now } }

// Repository is a repository of kind over the scenario's store and clock.
func Repository[A domain.Aggregate](s *Scenario, kind domain.Kind[A], opts ...repository.Option) *repository.Repository[A] {
	return repository.New(s.store, s.registry, kind, append([]repository.Option{repository.WithClock(s.Clock())}, opts...)...)
}

// Given appends events to stream, as whichever writer stored them earlier.
func (s *Scenario) Given(stream string, events ...domain.Event) *Scenario {
	s.t.Helper()
	envs := make([]eventschema.Envelope, len(events))
	for i, e := range events {
		typ, version, payload, err := s.registry.Encode(e)
		if err != nil {
			s.t.Fatalf("given %s: %v", e.EventType(), err)
		}
		envs[i] = eventschema.Envelope{EventID: uuid.NewString(), Type: typ, SchemaVersion: version,
			OccurredAt: s.now, Actor: "given", Payload: payload}
	}
	if _, err := s.store.Append(context.Background(), stream, eventstore.Any(), envs); err != nil {
		s.t.Fatalf("given %s: %v", stream, err)
	}
	return s
}

// When sets the command: typically a call of an application service built on Store.
func (s *Scenario) When(cmd func(ctx context.Context) error) *Scenario {
	s.when = cmd
	return s
}

// run runs the command and returns the envelopes it appended, in commit order.
func (s *Scenario) run() ([]eventschema.Envelope, error) {
	s.t.Helper()
	if s.when == nil {
		s.t.Fatal("commandtest: Then without When")
	}
	ctx := context.Background()
	before, err := s.store.ReadAll(ctx, 0, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	var after uint64
	if len(before) > 0 {
		after = before[len(before)-1].Position
	}
	cmdErr := s.when(ctx)
	appended, err := s.store.ReadAll(ctx, after, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	return appended, cmdErr
}

// Then asserts the command succeeds and appends exactly these events, in order, to whichever
// streams; it returns their envelopes for checks of streams and metadata.
func (s *Scenario) Then(want ...domain.Event) []eventschema.Envelope {
	s.t.Helper()
	envs, err := s.run()
	if err != nil {
		s.t.Fatalf("command failed: %v; want events %v", err, want)
	}
	got, err := s.registry.DecodeAll(envs)
	if err != nil {
		s.t.Fatalf("appended events do not decode: %v", err)
	}
	if len(got) == 0 && len(want) == 0 {
		return envs
	}
	if !reflect.DeepEqual(got, want) {
		s.t.Fatalf("appended events differ\n got: %#v\nwant: %#v", got, want)
	}
	return envs
}

// ThenError asserts the command fails with an error that matches target (errors.Is) and
// appends nothing.
func (s *Scenario) ThenError(target error) error {
	s.t.Helper()
	envs, err := s.run()
	if err == nil {
		s.t.Fatalf("command succeeded and appended %d events; want error %v", len(envs), target)
	}
	if !errors.Is(err, target) {
		s.t.Fatalf("error %v does not match %v", err, target)
	}
	if len(envs) != 0 {
		s.t.Fatalf("a failed command appended %d events", len(envs))
	}
	return err
}
