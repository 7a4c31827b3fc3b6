// Package domaintest runs given-events / when-command / then-events-or-error scenarios against
// aggregates, so that domain rules are tested as the facts they record.
package domaintest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/samla/samla/domain"
)

// Scenario is one given/when/then case for an aggregate of type A.
type Scenario[A domain.Aggregate] struct {
	t     *testing.T
	kind  domain.Kind[A]
	given []domain.Event
	when  func(A) error
}

// For starts a scenario for the aggregates of kind.
func For[A domain.Aggregate](t *testing.T, kind domain.Kind[A]) *Scenario[A] {
	t.Helper()
	return &Scenario[A]{t: t, kind: kind}
}

// Given sets the events already stored.
func (s *Scenario[A]) Given(events ...domain.Event) *Scenario[A] {
	s.given = events
	return s
}

// When sets the command: a call of one of the aggregate's command methods.
func (s *Scenario[A]) When(cmd func(A) error) *Scenario[A] {
	s.when = cmd
	return s
}

// run folds the given events into a new aggregate, runs the command on it and returns what the
// command recorded.
func (s *Scenario[A]) run() ([]domain.Event, error) {
	s.t.Helper()
	agg := s.kind.New()
	if err := domain.Rehydrate(agg, s.given...); err != nil {
		s.t.Fatalf("given events do not rehydrate: %v", err)
	}
	err := s.when(agg)
	recorded := agg.Recorded()
	if agg.Version() != len(s.given)+len(recorded) || agg.StoredVersion() != len(s.given) {
		s.t.Fatalf("version %d (stored %d) after %d given and %d recorded events", agg.Version(), agg.StoredVersion(), len(s.given), len(recorded))
	}
	return recorded, err
}

// Then asserts the command succeeds and records exactly these events (none when want is empty).
func (s *Scenario[A]) Then(want ...domain.Event) {
	s.t.Helper()
	got, err := s.run()
	if err != nil {
		s.t.Fatalf("command failed: %v; want events %v", err, want)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		s.t.Fatalf("events differ\n got: %#v\nwant: %#v", got, want)
	}
}

// ThenError asserts the command fails with an error that matches target (errors.Is) and records
// nothing.
func (s *Scenario[A]) ThenError(target error) {
	s.t.Helper()
	got, err := s.run()
	if err == nil {
		s.t.Fatalf("command succeeded with %v; want error %v", got, target)
	}
	if !errors.Is(err, target) {
		s.t.Fatalf("error %v does not match %v", err, target)
	}
	if len(got) != 0 {
		s.t.Fatalf("a failed command recorded events: %v", got)
	}
}

// ThenFieldError asserts the command fails with a *domain.FieldError (alone or in a
// *domain.InvalidFieldsError) naming field, and records nothing.
func (s *Scenario[A]) ThenFieldError(field string) {
	s.t.Helper()
	got, err := s.run()
	if err == nil {
		s.t.Fatalf("command succeeded with %v; want a field error at %s", got, field)
	}
	fields := domain.FieldErrors(err)
	found := false
	for _, f := range fields {
		found = found || f.Field == field
	}
	if !found || !errors.Is(err, domain.ErrInvalid) {
		s.t.Fatalf("error %v names fields %v, want %s", err, fields, field)
	}
	if len(got) != 0 {
		s.t.Fatalf("a failed command recorded events: %v", got)
	}
}
