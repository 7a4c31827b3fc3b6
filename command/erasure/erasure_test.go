package erasure_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/erasure"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
)

type recorder struct {
	got  []app.FinishErasure
	fail error
}

func (r *recorder) FinishErasure(_ context.Context, cmd app.FinishErasure) error {
	r.got = append(r.got, cmd)
	return r.fail
}

func TestEveryUserDeletedIsFinished(t *testing.T) {
	r := &recorder{}
	m := erasure.New(r)
	batch := []eventschema.Envelope{
		{EventID: "e1", Type: user.EventCreated, Stream: user.StreamName("u1")},
		{EventID: "e2", Type: user.EventDeleted, Stream: user.StreamName("u1"), CorrelationID: "corr-1"},
		{EventID: "e3", Type: "collection.status-changed", Stream: "collection-c1"},
		{EventID: "e4", Type: user.EventDeleted, Stream: "collection-c1"},
		{EventID: "e5", Type: user.EventDeleted, Stream: user.StreamName("u2"), CorrelationID: "corr-2"},
	}
	if err := m.HandleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	want := []app.FinishErasure{{UserUUID: "u1", CorrelationID: "corr-1", CausationID: "e2"},
		{UserUUID: "u2", CorrelationID: "corr-2", CausationID: "e5"}}
	if !reflect.DeepEqual(r.got, want) {
		t.Fatalf("finished %+v, want %+v", r.got, want)
	}
	if erasure.Topic() != "samla.user.events" {
		t.Fatalf("topic %s", erasure.Topic())
	}
}

// TestAFailedErasureFailsTheBatch: the consumer delivers the batch again rather than skip an
// erasure.
func TestAFailedErasureFailsTheBatch(t *testing.T) {
	down := errors.New("key store down")
	m := erasure.New(&recorder{fail: down})
	err := m.HandleBatch(context.Background(), []eventschema.Envelope{{EventID: "e1", Type: user.EventDeleted, Stream: user.StreamName("u1")}})
	if !errors.Is(err, down) {
		t.Fatalf("HandleBatch = %v", err)
	}
}
