package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
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
	client := &kafkago.Client{Addr: kafkago.TCP(e.Brokers()...), Timeout: 10 * time.Second}
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
