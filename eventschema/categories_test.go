package eventschema_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
)

// TestEveryEventTypeHasATopic: an event's type is named after its stream's category, and every
// category the registry's types name has a topic, so that the relay can publish every event.
func TestEveryEventTypeHasATopic(t *testing.T) {
	for _, typ := range registry(t).Types() {
		category, _, _ := strings.Cut(typ, ".")
		if !slices.Contains(eventschema.Categories(), category) {
			t.Errorf("%s: category %s has no topic", typ, category)
		}
	}
	for _, prefix := range []string{collection.StreamPrefix, cancellation.StreamPrefix, consent.StreamPrefix, client.StreamPrefix, user.StreamPrefix, user.ReservationStreamPrefix} {
		if c := eventschema.Category(prefix + "x"); !slices.Contains(eventschema.Categories(), c) {
			t.Errorf("streams %s… are in category %s, which has no topic", prefix, c)
		}
	}
}

// TestConsentTopic: consent streams travel on samla.consent.events, keyed by their stream.
func TestConsentTopic(t *testing.T) {
	m, err := eventschema.ToMessage(eventschema.Envelope{EventID: "e1", Type: consent.EventCreated, SchemaVersion: 1,
		Stream: consent.StreamName("0190f4a2-7c1e-7b3a-9a51-2f1e3d4c5b6a")})
	if err != nil {
		t.Fatal(err)
	}
	if m.Topic != "samla.consent.events" || string(m.Key) != "consent-0190f4a2-7c1e-7b3a-9a51-2f1e3d4c5b6a" {
		t.Fatalf("topic %s key %s", m.Topic, m.Key)
	}
}
