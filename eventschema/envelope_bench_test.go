package eventschema_test

import (
	"testing"
	"time"

	"github.com/samla/samla/eventschema"
)

// benchEnvelope is a collection.started event as the relay publishes it, its payload sealed.
func benchEnvelope() eventschema.Envelope {
	id := "0197c0a1-2222-7e5f-8a9b-000000000002"
	return eventschema.Envelope{EventID: id, Type: "collection.started", SchemaVersion: 4,
		Tenant: "acme", Stream: "collection-" + id, Revision: 3, Position: 17, OccurredAt: time.Now(),
		CorrelationID: "c", Actor: "client:acme",
		Payload: []byte(`{"collectionId":"` + id + `","companyId":"se-demo-insurer","sealed":{"v":1,"subject":"user-` + id +
			`","keyId":"k1","nonce":"AAAAAAAAAAAAAAAA","ciphertext":"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="}}`)}
}

// BenchmarkToMessage is the relay's encoding of one event for Kafka.
func BenchmarkToMessage(b *testing.B) {
	e := benchEnvelope()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eventschema.ToMessage(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFromMessage is one consumer group's decoding of one Kafka message: every group
// decodes every event the relay publishes.
func BenchmarkFromMessage(b *testing.B) {
	m, err := eventschema.ToMessage(benchEnvelope())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eventschema.FromMessage(m.Value); err != nil {
			b.Fatal(err)
		}
	}
}
