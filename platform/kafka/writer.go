package kafka

import (
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/samla/samla/eventschema"
)

// NewWriter returns the writer the relay publishes with. The message carries its topic (one
// per category), so the writer has none. Settings and why:
//   - RequireAll: a message counts as published only once every in-sync replica has it,
//     which is what lets the relay move its checkpoint.
//   - Hash balancer: the key is the stream id, so one stream always lands in one partition
//     and keeps its order (kafka-go's default is round-robin, which would scatter it).
//   - BatchTimeout 2 ms: kafka-go waits up to a second by default for a batch to fill; a
//     synchronous caller would pay that on every call.
//   - BatchSize and BatchBytes at least what the relay sends in one call: kafka-go splits one
//     WriteMessages call into several produce requests per partition when a batch fills,
//     and a partial failure of those can leave a later part of a stream in the log before an
//     earlier part. The relay bounds its own batches instead (WriterBatchSize,
//     RelayMaxBatchBytes), so each call is at most one record batch per partition, which the
//     broker appends atomically. BatchSize must not be huge either: kafka-go preallocates
//     BatchSize messages for every partition batch (at 1<<20 a 500-event call took seconds).
//
// The writer comes from kafka-go's legacy constructor because that is the only way to give it
// a connection pool of its own, which Close releases. A Writer literal shares kafka-go's
// process-wide DefaultTransport, whose pools are never released and, after a broker restart
// on the same address, hand out dead connections (each one fails a produce with "unexpected
// EOF", measured with the embedded broker). The fields are then set directly. The config's
// Dialer carries conn's SASL mechanism, which the constructor moves to the writer's transport.
func NewWriter(conn Conn) *kafkago.Writer {
	w := kafkago.NewWriter(kafkago.WriterConfig{Brokers: conn.Brokers, Dialer: conn.Dialer()})
	w.RequiredAcks = kafkago.RequireAll
	w.Balancer = &kafkago.Hash{}
	w.BatchTimeout = 2 * time.Millisecond
	w.BatchSize = WriterBatchSize
	w.BatchBytes = maxMessageBytes
	// The relay retries whole batches itself; kafka-go's own retries of one partition's
	// batch keep order and save a round trip on a stale connection.
	w.MaxAttempts = 3
	w.WriteTimeout = 10 * time.Second
	return w
}

// NewCheckpointWriter is NewWriter for the relay's checkpoint, one message per call: with a
// batch size of 1 the message's batch is full at once, so it is sent without waiting out
// BatchTimeout, and kafka-go preallocates one message per call instead of WriterBatchSize
// (~75 KB per call, which was 6 % of what the process allocated while collections ran).
func NewCheckpointWriter(conn Conn) *kafkago.Writer {
	w := NewWriter(conn)
	w.BatchSize = 1
	return w
}

// WriterBatchSize is the writer's per-partition batch size: the most messages one
// WriteMessages call may carry and still reach each partition in a single produce request.
const WriterBatchSize = 500

// RelayMaxBatchBytes bounds the encoded size of one relay batch so that it fits in one
// produce request per partition under Kafka's default message.max.bytes (1 MiB).
const RelayMaxBatchBytes = 768 << 10

// Message encodes an event as the Kafka message the relay publishes: eventschema's topic, key,
// value and headers (the counterpart of the decoding in Consume).
func Message(e eventschema.Envelope) (kafkago.Message, error) {
	tm, err := eventschema.ToMessage(e)
	if err != nil {
		return kafkago.Message{}, err
	}
	m := kafkago.Message{Topic: tm.Topic, Key: tm.Key, Value: tm.Value,
		Headers: make([]kafkago.Header, 0, len(tm.Headers))}
	for k, v := range tm.Headers {
		m.Headers = append(m.Headers, kafkago.Header{Key: k, Value: []byte(v)})
	}
	return m, nil
}
