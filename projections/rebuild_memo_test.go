package projections

import (
	"context"
	"testing"
	"time"

	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/internal/eventlog"
)

// TestDecodeMemoAnswersOnlyItsOwnEnvelopes: the rebuild's decode memo answers an envelope of a
// batch in flight with the event decoded once, and any other envelope, even one at the same
// position with equal bytes, or after its batch was dropped, by decoding it afresh.
func TestDecodeMemoAnswersOnlyItsOwnEnvelopes(t *testing.T) {
	ctx := context.Background()
	log := eventlog.New(t)
	t0 := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	for i := range 3 {
		log.Append("acme", client.StreamName("acme"), t0, client.APIKeyIssued{KeyID: string(rune('a' + i)), KeyHash: client.HashAPIKey("k"), IssuedAt: t0})
	}
	batch := log.All()
	b, err := openBatch(ctx, keystore.NewMemory(), log.Registry(), batch)
	if err != nil {
		t.Fatal(err)
	}
	memo := &decodeMemo{reg: log.Registry()}
	memo.add(b)
	for i, env := range b.opened {
		if b.events[i] == nil {
			t.Fatalf("event %d not decoded", i)
		}
		if memo.lookup(env) == nil {
			t.Errorf("event %d of the batch in flight not answered from the memo", i)
		}
		if ev, err := memo.Decode(env); err != nil || ev == nil || !sameEvent(ev, b.events[i]) {
			t.Errorf("event %d: %v, %v; want the batch's own decoded event", i, ev, err)
		}
	}
	// Equal bytes elsewhere in memory are decoded again, to an equal event.
	other := b.opened[1]
	other.Payload = append(eventschema.Envelope{}.Payload, other.Payload...)
	if ev := memo.lookup(other); ev != nil {
		t.Errorf("a copy of an envelope was answered from the memo")
	}
	if ev, err := memo.Decode(other); err != nil || ev.(client.APIKeyIssued).KeyID != "b" {
		t.Errorf("copy decoded as %v, %v", ev, err)
	}
	memo.drop(b)
	if ev := memo.lookup(b.opened[0]); ev != nil {
		t.Errorf("a dropped batch was answered from the memo")
	}
}

// sameEvent reports whether two decoded events are the same API key issue.
func sameEvent(a, b any) bool {
	x, ok1 := a.(client.APIKeyIssued)
	y, ok2 := b.(client.APIKeyIssued)
	return ok1 && ok2 && x == y
}
