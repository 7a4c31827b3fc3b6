package app_test

import (
	"context"
	"errors"
	"testing"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
)

// A deleted user's collections that still run are ended by the erasure, before the user's key
// is destroyed: none goes on without the personal data it was started with, and none keeps
// showing its client an EID order to sign or a request for input.

const (
	waitingCollection   = "0190f4a2-6666-7b3a-9a51-2f1e3d4c5b6a"
	completedCollection = "0190f4a2-7777-7b3a-9a51-2f1e3d4c5b6a"
	strangerCollection  = "0190f4a2-8888-7b3a-9a51-2f1e3d4c5b6a"
)

// startedStep records a collection of owner and moves it through statuses, as a start and the
// connector would have; the last status may carry details.
func startedStep(t *testing.T, sc *commandtest.Scenario, id, owner string, last collection.StatusDetails, statuses ...collection.Status) {
	t.Helper()
	repo := commandtest.Repository(sc, collection.Kind)
	meta := repository.Meta{Tenant: "acme", Actor: "given"}
	if _, _, err := repo.Update(context.Background(), id, meta, func(c *collection.Collection) error {
		if err := c.Start(collection.StartRequest{CollectionID: id, ClientID: "acme", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE",
			Company:    collection.Company{ID: "se-demo-insurer", Products: []collection.Product{collection.ProductInsurance}, Available: true},
			APIVersion: "2026-04-01", UserUUID: owner, PersonalNumber: personalNumber("19900101-0017"), RequestHash: "h"}, testNow); err != nil {
			return err
		}
		for i, st := range statuses {
			d := collection.StatusDetails{}
			if i == len(statuses)-1 {
				d = last
			}
			if err := c.ChangeStatusWith(st, d, testNow); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// lastChange is the collection's last status change, and how many events its stream holds.
func lastChange(t *testing.T, sc *commandtest.Scenario, id string) (collection.StatusChanged, int) {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	envs := sc.Store().Events(collection.StreamName(id))
	var last collection.StatusChanged
	for _, env := range envs {
		if env.Type != collection.EventStatusChanged {
			continue
		}
		ev, err := reg.Decode(env)
		if err != nil {
			t.Fatal(err)
		}
		last = ev.(collection.StatusChanged)
	}
	return last, len(envs)
}

// givenUsersCollections is a user of acme with a collection waiting for its signature and a
// completed one, both of which the read model lists as running (it is behind on the second), and
// another user's collection that it lists by mistake.
func givenUsersCollections(t *testing.T, sc *commandtest.Scenario) userCollections {
	t.Helper()
	sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
		Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0"))
	startedStep(t, sc, waitingCollection, otherUser, collection.StatusDetails{Message: "Open the app and sign",
		EIDOrder: &collection.EIDOrder{AutoStartToken: "autostart"}},
		collection.StatusLogin, collection.StatusWaitingForUserAction)
	startedStep(t, sc, completedCollection, otherUser, collection.StatusDetails{}, collection.StatusCollecting, collection.StatusCompleted)
	startedStep(t, sc, strangerCollection, "0190f4a2-9999-7b3a-9a51-2f1e3d4c5b6a", collection.StatusDetails{}, collection.StatusLogin)
	return userCollections{otherUser: {waitingCollection, completedCollection, strangerCollection}}
}

// assertEndedForErasure: the collection's last status is FAILED for the erasure, asking nothing.
func assertEndedForErasure(t *testing.T, sc *commandtest.Scenario, id string, from collection.Status) {
	t.Helper()
	last, _ := lastChange(t, sc, id)
	want := collection.StatusChanged{From: from, To: collection.StatusFailed, Message: collection.MessageUserErased,
		ChangedAt: created}
	if last.From != want.From || last.To != want.To || last.Message != want.Message || !last.ChangedAt.Equal(want.ChangedAt) ||
		last.EIDOrder != nil || last.Deadline != nil || len(last.RequiredInputTypes) > 0 || last.Personal != nil {
		t.Fatalf("last status change %+v, want %+v", last, want)
	}
}

func TestDeleteEndsTheUsersRunningCollections(t *testing.T) {
	sc, _, keys := erasingScenario(t, nil)
	listed := givenUsersCollections(t, sc)
	withKeys(t, keys, domain.UserSubject(otherUser))
	svc := app.NewUserService(repoOf(sc, user.Kind), repoOf(sc, user.ReservationKind), userSecret,
		app.Erasure{Keys: keys, Collections: listed, Ends: repoOf(sc, collection.Kind),
			Consents: userConsents{}, Revokes: repoOf(sc, consent.Kind)}, sc.Clock())
	_, completedBefore := lastChange(t, sc, completedCollection)
	_, strangerBefore := lastChange(t, sc, strangerCollection)

	if err := deleteUser(svc, "acme", otherUser)(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertEndedForErasure(t, sc, waitingCollection, collection.StatusWaitingForUserAction)
	envs := sc.Store().Events(collection.StreamName(waitingCollection))
	if env := envs[len(envs)-1]; env.Tenant != "acme" || env.CausationID != "req-2" || env.CorrelationID != "corr-2" {
		t.Fatalf("the end's envelope %+v", env)
	}
	if _, n := lastChange(t, sc, completedCollection); n != completedBefore {
		t.Fatal("a completed collection was changed")
	}
	if _, n := lastChange(t, sc, strangerCollection); n != strangerBefore {
		t.Fatal("another user's collection was ended")
	}
	assertErased(t, keys, domain.UserSubject(otherUser), true)
}

// flakyCollections fails its first listing, as a read model that went away in the middle of a
// delete.
type flakyCollections struct {
	userCollections
	failed bool
}

var errReadModelDown = errors.New("read model down")

func (f *flakyCollections) UserNonFinalCollectionIDs(ctx context.Context, tenant, userUUID string) ([]string, error) {
	if !f.failed {
		f.failed = true
		return nil, errReadModelDown
	}
	return f.userCollections.UserNonFinalCollectionIDs(ctx, tenant, userUUID)
}

// TestADeleteStoppedBeforeTheCollectionsEndIsFinished: the key is destroyed only after the
// collections ended, so FinishErasure (from the user.deleted event) still finds the erasure
// unfinished and ends them.
func TestADeleteStoppedBeforeTheCollectionsEndIsFinished(t *testing.T) {
	sc, _, keys := erasingScenario(t, nil)
	listed := &flakyCollections{userCollections: givenUsersCollections(t, sc)}
	withKeys(t, keys, domain.UserSubject(otherUser))
	svc := app.NewUserService(repoOf(sc, user.Kind), repoOf(sc, user.ReservationKind), userSecret,
		app.Erasure{Keys: keys, Collections: listed, Ends: repoOf(sc, collection.Kind),
			Consents: userConsents{}, Revokes: repoOf(sc, consent.Kind)}, sc.Clock())
	if err := deleteUser(svc, "acme", otherUser)(context.Background()); !errors.Is(err, errReadModelDown) {
		t.Fatalf("the delete that stops = %v", err)
	}
	assertErased(t, keys, domain.UserSubject(otherUser), false)
	if last, _ := lastChange(t, sc, waitingCollection); last.To != collection.StatusWaitingForUserAction {
		t.Fatalf("ended before the listing: %+v", last)
	}
	if err := finishErasure(svc, otherUser)(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertEndedForErasure(t, sc, waitingCollection, collection.StatusWaitingForUserAction)
	assertErased(t, keys, domain.UserSubject(otherUser), true)
}

// TestSupplyInfoForAnEndedCollectionOfADeletedUser: input for a collection its user's erasure
// ended is refused as the user's deletion (USER_DELETED), which is why it takes none; a
// collection that ended otherwise is refused as one that awaits no input.
func TestSupplyInfoForAnEndedCollectionOfADeletedUser(t *testing.T) {
	const userID = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	f := newFixture(t)
	erased, other := startedFor(t, f, userID), startedFor(t, f, userID)
	for id, end := range map[string]func(c *collection.Collection) error{
		erased: func(c *collection.Collection) error { return c.EndForErasedUser(testNow) },
		other: func(c *collection.Collection) error {
			return c.ChangeStatus(collection.StatusContactForm, nil, testNow)
		},
	} {
		if _, _, err := f.repo.Update(context.Background(), id, repository.Meta{Tenant: "acme"}, end); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.svc.SupplyInfo(context.Background(), supplyCmd(other)); !errors.Is(err, collection.ErrNotAwaitingInput) {
		t.Fatalf("input for a collection that ended while its user lives = %v", err)
	}
	appendUserEvents(t, f, userID, user.Created{UserUUID: userID, ClientID: "acme", CreatedAt: testNow}, user.Deleted{DeletedAt: testNow})
	before := streamLen(f, erased)
	if _, err := f.svc.SupplyInfo(context.Background(), supplyCmd(erased)); !errors.Is(err, app.ErrUserDeleted) || streamLen(f, erased) != before {
		t.Fatalf("input for a collection its user's erasure ended = %v", err)
	}
}
