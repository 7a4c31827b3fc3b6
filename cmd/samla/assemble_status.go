// The status poll: the in-memory status view in front of its read model, and read-your-writes
// from the event store.

package main

import (
	"context"
	"errors"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/collectionstatus"
)

// useStatusView puts the in-memory status view in front of the status read model, so that the
// poll reads memory, when this process writes every status change itself: it runs the query
// role and the collection-status projection against the embedded broker, where its consumer is
// the group's only member and sees every partition. (A projection replica among several sees
// only its partitions: its view would miss the others' changes.)
func (s *Service) useStatusView() {
	if !s.roles.Query || !s.roles.Project || len(s.cfg.Brokers()) > 0 || s.cfg.StatusViewRows <= 0 {
		return
	}
	view := collectionstatus.NewView(s.cfg.StatusViewRows)
	view.OnEvict(s.metrics.StatusViewEvictions.Inc)
	s.metrics.StatusViewRows(view.Len)
	s.models.Status = collectionstatus.Cached(s.models.Status, view)
}

// statusReader reads the status read model (through the view when there is one) and, when this
// process has the event store, folds a collection the read model does not show yet from its
// events: a poll right after the 201 sees the collection.
func (s *Service) statusReader() collectionstatus.Reader {
	r := collectionstatus.NewReader(s.models.Status, s.keys)
	if s.store == nil {
		return r
	}
	return r.WithEventStore(s.registry, func(ctx context.Context, id string) ([]eventschema.Envelope, error) {
		events, err := s.store.ReadStream(ctx, collection.StreamName(id), 0, 0)
		switch {
		case errors.Is(err, eventstore.ErrStreamNotFound):
			s.metrics.StatusReadFallbacks.WithLabelValues("absent").Inc()
			return nil, nil
		case err != nil:
			return nil, err
		}
		s.metrics.StatusReadFallbacks.WithLabelValues("found").Inc()
		return events, nil
	})
}
