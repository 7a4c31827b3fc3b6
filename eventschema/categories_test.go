package eventschema_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
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
	for _, prefix := range []string{collection.StreamPrefix, client.StreamPrefix, user.StreamPrefix, user.ReservationStreamPrefix} {
		if c := eventschema.Category(prefix + "x"); !slices.Contains(eventschema.Categories(), c) {
			t.Errorf("streams %s… are in category %s, which has no topic", prefix, c)
		}
	}
}
