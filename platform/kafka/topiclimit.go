package kafka

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Bounds on the partitions clients may create on the embedded broker. The service's own topics
// are made by StartEmbedded inside the process; over the protocol only EnsureTopics (a test, or
// a second process pointed at this broker with SAMLA_KAFKA_BROKERS) and outside tools create
// any. kfake creates whatever it is asked: one CreateTopics of 2,000,000 partitions took 770 MB
// that were never freed, a directory per partition on disk, and a shutdown of minutes.
const (
	// maxTopicPartitions is the most partitions one topic may have.
	maxTopicPartitions = 64
	// maxCreatedPartitions is the most partitions requests may add while the broker runs.
	maxCreatedPartitions = 4096
)

// topicLimits refuses CreateTopics and CreatePartitions requests past those bounds with
// POLICY_VIOLATION, as a real broker's create.topic.policy would, and lets kfake handle the
// others. A topic whose partition count is left to the broker gets DefaultNumPartitions.
type topicLimits struct {
	cluster          *kfake.Cluster
	defaultPartition int32
	mu               sync.Mutex
	created          int // partitions allowed so far
}

func installTopicLimits(c *kfake.Cluster, defaultPartitions int) {
	l := &topicLimits{cluster: c, defaultPartition: int32(defaultPartitions)}
	l.control(kmsg.CreateTopics.Int16(), l.createTopics)
	l.control(kmsg.CreatePartitions.Int16(), l.createPartitions)
}

// control has fn see every request of key. kfake remembers, for each control function, the last
// request of every connection it ran on (so as not to run it twice on one request) and never
// forgets them: a control function kept for the broker's life (KeepControl) held on to every
// CreateTopics of every connection that ever sent one, closed or not (40 connections that each
// sent one of 1 MiB: 40 MiB for good). So each run drops its own control function and installs
// a fresh one in its place, which kfake allows within a control function; the fresh one does
// not run on the request at hand, and the dropped one's memory goes with it.
func (l *topicLimits) control(key int16, fn func(kmsg.Request) (kmsg.Response, error, bool)) {
	var run func(kmsg.Request) (kmsg.Response, error, bool)
	run = func(req kmsg.Request) (kmsg.Response, error, bool) {
		l.cluster.DropControl()
		l.cluster.ControlKey(key, run)
		return fn(req)
	}
	l.cluster.ControlKey(key, run)
}

// take reserves the partitions of perTopic, which a request would create, if every topic stays
// within maxTopicPartitions (perTopic holds each topic's resulting count, adds what it would
// add) and the total within maxCreatedPartitions; else it says why not. Nothing is reserved
// when reserve is false (a validate-only request), though the bounds are still checked.
func (l *topicLimits) take(perTopic, adds []int32, reserve bool) string {
	n := 0
	for i, p := range perTopic {
		if p > maxTopicPartitions {
			return fmt.Sprintf("the embedded broker allows at most %d partitions a topic, not %d", maxTopicPartitions, p)
		}
		n += int(max(adds[i], 0))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.created+n > maxCreatedPartitions {
		return fmt.Sprintf("the embedded broker allows at most %d partitions to be created while it runs", maxCreatedPartitions)
	}
	if reserve {
		l.created += n
	}
	return ""
}

// uniqueTopics reports whether a request's topics have distinct names: kfake refuses a
// request that names a topic twice, and creates nothing for it.
func uniqueTopics[T any](topics []T, name func(T) string) bool {
	seen := make(map[string]struct{}, len(topics))
	for _, t := range topics {
		if _, ok := seen[name(t)]; ok {
			return false
		}
		seen[name(t)] = struct{}{}
	}
	return true
}

// The control functions below ask the cluster about existing topics (TopicInfo,
// PartitionInfos): kfake runs a control function in a goroutine of its own while its loop
// keeps serving such admin calls, so that cannot deadlock. Only what kfake would create is
// counted: a topic that exists (TOPIC_ALREADY_EXISTS, which EnsureTopics of another process
// gets at every start) or a request kfake refuses creates nothing, as a real broker, whose
// policy sees only topics that do not exist yet.

func (l *topicLimits) createTopics(req kmsg.Request) (kmsg.Response, error, bool) {
	r := req.(*kmsg.CreateTopicsRequest)
	if !uniqueTopics(r.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic }) {
		return nil, nil, false // kfake refuses the whole request
	}
	exists := make([]bool, len(r.Topics))
	counts := make([]int32, 0, len(r.Topics))
	for i, t := range r.Topics {
		if l.cluster.TopicInfo(t.Topic) != nil {
			exists[i] = true // kfake answers TOPIC_ALREADY_EXISTS
			continue
		}
		switch {
		case len(t.ReplicaAssignment) > 0:
			counts = append(counts, int32(min(len(t.ReplicaAssignment), 1<<30)))
		case t.NumPartitions == 0 || t.ReplicationFactor > 1:
			// kfake refuses it (INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR on one broker)
		case t.NumPartitions < 0:
			counts = append(counts, l.defaultPartition)
		default:
			counts = append(counts, t.NumPartitions)
		}
	}
	why := l.take(counts, counts, !r.ValidateOnly)
	if why == "" {
		return nil, nil, false // within bounds: kfake creates them
	}
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	exist := "the topic already exists"
	for i, t := range r.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.PolicyViolation.Code, &why
		if exists[i] {
			rt.ErrorCode, rt.ErrorMessage = kerr.TopicAlreadyExists.Code, &exist
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, true
}

func (l *topicLimits) createPartitions(req kmsg.Request) (kmsg.Response, error, bool) {
	r := req.(*kmsg.CreatePartitionsRequest)
	if !uniqueTopics(r.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic }) {
		return nil, nil, false
	}
	// Count is the topic's new total: what it adds is Count less the partitions it has. An
	// unknown topic or a Count not above them adds nothing (kfake refuses it).
	counts := make([]int32, 0, len(r.Topics))
	adds := make([]int32, 0, len(r.Topics))
	for _, t := range r.Topics {
		have := int32(len(l.cluster.PartitionInfos(t.Topic)))
		if have == 0 || t.Count <= have {
			continue
		}
		counts = append(counts, t.Count)
		adds = append(adds, t.Count-have)
	}
	why := l.take(counts, adds, !r.ValidateOnly)
	if why == "" {
		return nil, nil, false
	}
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.PolicyViolation.Code, &why
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, true
}
