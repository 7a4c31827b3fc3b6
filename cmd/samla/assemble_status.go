// The status poll: the in-memory status view in front of its read model, and read-your-writes
// from the event store.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/kafka"
	"github.com/samla/samla/projections"
	"github.com/samla/samla/projections/collectionstatus"
)

// useStatusView puts the in-memory status view in front of the status read model, so that the
// poll reads memory. A process that writes every status change itself (the query role and the
// collection-status projection against the embedded broker, where its consumer is the group's
// only member and sees every partition) writes through it. Any other query process keeps it
// within the follower's bounds (Followed), and against a Kafka cluster follows the event stream
// into it (startStatusView): a projection replica among several sees only its partitions, and
// a query replica none.
func (s *Service) useStatusView() {
	if !s.roles.Query || s.cfg.StatusViewRows <= 0 {
		return
	}
	view := collectionstatus.NewView(s.cfg.StatusViewRows)
	view.OnEvict(s.metrics.StatusViewEvictions.Inc)
	s.metrics.StatusViewRows(view.Len)
	s.statusView = view
	if s.roles.Project && len(s.cfg.Brokers()) == 0 {
		s.models.Status = collectionstatus.Cached(s.models.Status, view)
		return
	}
	s.models.Status = collectionstatus.Followed(s.models.Status, view, collectionstatus.DefaultFollowFreshness, collectionstatus.DefaultFollowMaxAge)
	if followsStatus(s.cfg, s.roles) {
		s.statusFollower = collectionstatus.NewFollower(s.registry, view, s.keys)
		s.statusFollower.OnDrop(func(reason string) { s.metrics.StatusFollowerDrops.WithLabelValues(reason).Inc() })
	}
}

// followsStatus tells whether this process follows the event stream into its status view: a
// query process against a Kafka cluster that does not write the status read model itself. A
// query process without a cluster (beside a `samla run`, whose embedded broker it cannot share)
// keeps a view that reads every row again within the follower's bounds instead.
func followsStatus(cfg *Config, roles Roles) bool {
	return roles.Query && cfg.StatusViewRows > 0 && len(cfg.Brokers()) > 0
}

// startStatusView sweeps the rows nobody polled for SAMLA_STATUS_VIEW_IDLE out of the status
// view, so that it shrinks back after a burst, and runs the view's follower, if it has one: a
// consumer of its own group, unique to this process, that starts at the end of the stream and
// commits nothing.
func (s *Service) startStatusView(ctx context.Context) {
	if s.statusView == nil {
		return
	}
	idle := s.cfg.StatusViewIdle
	s.runRole(ctx, "status view sweep", every(max(idle/4, time.Second), func() { s.statusView.Sweep(idle) }))
	if s.statusFollower == nil {
		return
	}
	host, _ := os.Hostname()
	group := fmt.Sprintf("samla.status-view.%s.%d.%d", host, os.Getpid(), time.Now().UnixNano())
	consume := s.consumeWith(kafka.ConsumerConfig{GroupID: group, Topics: projections.Topics(s.statusFollower),
		Follow: true, OnRejoin: s.statusFollower.Rejoined})
	s.runRole(ctx, "status view", func(ctx context.Context) error {
		return projections.Run(ctx, s.statusFollower, consume, s.metrics)
	})
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
