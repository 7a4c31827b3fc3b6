package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samla/samla/eventschema"
)

// TestEmbeddedBoundsCreatedPartitions: a topic of more than maxTopicPartitions, or requests
// adding more than maxCreatedPartitions in all, are refused with POLICY_VIOLATION and create
// nothing; requests within the bounds still create their topics; asking for an unknown topic's
// metadata creates none.
func TestEmbeddedBoundsCreatedPartitions(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := &kafkago.Client{Addr: kafkago.TCP(e.Brokers()...), Timeout: 10 * time.Second, Transport: e.Conn().transport()}
	create := func(name string, partitions int) error {
		t.Helper()
		resp, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{
			{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}}})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return resp.Errors[name]
	}

	if err := create("too-wide", 2_000_000); !errors.Is(err, kafkago.PolicyViolation) {
		t.Fatalf("a topic of 2,000,000 partitions: %v, want POLICY_VIOLATION", err)
	}
	if e.cluster.TopicInfo("too-wide") != nil {
		t.Fatal("the refused topic was created")
	}
	if err := create("within", maxTopicPartitions); err != nil {
		t.Fatalf("a topic of %d partitions: %v", maxTopicPartitions, err)
	}
	if n := len(e.cluster.PartitionInfos("within")); n != maxTopicPartitions {
		t.Fatalf("%d partitions, want %d", n, maxTopicPartitions)
	}
	// Up to the total: (maxCreatedPartitions / maxTopicPartitions) topics in all, then refusals.
	for i := 1; i < maxCreatedPartitions/maxTopicPartitions; i++ {
		if err := create("filler-"+string(rune('a'+i%26))+string(rune('a'+i/26)), maxTopicPartitions); err != nil {
			t.Fatalf("topic %d within the total: %v", i+1, err)
		}
	}
	if err := create("one-too-many", 1); !errors.Is(err, kafkago.PolicyViolation) {
		t.Fatalf("a partition past the total: %v, want POLICY_VIOLATION", err)
	}
	if _, err := client.CreatePartitions(ctx, &kafkago.CreatePartitionsRequest{Topics: []kafkago.TopicPartitionsConfig{
		{Name: "within", Count: maxTopicPartitions + 1}}}); err != nil {
		t.Fatalf("create partitions: %v", err)
	}
	if n := len(e.cluster.PartitionInfos("within")); n != maxTopicPartitions {
		t.Fatalf("a refused CreatePartitions left %d partitions, want %d", n, maxTopicPartitions)
	}

	if _, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{"never-created"}}); err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if e.cluster.TopicInfo("never-created") != nil {
		t.Fatal("a metadata request created a topic")
	}
}

// TestEmbeddedLimitsCountOnlyWhatIsCreated: asking again for topics that exist (EnsureTopics of
// a second process at each start, pointed at this broker with SAMLA_KAFKA_BROKERS) creates
// nothing and must neither use up the total nor be refused for a partition count the existing
// topic never gets; a CreatePartitions reserves the partitions it adds, not the topic's new
// total.
func TestEmbeddedLimitsCountOnlyWhatIsCreated(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The service's topics exist; EnsureTopics answers TOPIC_ALREADY_EXISTS, whatever count.
	if err := EnsureTopics(ctx, e.Conn(), eventschema.Topics(), maxTopicPartitions+1); err != nil {
		t.Fatalf("EnsureTopics of existing topics with %d partitions: %v", maxTopicPartitions+1, err)
	}
	n := maxCreatedPartitions/(len(eventschema.Topics())*DefaultPartitions) + 2
	for i := range n {
		if err := EnsureTopics(ctx, e.Conn(), eventschema.Topics(), DefaultPartitions); err != nil {
			t.Fatalf("EnsureTopics of existing topics, call %d of %d: %v", i+1, n, err)
		}
	}

	client := &kafkago.Client{Addr: kafkago.TCP(e.Brokers()...), Timeout: 10 * time.Second, Transport: e.Conn().transport()}
	// A topic of 4 partitions grown one at a time to maxTopicPartitions reserves 60, not the
	// sum of every new total (5+6+...+64 = 2074); then the rest of the total still fits.
	resp, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{
		{Topic: "grown", NumPartitions: 4, ReplicationFactor: 1}}})
	if err != nil || resp.Errors["grown"] != nil {
		t.Fatalf("create grown: %v, %v", err, resp.Errors)
	}
	for count := 5; count <= maxTopicPartitions; count++ {
		r, err := client.CreatePartitions(ctx, &kafkago.CreatePartitionsRequest{Topics: []kafkago.TopicPartitionsConfig{
			{Name: "grown", Count: int32(count)}}})
		if err != nil || r.Errors["grown"] != nil {
			t.Fatalf("grow to %d: %v, %v", count, err, r.Errors)
		}
	}
	// Used so far: 64 for "grown". What is left fits whole topics of maxTopicPartitions.
	for i := range maxCreatedPartitions/maxTopicPartitions - 1 {
		name := fmt.Sprintf("rest-%d", i)
		r, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{
			{Topic: name, NumPartitions: maxTopicPartitions, ReplicationFactor: 1}}})
		if err != nil || r.Errors[name] != nil {
			t.Fatalf("create %s within the total: %v, %v", name, err, r.Errors)
		}
	}
	r, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{
		{Topic: "past-the-total", NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil || !errors.Is(r.Errors["past-the-total"], kafkago.PolicyViolation) {
		t.Fatalf("a partition past the total: %v, %v, want POLICY_VIOLATION", err, r.Errors)
	}
	// And the service's topics still answer TOPIC_ALREADY_EXISTS once the total is used up.
	if err := EnsureTopics(ctx, e.Conn(), eventschema.Topics(), DefaultPartitions); err != nil {
		t.Fatalf("EnsureTopics of existing topics once the total is used: %v", err)
	}
}

// TestTopicLimitsReserveNothingForWhatKfakeRefuses: a validate-only request, or one that kfake
// refuses (a replication factor the one broker cannot have, 0 partitions, a topic named twice)
// creates nothing and reserves nothing. (kafka-go waits for a validate-only topic to show up in
// the metadata until its timeout, so the control function is called directly.)
func TestTopicLimitsReserveNothingForWhatKfakeRefuses(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	l := &topicLimits{cluster: e.cluster, defaultPartition: 1}
	topic := func(name string, partitions int32, replication int16) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, replication
		return rt
	}
	requests := map[string]func(*kmsg.CreateTopicsRequest){
		"validate-only": func(r *kmsg.CreateTopicsRequest) {
			r.ValidateOnly = true
			r.Topics = append(r.Topics, topic("a", maxTopicPartitions, 1))
		},
		"replication factor 3": func(r *kmsg.CreateTopicsRequest) {
			r.Topics = append(r.Topics, topic("b", maxTopicPartitions, 3))
		},
		"no partitions": func(r *kmsg.CreateTopicsRequest) { r.Topics = append(r.Topics, topic("c", 0, 1)) },
		"named twice": func(r *kmsg.CreateTopicsRequest) {
			r.Topics = append(r.Topics, topic("d", maxTopicPartitions, 1), topic("d", maxTopicPartitions, 1))
		},
	}
	for name, fill := range requests {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.Version = 4
		fill(r)
		if _, _, handled := l.createTopics(r); handled {
			t.Fatalf("%s: refused by the limits, want it left to kfake", name)
		}
		if l.created != 0 {
			t.Fatalf("%s reserved %d partitions, want 0", name, l.created)
		}
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	for _, name := range []string{"unknown-topic", eventschema.Topics()[0]} {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, 1 // unknown, or not above what the topic has
		cp.Topics = append(cp.Topics, rt)
	}
	if _, _, handled := l.createPartitions(cp); handled || l.created != 0 {
		t.Fatalf("CreatePartitions kfake refuses: handled %v, reserved %d, want false and 0", handled, l.created)
	}
}

// TestTopicLimitsRetainNoRequests: kfake's control functions remember, for every connection
// they ever saw, that connection's last request, and never forget it; a control function kept
// for the life of the broker retained every CreateTopics request of every connection that ever
// sent one: 40 closed connections that each sent one of 1 MiB held 40 MiB for good.
func TestTopicLimitsRetainNoRequests(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	big := strings.Repeat("v", 32<<10-1) // a Kafka string's most
	send := func(i int) {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 4
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("retained-%d", i), maxTopicPartitions+1, 1
		for j := range 32 { // 1 MiB
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = fmt.Sprint("x", j), &big
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, int32(i))
		conn, err := net.Dial("tcp", e.Brokers()[0])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		size := make([]byte, 4)
		if _, err := io.ReadFull(conn, size); err != nil {
			t.Fatalf("the answer to request %d: %v", i, err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size))
		if _, err := io.ReadFull(conn, body); err != nil {
			t.Fatal(err)
		}
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		if err := resp.ReadFrom(body[4:]); err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
			t.Fatalf("answer to request %d: %v %+v, want POLICY_VIOLATION", i, err, resp.Topics)
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	send(-1)
	time.Sleep(100 * time.Millisecond)
	before := heap()
	const n = 40
	for i := range n {
		send(i)
	}
	time.Sleep(200 * time.Millisecond) // kfake's connection goroutines end
	if grown := int64(heap()) - int64(before); grown > n<<20/4 {
		t.Fatalf("the heap grew by %d MiB after %d connections sent a CreateTopics of 1 MiB and closed", grown>>20, n)
	}
}
