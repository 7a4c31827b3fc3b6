package app_test

import (
	"context"
	"errors"
	"testing"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/user"
)

// TestScenarioStartForAUser: a collection names a user only when that user is a live user of the
// client, as the event store says at once; otherwise UNKNOWN_USER, and nothing is recorded.
func TestScenarioStartForAUser(t *testing.T) {
	const userID = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	acmeUser := user.Created{UserUUID: userID, ClientID: "acme", CreatedAt: testNow,
		Personal: &user.CreatedPerson{ExternalID: "customer-42", RequestHash: "h"}}
	globexUser := acmeUser
	globexUser.ClientID = "globex"
	cmd := startCmd()
	cmd.IdempotencyKey, cmd.UserUUID = "key-1", userID
	start := func(svc *app.CollectionService, cmd app.StartCollection) func(context.Context) error {
		return func(ctx context.Context) error { _, err := svc.Start(ctx, cmd); return err }
	}
	withUser := func() collection.Started {
		s := startedWithKey("key-1")
		s.UserUUID = userID
		return s
	}

	t.Run("a live user of the client", func(t *testing.T) {
		sc, svc := scenarioService(t)
		sc.Given(user.StreamName(userID), acmeUser).When(start(svc, cmd)).Then(withUser())
	})
	for _, tc := range []struct {
		name  string
		given func(*commandtest.Scenario)
	}{
		{"an unknown user", func(*commandtest.Scenario) {}},
		{"another client's user", func(sc *commandtest.Scenario) { sc.Given(user.StreamName(userID), globexUser) }},
		{"a deleted user", func(sc *commandtest.Scenario) {
			sc.Given(user.StreamName(userID), acmeUser, user.Deleted{DeletedAt: testNow})
		}},
	} {
		t.Run(tc.name+" is UNKNOWN_USER", func(t *testing.T) {
			sc, svc := scenarioService(t)
			tc.given(sc)
			err := sc.When(start(svc, cmd)).ThenError(app.ErrUnknownUser)
			if !errors.Is(err, domain.ErrRefused) {
				t.Fatalf("err %v is not a refusal", err)
			}
		})
	}
	t.Run("a retry is answered as it was after its user was deleted", func(t *testing.T) {
		sc, svc := scenarioService(t)
		sc.Given(user.StreamName(userID), acmeUser, user.Deleted{DeletedAt: testNow}).
			Given(collection.StreamName(app.CollectionIDForKey("acme", "key-1")), withUser()).
			When(start(svc, cmd)).Then()
	})
}
