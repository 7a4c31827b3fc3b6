package domain

import (
	"errors"
	"slices"
)

// Root is the part every event-sourced aggregate shares: how many events it has folded, and the
// events its commands recorded since it was loaded, which are not stored yet. An aggregate embeds
// it and implements Apply, its one fold; its command methods decide and then call Record, so that
// state changes only through events and the aggregate applies its own.
type Root struct {
	version  int
	recorded []Event
}

// Version is the number of events folded into the aggregate, stored and recorded alike; 0 means
// it has none. The store's expected revision for appending the recorded events follows from
// StoredVersion.
func (r *Root) Version() int { return r.version }

// StoredVersion is the number of stored events folded: the version the aggregate was loaded at.
func (r *Root) StoredVersion() int { return r.version - len(r.recorded) }

// Recorded returns the events recorded since the aggregate was loaded, in order, not yet stored.
func (r *Root) Recorded() []Event { return slices.Clone(r.recorded) }

func (r *Root) root() *Root { return r }

// Aggregate is an event-sourced aggregate: a type that embeds Root (which alone provides the
// unexported method, so no other type satisfies it) and folds events with Apply.
type Aggregate interface {
	// Apply folds one event into the aggregate's state. It decides nothing (the rules ran when
	// the event was recorded); it refuses only events that cannot belong to the aggregate. Only
	// Record and Rehydrate call it: they count the version.
	Apply(Event) error
	Version() int
	StoredVersion() int
	Recorded() []Event
	root() *Root
}

// Record applies events a command decided and keeps them as recorded, to be stored. Command
// methods call it once they have decided the whole of their outcome, so that a refused command
// records nothing.
func Record(a Aggregate, events ...Event) error {
	r := a.root()
	for _, e := range events {
		if err := a.Apply(e); err != nil {
			return err
		}
		r.version++
		r.recorded = append(r.recorded, e)
	}
	return nil
}

// Rehydrate folds stored events into an aggregate; they count in its version but are not
// recorded.
func Rehydrate(a Aggregate, events ...Event) error {
	r := a.root()
	if len(r.recorded) > 0 {
		// Stored events after recorded ones would put the recorded events at the wrong revision.
		return errors.New("rehydrate an aggregate that has recorded events")
	}
	for _, e := range events {
		if err := a.Apply(e); err != nil {
			return err
		}
		r.version++
	}
	return nil
}

// MarkStored tells the aggregate that its recorded events were stored: they stay folded and
// counted in its version, and are no longer recorded.
func MarkStored(a Aggregate) { a.root().recorded = nil }

// Kind describes one type of aggregate to the code that stores it: the event-store category of
// its streams and how to make an empty one, on which the stored events are folded. Each
// aggregate package declares its Kind, so a repository serves every aggregate the same way.
type Kind[A Aggregate] struct {
	// StreamPrefix is the category: a stream is StreamPrefix + id.
	StreamPrefix string
	// New makes an aggregate with no events.
	New func() A
}

// Stream names the stream of the aggregate with this id.
func (k Kind[A]) Stream(id string) string { return k.StreamPrefix + id }
