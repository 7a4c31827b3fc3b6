package kafka

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A follower that loses its generation (here: the coordinator answers one heartbeat with
// REBALANCE_IN_PROGRESS, as after a coordinator move or a session hiccup) rejoins at the end of
// every partition, because it never committed: what was published while it rejoined is
// skipped, and OnRejoin is how it learns that it may have been (found in review).
func TestConsumeFollowerLearnsOfRejoins(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	publish(t, e.Conn(), toKafka(t, envelope("collection-f", 0, 1)))
	var rejoins atomic.Int64
	f := consumeWith(t, ConsumerConfig{Kafka: e.Conn(), GroupID: "follower-rejoin", Follow: true,
		OnRejoin: func() { rejoins.Add(1) }}, nil)
	next := untilFollowing(t, e, f, "collection-f", 1)
	var hold atomic.Bool
	hold.Store(true)
	var kicked atomic.Bool
	e.cluster.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		if kicked.Load() {
			return nil, nil, false
		}
		kicked.Store(true)
		r := req.(*kmsg.HeartbeatRequest)
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp, nil, true
	})
	e.cluster.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		if !hold.Load() || !kicked.Load() {
			return nil, nil, false
		}
		r := req.(*kmsg.JoinGroupRequest)
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	for !kicked.Load() {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	missed := []uint64{}
	for i := 0; i < 3; i++ {
		next++
		publish(t, e.Conn(), toKafka(t, envelope("collection-f", next, next+1)))
		missed = append(missed, next)
	}
	time.Sleep(1500 * time.Millisecond)
	hold.Store(false)
	// After the rejoin, publish until the follower gets something new.
	var last uint64
	for deadline := time.Now().Add(20 * time.Second); ; {
		next++
		publish(t, e.Conn(), toKafka(t, envelope("collection-f", next, next+1)))
		f.mu.Lock()
		h := f.handled()
		f.mu.Unlock()
		if len(h) > 0 && h[len(h)-1].Revision > missed[len(missed)-1] {
			last = h[len(h)-1].Revision
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("follower never came back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.stop(t)
	if n := rejoins.Load(); n < 2 {
		t.Fatalf("OnRejoin called %d times, want the first join and the rejoin", n)
	}
	seen := map[uint64]bool{}
	for _, ev := range f.handled() {
		seen[ev.Revision] = true
	}
	skipped := 0
	for _, r := range missed {
		if !seen[r] {
			skipped++
		}
	}
	t.Logf("the follower skipped %d of the %d events published while it rejoined (it resumed at %d); OnRejoin told it", skipped, len(missed), last)
}
