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
	c.ControlKey(kmsg.CreateTopics.Int16(), l.createTopics)
	c.ControlKey(kmsg.CreatePartitions.Int16(), l.createPartitions)
}

// take reserves n more partitions if every topic stays within maxTopicPartitions (perTopic) and
// the total within maxCreatedPartitions; else it says why not.
func (l *topicLimits) take(perTopic []int32) string {
	n := 0
	for _, p := range perTopic {
		if p > maxTopicPartitions {
			return fmt.Sprintf("the embedded broker allows at most %d partitions a topic, not %d", maxTopicPartitions, p)
		}
		n += int(max(p, 0))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.created+n > maxCreatedPartitions {
		return fmt.Sprintf("the embedded broker allows at most %d partitions to be created while it runs", maxCreatedPartitions)
	}
	l.created += n
	return ""
}

func (l *topicLimits) createTopics(req kmsg.Request) (kmsg.Response, error, bool) {
	l.cluster.KeepControl()
	r := req.(*kmsg.CreateTopicsRequest)
	counts := make([]int32, 0, len(r.Topics))
	for _, t := range r.Topics {
		switch {
		case len(t.ReplicaAssignment) > 0:
			counts = append(counts, int32(min(len(t.ReplicaAssignment), 1<<30)))
		case t.NumPartitions <= 0:
			counts = append(counts, l.defaultPartition)
		default:
			counts = append(counts, t.NumPartitions)
		}
	}
	why := l.take(counts)
	if why == "" {
		return nil, nil, false // within bounds: kfake creates them
	}
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.PolicyViolation.Code, &why
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil, true
}

func (l *topicLimits) createPartitions(req kmsg.Request) (kmsg.Response, error, bool) {
	l.cluster.KeepControl()
	r := req.(*kmsg.CreatePartitionsRequest)
	// Count is the topic's new total; what it adds is not known here without asking the
	// cluster, so the whole count is reserved (an overestimate, never an underestimate).
	counts := make([]int32, 0, len(r.Topics))
	for _, t := range r.Topics {
		counts = append(counts, t.Count)
	}
	why := l.take(counts)
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
