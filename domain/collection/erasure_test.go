package collection_test

import (
	"testing"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
)

func TestEndForErasedUser(t *testing.T) {
	end := func(c *collection.Collection) error { return c.EndForErasedUser(t0) }
	failed := func(from collection.Status) collection.StatusChanged {
		return collection.StatusChanged{From: from, To: collection.StatusFailed, Message: collection.MessageUserErased, ChangedAt: t0}
	}
	t.Run("a collection waiting for the user's signature ends FAILED and asks nothing more", func(t *testing.T) {
		waiting := collection.StatusChanged{From: collection.StatusLogin, To: collection.StatusWaitingForUserAction,
			Message: "sign", EIDOrder: &collection.EIDOrder{AutoStartToken: "token"}, ChangedAt: t0}
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusLogin), waiting).
			When(end).Then(failed(collection.StatusWaitingForUserAction))
	})
	for _, from := range collection.AllStatuses() {
		if from.IsFinal() || from == collection.StatusRunning || from == collection.StatusLogin {
			continue
		}
		t.Run("from "+string(from), func(t *testing.T) {
			scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusLogin), changed(collection.StatusLogin, from)).
				When(end).Then(failed(from))
		})
	}
	t.Run("from RUNNING", func(t *testing.T) {
		scenario(t).Given(started()).When(end).Then(failed(collection.StatusRunning))
	})
	t.Run("a final collection records nothing", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusCollecting),
			changed(collection.StatusCollecting, collection.StatusCompleted)).When(end).Then()
	})
	t.Run("a collection that does not exist", func(t *testing.T) {
		scenario(t).When(end).ThenError(domain.ErrConflict)
	})
}
