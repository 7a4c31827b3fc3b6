// Package domaintest runs given-events / when-command / then-events-or-error scenarios against
// aggregates, so that domain rules are tested as the facts they produce.
package domaintest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/samla/samla/domain"
)

// Scenario is one given/when/then case for an aggregate of type A.
type Scenario[A any] struct {
	t         *testing.T
	rehydrate func([]domain.Event) (A, error)
	given     []domain.Event
	when      func(A) ([]domain.Event, error)
}

// For starts a scenario for the aggregate that rehydrate rebuilds.
func For[A any](t *testing.T, rehydrate func([]domain.Event) (A, error)) *Scenario[A] {
	t.Helper()
	return &Scenario[A]{t: t, rehydrate: rehydrate}
}

// Given sets the events already stored.
func (s *Scenario[A]) Given(events ...domain.Event) *Scenario[A] {
	s.given = events
	return s
}

// When sets the command.
func (s *Scenario[A]) When(cmd func(A) ([]domain.Event, error)) *Scenario[A] {
	s.when = cmd
	return s
}

func (s *Scenario[A]) run() ([]domain.Event, error) {
	s.t.Helper()
	agg, err := s.rehydrate(s.given)
	if err != nil {
		s.t.Fatalf("given events do not rehydrate: %v", err)
	}
	return s.when(agg)
}

// Then asserts the command succeeds and decides exactly these events.
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

// ThenError asserts the command fails with an error that matches target (errors.Is) and decides
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
		s.t.Fatalf("a failed command decided events: %v", got)
	}
}
