package app_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

// The erasure of a deleted user: its externalId released, its running collections ended, then its
// key destroyed (and no other: its collections' personal data is sealed under it), whether the
// DELETE does it, its retry, or FinishErasure after a crash.

const (
	erasedCollection = "0190f4a2-2222-7b3a-9a51-2f1e3d4c5b6a"
	keptCollection   = "0190f4a2-3333-7b3a-9a51-2f1e3d4c5b6a"
)

// withKeys gives the user and its collection keys, as their sealed events and rows made them.
func withKeys(t *testing.T, keys *keystore.Memory, subjects ...string) {
	t.Helper()
	for _, s := range subjects {
		if _, err := keys.GetOrCreate(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
}

// assertNoKey: the subject has neither a key nor a tombstone.
func assertNoKey(t *testing.T, keys eventschema.Keys, subject string) {
	t.Helper()
	if _, err := keys.Get(context.Background(), subject); !errors.Is(err, eventschema.ErrKeyNotFound) {
		t.Fatalf("%s has a key or a tombstone: %v", subject, err)
	}
}

func assertErased(t *testing.T, keys eventschema.Keys, subject string, erased bool) {
	t.Helper()
	_, err := keys.Get(context.Background(), subject)
	if got := errors.Is(err, eventschema.ErrSubjectErased); got != erased {
		t.Fatalf("%s erased = %v (%v), want %v", subject, got, err, erased)
	}
}

func finishErasure(svc *app.UserService, id string) func(context.Context) error {
	return func(ctx context.Context) error {
		return svc.FinishErasure(ctx, app.FinishErasure{UserUUID: id, CorrelationID: "corr-9", CausationID: "evt-deleted"})
	}
}

// failingKeys fails the destruction of one subject, as a crash (or a key store that went away)
// between the steps of a delete would leave it.
type failingKeys struct {
	*keystore.Memory
	fail string
}

var errKeyStoreDown = errors.New("key store down")

func (f *failingKeys) Destroy(ctx context.Context, subject string) error {
	if subject == f.fail {
		return errKeyStoreDown
	}
	return f.Memory.Destroy(ctx, subject)
}

func TestScenarioDeleteErases(t *testing.T) {
	given := func(t *testing.T) (*app.UserService, *keystore.Memory, func(events ...domain.Event) []eventschema.Envelope) {
		sc, svc, keys := erasingScenario(t, userCollections{otherUser: {erasedCollection}})
		withKeys(t, keys, domain.UserSubject(otherUser), domain.CollectionSubject(keptCollection))
		sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
			Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0"))
		return svc, keys, func(events ...domain.Event) []eventschema.Envelope {
			return sc.When(deleteUser(svc, "acme", otherUser)).Then(events...)
		}
	}
	t.Run("releases the externalId, then destroys the user's key and no other", func(t *testing.T) {
		_, keys, then := given(t)
		then(user.Deleted{DeletedAt: created}, user.ExternalIDReleased{ReleasedAt: created, Personal: &user.ReleasedBy{UserUUID: otherUser}})
		assertErased(t, keys, domain.UserSubject(otherUser), true)
		assertNoKey(t, keys, domain.CollectionSubject(erasedCollection)) // its collections' subject is the user's
		assertErased(t, keys, domain.CollectionSubject(keptCollection), false)
		// Nothing is ever sealed under them again.
		if _, err := keys.GetOrCreate(context.Background(), domain.UserSubject(otherUser)); !errors.Is(err, eventschema.ErrSubjectErased) {
			t.Fatalf("a new key for the erased user: %v", err)
		}
	})
	t.Run("an erased user's retry records nothing and succeeds", func(t *testing.T) {
		sc, svc, keys := erasingScenario(t, userCollections{otherUser: {erasedCollection}})
		if err := keys.Destroy(context.Background(), domain.UserSubject(otherUser)); err != nil {
			t.Fatal(err)
		}
		// The stream as it opens once erased: the created event without its externalId.
		sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0"), user.ExternalIDReleased{ReleasedAt: created, Personal: &user.ReleasedBy{UserUUID: otherUser}}).
			Given(user.StreamName(otherUser), user.Created{UserUUID: otherUser, ClientID: "acme", CreatedAt: created},
				user.Deleted{DeletedAt: created}).
			When(deleteUser(svc, "acme", otherUser)).Then()
		assertErased(t, keys, domain.UserSubject(otherUser), true)
	})
}

// TestDeleteThatStopsIsFinished: a delete that stops between its steps leaves the user deleted
// but its key alive; the DELETE's retry finishes it, and so does FinishErasure (the erasure
// process manager's, from the user.deleted event), without the client.
func TestDeleteThatStopsIsFinished(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failAt string // the subject whose destruction fails: the step the delete stops at
	}{
		{"after the release and the end of its collections, before its key", domain.UserSubject(otherUser)},
	} {
		for _, finish := range []string{"the client's retry", "FinishErasure"} {
			t.Run(tc.name+", finished by "+finish, func(t *testing.T) {
				sc, _, mem := erasingScenario(t, userCollections{otherUser: {erasedCollection}})
				withKeys(t, mem, domain.UserSubject(otherUser))
				broken := &failingKeys{Memory: mem, fail: tc.failAt}
				erasure := app.Erasure{Keys: broken, Collections: userCollections{otherUser: {erasedCollection}},
					Ends:     repoOf(sc, collection.Kind),
					Consents: userConsents{}, Revokes: repoOf(sc, consent.Kind)}
				svc := app.NewUserService(repoOf(sc, user.Kind), repoOf(sc, user.ReservationKind), userSecret, erasure, sc.Clock())
				sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
					Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0"))
				// The delete records user.deleted and the release, then stops.
				if err := deleteUser(svc, "acme", otherUser)(context.Background()); !errors.Is(err, errKeyStoreDown) {
					t.Fatalf("the delete that stops = %v", err)
				}
				if n := len(sc.Store().Events(user.StreamName(otherUser))); n != 2 {
					t.Fatalf("the user's stream has %d events, want created and deleted", n)
				}
				assertErased(t, mem, domain.UserSubject(otherUser), false)

				broken.fail = "" // the key store is back (or another process takes over)
				if finish == "FinishErasure" {
					sc.When(finishErasure(svc, otherUser)).Then() // released already: nothing to record
				} else {
					sc.When(deleteUser(svc, "acme", otherUser)).Then()
				}
				assertErased(t, mem, domain.UserSubject(otherUser), true)
			})
		}
	}
}

// TestScenarioFinishErasure: a delete that stopped right after user.deleted (its externalId still
// held, every key alive) is finished from the event alone; an erased user, a live user and an
// unknown one are left alone.
func TestScenarioFinishErasure(t *testing.T) {
	t.Run("a deleted user whose delete stopped after recording it", func(t *testing.T) {
		sc, svc, keys := erasingScenario(t, userCollections{otherUser: {erasedCollection}})
		withKeys(t, keys, domain.UserSubject(otherUser))
		envs := sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
			Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0"), user.Deleted{DeletedAt: created}).
			When(finishErasure(svc, otherUser)).
			Then(user.ExternalIDReleased{ReleasedAt: created, Personal: &user.ReleasedBy{UserUUID: otherUser}})
		if envs[0].Tenant != "acme" || envs[0].CausationID != "evt-deleted" || envs[0].CorrelationID != "corr-9" ||
			envs[0].Actor != "samla:erasure" {
			t.Fatalf("release envelope %+v", envs[0])
		}
		assertErased(t, keys, domain.UserSubject(otherUser), true)
	})
	t.Run("an erased user: nothing is listed or recorded", func(t *testing.T) {
		sc, _, keys := erasingScenario(t, nil)
		if err := keys.Destroy(context.Background(), domain.UserSubject(otherUser)); err != nil {
			t.Fatal(err)
		}
		svc := app.NewUserService(repoOf(sc, user.Kind), repoOf(sc, user.ReservationKind), userSecret,
			app.Erasure{Keys: keys, Collections: failingCollections{}, Ends: repoOf(sc, collection.Kind),
				Consents: userConsents{}, Revokes: repoOf(sc, consent.Kind)}, sc.Clock())
		sc.Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0"), user.Deleted{DeletedAt: created}).
			When(finishErasure(svc, otherUser)).Then()
	})
	t.Run("a live user is not erased", func(t *testing.T) {
		sc, svc, keys := erasingScenario(t, userCollections{otherUser: {erasedCollection}})
		withKeys(t, keys, domain.UserSubject(otherUser))
		sc.Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0")).
			When(finishErasure(svc, otherUser)).Then()
		assertErased(t, keys, domain.UserSubject(otherUser), false)
	})
	t.Run("an unknown user is not erased", func(t *testing.T) {
		sc, svc, keys := erasingScenario(t, nil)
		sc.When(finishErasure(svc, otherUser)).Then()
		if _, err := keys.Get(context.Background(), domain.UserSubject(otherUser)); !errors.Is(err, eventschema.ErrKeyNotFound) {
			t.Fatalf("an unknown user got a tombstone: %v", err)
		}
	})
}

// failingCollections fails every listing: what must not be asked is not.
type failingCollections struct{}

func (failingCollections) UserNonFinalCollectionIDs(context.Context, string, string) ([]string, error) {
	return nil, errors.New("the collections were listed")
}

// TestIsLiveUserReadsTheEventStore: a user is live the moment it was created, whatever a read
// model says; deleted, another client's, unknown and malformed ids are not.
func TestIsLiveUserReadsTheEventStore(t *testing.T) {
	sc, svc := userScenario(t)
	const deleted = "0190f4a2-4444-7b3a-9a51-2f1e3d4c5b6a"
	sc.Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0")).
		Given(user.StreamName(deleted), userCreated(deleted, "customer-43", "hash-0"), user.Deleted{DeletedAt: created})
	for _, tc := range []struct {
		client, id string
		live       bool
	}{
		{"acme", otherUser, true},
		{"globex", otherUser, false},
		{"acme", deleted, false},
		{"acme", "0190f4a2-5555-7b3a-9a51-2f1e3d4c5b6a", false},
		{"acme", "not-a-uuid", false},
		{"acme", "0190F4A2-0000-7B3A-9A51-2F1E3D4C5B6A", false},
	} {
		live, err := svc.IsLiveUser(context.Background(), tc.client, tc.id)
		if err != nil || live != tc.live {
			t.Errorf("IsLiveUser(%s, %s) = %v, %v; want %v", tc.client, tc.id, live, err, tc.live)
		}
	}
}

// readModelUsers is the users read model as SessionLiveness sees it: each known (client, user) is
// "live" or "deleted"; it counts its reads.
type readModelUsers struct {
	known map[[2]string]string
	err   error
	reads int
}

func (m *readModelUsers) state(clientID, userUUID string) (string, error) {
	m.reads++
	return m.known[[2]string{clientID, userUUID}], m.err
}

func (m *readModelUsers) IsLiveUser(_ context.Context, clientID, userUUID string) (bool, error) {
	s, err := m.state(clientID, userUUID)
	return s == "live", err
}

func (m *readModelUsers) IsDeletedUser(_ context.Context, clientID, userUUID string) (bool, error) {
	s, err := m.state(clientID, userUUID)
	return s == "deleted", err
}

// TestSessionLivenessAsksTheEventStoreOnlyAboutUsersTheReadModelHasNotSeen: what the read model
// shows wins, a deletion included (a user the event store still has live is not live once the
// read model shows it deleted); a user it has not seen is asked of the event store.
func TestSessionLivenessAsksTheEventStoreOnlyAboutUsersTheReadModelHasNotSeen(t *testing.T) {
	sc, svc := userScenario(t)
	const (
		storeDeleted = "0190f4a2-4444-7b3a-9a51-2f1e3d4c5b6a"
		storeUnknown = "0190f4a2-5555-7b3a-9a51-2f1e3d4c5b6a"
		modelOnly    = "0190f4a2-6666-7b3a-9a51-2f1e3d4c5b6a"
	)
	sc.Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0")).
		Given(user.StreamName(storeDeleted), userCreated(storeDeleted, "customer-43", "hash-0"), user.Deleted{DeletedAt: created})
	for _, tc := range []struct {
		name  string
		model string // what the read model shows of (acme, id): "", "live" or "deleted"
		id    string
		live  bool
		reads int
	}{
		{"live in the read model", "live", modelOnly, true, 1},
		{"deleted in the read model, live in the event store", "deleted", otherUser, false, 2},
		{"not seen by the read model, live in the event store", "", otherUser, true, 2},
		{"not seen by the read model, deleted in the event store", "", storeDeleted, false, 2},
		{"unknown to both", "", storeUnknown, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &readModelUsers{known: map[[2]string]string{{"acme", tc.id}: tc.model}}
			live, err := app.SessionLiveness{ReadModel: model, Users: svc}.IsLiveUser(context.Background(), "acme", tc.id)
			if err != nil || live != tc.live || model.reads != tc.reads {
				t.Fatalf("IsLiveUser = %v, %v after %d reads of the read model; want %v after %d", live, err, model.reads, tc.live, tc.reads)
			}
		})
	}
	// A fault of the read model is an error, never an answer of the event store.
	failing := &readModelUsers{err: errors.New("read model down")}
	if live, err := (app.SessionLiveness{ReadModel: failing, Users: svc}).IsLiveUser(context.Background(), "acme", otherUser); err == nil || live {
		t.Fatalf("IsLiveUser with a failing read model = %v, %v", live, err)
	}
}

// TestSupplyInfoForADeletedUsersCollection: a collection whose user was deleted takes no more
// input (USER_DELETED, nothing recorded); a retry of input it took is answered as it was; a
// collection of a live user, or of a userUuid that names no user (started before users
// existed), takes it.
func TestSupplyInfoForADeletedUsersCollection(t *testing.T) {
	const userID = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	createdUser := user.Created{UserUUID: userID, ClientID: "acme", CreatedAt: testNow}
	for _, tc := range []struct {
		name    string
		user    []domain.Event
		refused bool
	}{
		{"a live user's", []domain.Event{createdUser}, false},
		{"a userUuid that names no user", nil, false},
		{"a deleted user's", []domain.Event{createdUser, user.Deleted{DeletedAt: testNow}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := startedFor(t, f, userID)
			appendUserEvents(t, f, userID, tc.user...)
			before := streamLen(f, id)
			_, err := f.svc.SupplyInfo(context.Background(), supplyCmd(id))
			if tc.refused {
				if !errors.Is(err, app.ErrUserDeleted) || !errors.Is(err, domain.ErrConflict) || streamLen(f, id) != before {
					t.Fatalf("SupplyInfo = %v with %d events recorded; want USER_DELETED and none", err, streamLen(f, id)-before)
				}
				return
			}
			if err != nil || streamLen(f, id) != before+1 {
				t.Fatalf("SupplyInfo = %v", err)
			}
		})
	}
	t.Run("a retry of input taken before the user was deleted", func(t *testing.T) {
		f := newFixture(t)
		id := startedFor(t, f, userID)
		appendUserEvents(t, f, userID, createdUser)
		cmd := supplyCmd(id)
		cmd.IdempotencyKey = "sup-1"
		if _, err := f.svc.SupplyInfo(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
		appendUserEvents(t, f, userID, user.Deleted{DeletedAt: testNow})
		if got, err := f.svc.SupplyInfo(context.Background(), cmd); err != nil || !got.Replayed {
			t.Fatalf("retry after the delete = %+v, %v", got, err)
		}
	})
}

// startedFor records a collection of userID waiting for the contact form, as a start for a live
// user (or one before users existed) and the connector would have; the user is not checked here.
func startedFor(t *testing.T, f *fixture, userID string) string {
	t.Helper()
	id := uuid.NewString()
	if _, _, err := f.repo.Update(context.Background(), id, repository.Meta{Tenant: "acme"}, func(c *collection.Collection) error {
		return c.Start(collection.StartRequest{CollectionID: id, ClientID: "acme", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
			Company:    collection.Company{ID: "se-demo-insurer", Products: []collection.Product{collection.ProductInsurance}, Available: true},
			APIVersion: "2026-04-01", UserUUID: userID, PersonalNumber: personalNumber("19900101-0017"), RequestHash: "h"}, testNow)
	}); err != nil {
		t.Fatal(err)
	}
	changeStatus(t, f, id, collection.StatusLogin, collection.StatusDetails{})
	changeStatus(t, f, id, collection.StatusContactFormPending, collection.StatusDetails{})
	return id
}

func appendUserEvents(t *testing.T, f *fixture, userID string, events ...domain.Event) {
	t.Helper()
	for _, ev := range events {
		typ, version, payload, err := f.reg.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Append(context.Background(), user.StreamName(userID), eventstore.Any(), []eventschema.Envelope{{
			EventID: uuid.NewString(), Type: typ, SchemaVersion: version, Tenant: "acme", OccurredAt: testNow, Payload: payload,
		}}); err != nil {
			t.Fatal(err)
		}
	}
}

// repoOf is a repository of kind over the scenario's store and clock.
func repoOf[A domain.Aggregate](sc *commandtest.Scenario, kind domain.Kind[A]) *repository.Repository[A] {
	return commandtest.Repository(sc, kind)
}
