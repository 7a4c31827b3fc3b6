package app_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

// userSecret keys the externalId reservations' names in these tests.
var userSecret = []byte("test-fingerprint-key-0123456789abcdef")

// created is the ms-precision time the service stamps on what it records.
var created = testNow.Truncate(time.Millisecond)

const otherUser = "0190f4a2-0000-7b3a-9a51-2f1e3d4c5b6a"

func userScenario(t *testing.T) (*commandtest.Scenario, *app.UserService) {
	sc, svc, _ := erasingScenario(t, nil)
	return sc, svc
}

// userCollections is the status read model's list of users' running collections, by user.
type userCollections map[string][]string

func (u userCollections) UserNonFinalCollectionIDs(_ context.Context, tenant, userUUID string) ([]string, error) {
	if tenant != "acme" {
		return nil, nil
	}
	return u[userUUID], nil
}

// userConsents is the consents read model's list of users' consents, by user.
type userConsents map[string][]string

func (u userConsents) UserConsentIDs(_ context.Context, tenant, userUUID string) ([]string, error) {
	if tenant != "acme" {
		return nil, nil
	}
	return u[userUUID], nil
}

// erasingScenario is a user scenario whose deletions erase with an in-memory key store (returned)
// and these users' collections.
func erasingScenario(t *testing.T, collections userCollections) (*commandtest.Scenario, *app.UserService, *keystore.Memory) {
	sc := commandtest.New(t, testNow)
	keys := keystore.NewMemory()
	return sc, app.NewUserService(commandtest.Repository(sc, user.Kind), commandtest.Repository(sc, user.ReservationKind),
		userSecret, app.Erasure{Keys: keys, Collections: collections, Ends: commandtest.Repository(sc, collection.Kind),
			Consents: userConsents{}, Revokes: commandtest.Repository(sc, consent.Kind)}, sc.Clock(),
		app.WithHoldTokens(holdToken)), keys
}

// holdToken makes the token of a user's hold on its externalId predictable in these tests.
func holdToken(userUUID string) string { return "hold-of-" + userUUID }

// holdOf is the data subject of a user's hold on its externalId in these tests.
func holdOf(userUUID string) string { return domain.HolderSubject(holdToken(userUUID)) }

func createUserCmd(key, externalID, hash string) app.CreateUser {
	return app.CreateUser{Tenant: "acme", IdempotencyKey: key, ExternalID: externalID, RequestHash: hash,
		CorrelationID: "corr-1", RequestID: "req-1"}
}

func reservationOf(externalID string) string {
	return user.ReservationStreamName(user.ExternalIDKey(userSecret, "acme", externalID))
}

func userCreated(id, externalID, hash string) user.Created {
	return user.Created{UserUUID: id, ClientID: "acme", CreatedAt: created,
		Personal: &user.CreatedPerson{ExternalID: externalID, RequestHash: hash, HolderSubject: holdOf(id)}}
}

func reservedFor(id, hash string) user.ExternalIDReserved {
	return user.ExternalIDReserved{ClientID: "acme", ReservedAt: created,
		Personal: &user.ReservedBy{UserUUID: id, RequestHash: hash, Subject: holdOf(id)}}
}

func createUser(svc *app.UserService, cmd app.CreateUser, out *app.UserCreated) func(context.Context) error {
	return func(ctx context.Context) error {
		got, err := svc.Create(ctx, cmd)
		if out != nil {
			*out = got
		}
		return err
	}
}

func deleteUser(svc *app.UserService, tenant, id string) func(context.Context) error {
	return func(ctx context.Context) error {
		return svc.Delete(ctx, app.DeleteUser{Tenant: tenant, UserUUID: id, CorrelationID: "corr-2", RequestID: "req-2"})
	}
}

func TestScenarioCreateUser(t *testing.T) {
	keyed := app.UserIDForKey("acme", "key-1")
	t.Run("reserves the externalId, then records the user", func(t *testing.T) {
		sc, svc := userScenario(t)
		var out app.UserCreated
		envs := sc.When(createUser(svc, createUserCmd("key-1", "customer-42", "hash-1"), &out)).
			Then(reservedFor(keyed, "hash-1"), userCreated(keyed, "customer-42", "hash-1"))
		if envs[0].Stream != reservationOf("customer-42") || envs[1].Stream != user.StreamName(keyed) {
			t.Fatalf("streams %s, %s", envs[0].Stream, envs[1].Stream)
		}
		for _, env := range envs {
			if env.Tenant != "acme" || env.CausationID != "req-1" || env.CorrelationID != "corr-1" || env.Actor != "client:acme" {
				t.Fatalf("envelope %+v", env)
			}
		}
		if out != (app.UserCreated{UserUUID: keyed, ExternalID: "customer-42", CreatedAt: created}) {
			t.Fatalf("created %+v", out)
		}
	})
	t.Run("without a key the user gets a new id", func(t *testing.T) {
		sc, svc := userScenario(t)
		out, err := svc.Create(context.Background(), createUserCmd("", "customer-42", "hash-1"))
		if err != nil {
			t.Fatal(err)
		}
		if out.UserUUID == "" || out.UserUUID == keyed || out.Replayed {
			t.Fatalf("created %+v", out)
		}
		users := sc.Store().Events(user.StreamName(out.UserUUID))
		reservations := sc.Store().Events(reservationOf("customer-42"))
		if len(users) != 1 || len(reservations) != 1 || users[0].Type != user.EventCreated ||
			reservations[0].Type != user.EventExternalIDReserved {
			t.Fatalf("stored %+v and %+v", users, reservations)
		}
	})
	t.Run("an externalId of a live user is USER_EXISTS and records nothing", func(t *testing.T) {
		sc, svc := userScenario(t)
		sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
			Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0")).
			When(createUser(svc, createUserCmd("key-1", "customer-42", "hash-1"), nil)).
			ThenError(user.ErrExternalIDTaken)
	})
	t.Run("a retry with the key replays the first answer", func(t *testing.T) {
		sc, svc := userScenario(t)
		var out app.UserCreated
		sc.Given(reservationOf("customer-42"), reservedFor(keyed, "hash-1")).
			Given(user.StreamName(keyed), userCreated(keyed, "customer-42", "hash-1")).
			When(createUser(svc, createUserCmd("key-1", "customer-42", "hash-1"), &out)).
			Then()
		if out != (app.UserCreated{UserUUID: keyed, ExternalID: "customer-42", CreatedAt: created, Replayed: true}) {
			t.Fatalf("replayed %+v", out)
		}
	})
	t.Run("the key with another externalId is refused before anything is reserved", func(t *testing.T) {
		sc, svc := userScenario(t)
		sc.Given(reservationOf("customer-42"), reservedFor(keyed, "hash-1")).
			Given(user.StreamName(keyed), userCreated(keyed, "customer-42", "hash-1")).
			When(createUser(svc, createUserCmd("key-1", "customer-43", "hash-2"), nil)).
			ThenError(app.ErrIdempotencyKeyReused)
	})
	t.Run("an invalid externalId is a field error", func(t *testing.T) {
		sc, svc := userScenario(t)
		err := sc.When(createUser(svc, createUserCmd("", "", "hash-1"), nil)).ThenError(domain.ErrInvalid)
		if fields := domain.FieldErrors(err); len(fields) != 1 || fields[0].Field != user.FieldExternalID {
			t.Fatalf("fields %v", fields)
		}
	})
	t.Run("a reservation whose user was never stored is completed, and then it is USER_EXISTS", func(t *testing.T) {
		// Its creator stopped between the two appends; the reservation says who and when.
		sc, svc := userScenario(t)
		var err error
		sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
			When(func(ctx context.Context) error {
				err = createUser(svc, createUserCmd("", "customer-42", "hash-1"), nil)(ctx)
				return nil
			}).
			Then(userCreated(otherUser, "customer-42", "hash-0"))
		if !errors.Is(err, user.ErrExternalIDTaken) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("the stopped creator's retry then finds its user", func(t *testing.T) {
		sc, svc := userScenario(t)
		var out app.UserCreated
		sc.Given(reservationOf("customer-42"), reservedFor(keyed, "hash-1")).
			Given(user.StreamName(keyed), userCreated(keyed, "customer-42", "hash-1")).
			When(createUser(svc, createUserCmd("key-1", "customer-42", "hash-1"), &out)).
			Then()
		if out.UserUUID != keyed || !out.Replayed {
			t.Fatalf("out %+v", out)
		}
	})
	t.Run("a reservation of a deleted user is released and taken", func(t *testing.T) {
		// The delete stopped before its release.
		sc, svc := userScenario(t)
		sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
			Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0"), user.Deleted{DeletedAt: created}).
			When(createUser(svc, createUserCmd("key-1", "customer-42", "hash-1"), nil)).
			Then(user.ExternalIDReleased{ReleasedAt: created, Personal: &user.ReleasedBy{UserUUID: otherUser}}, reservedFor(keyed, "hash-1"),
				userCreated(keyed, "customer-42", "hash-1"))
	})
	t.Run("a reservation held by a user with another externalId is released and taken", func(t *testing.T) {
		// Two requests with one Idempotency-Key and two externalIds raced; the loser's
		// reservation names the winner's user.
		sc, svc := userScenario(t)
		sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
			Given(user.StreamName(otherUser), userCreated(otherUser, "customer-7", "hash-0")).
			When(createUser(svc, createUserCmd("key-1", "customer-42", "hash-1"), nil)).
			Then(user.ExternalIDReleased{ReleasedAt: created, Personal: &user.ReleasedBy{UserUUID: otherUser}}, reservedFor(keyed, "hash-1"),
				userCreated(keyed, "customer-42", "hash-1"))
	})
	t.Run("an externalId of another client is free", func(t *testing.T) {
		sc, svc := userScenario(t)
		other := user.ReservationStreamName(user.ExternalIDKey(userSecret, "globex", "customer-42"))
		sc.Given(other, user.ExternalIDReserved{ClientID: "globex", ReservedAt: created, Personal: &user.ReservedBy{UserUUID: otherUser, RequestHash: "h"}}).
			When(createUser(svc, createUserCmd("key-1", "customer-42", "hash-1"), nil)).
			Then(reservedFor(keyed, "hash-1"), userCreated(keyed, "customer-42", "hash-1"))
	})
}

func TestScenarioDeleteUser(t *testing.T) {
	given := func(sc *commandtest.Scenario) *commandtest.Scenario {
		return sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
			Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0"))
	}
	later := created
	t.Run("records the deletion and releases the externalId", func(t *testing.T) {
		sc, svc := userScenario(t)
		envs := given(sc).When(deleteUser(svc, "acme", otherUser)).
			Then(user.Deleted{DeletedAt: later}, user.ExternalIDReleased{ReleasedAt: later, Personal: &user.ReleasedBy{UserUUID: otherUser}})
		if envs[1].Stream != reservationOf("customer-42") || envs[0].CausationID != "req-2" {
			t.Fatalf("envelopes %+v", envs)
		}
	})
	t.Run("another client's user is not found", func(t *testing.T) {
		sc, svc := userScenario(t)
		given(sc).When(deleteUser(svc, "globex", otherUser)).ThenError(app.ErrUserNotFound)
	})
	t.Run("an unknown or malformed id is not found", func(t *testing.T) {
		sc, svc := userScenario(t)
		given(sc).When(deleteUser(svc, "acme", "0190f4a2-1111-7b3a-9a51-2f1e3d4c5b6a")).ThenError(app.ErrUserNotFound)
		sc2, svc2 := userScenario(t)
		sc2.When(deleteUser(svc2, "acme", "0190F4A2-0000-7B3A-9A51-2F1E3D4C5B6A")).ThenError(app.ErrUserNotFound)
	})
	t.Run("a second delete records nothing", func(t *testing.T) {
		sc, svc := userScenario(t)
		sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0"),
			user.ExternalIDReleased{ReleasedAt: later, Personal: &user.ReleasedBy{UserUUID: otherUser}}).
			Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0"), user.Deleted{DeletedAt: later}).
			When(deleteUser(svc, "acme", otherUser)).Then()
	})
	t.Run("a delete that stopped before its release is finished by the retry", func(t *testing.T) {
		sc, svc := userScenario(t)
		given(sc)
		sc.Given(user.StreamName(otherUser), user.Deleted{DeletedAt: later}).
			When(deleteUser(svc, "acme", otherUser)).
			Then(user.ExternalIDReleased{ReleasedAt: later, Personal: &user.ReleasedBy{UserUUID: otherUser}})
	})
	t.Run("the externalId can be used again after the delete", func(t *testing.T) {
		sc, svc := userScenario(t)
		given(sc).Given(user.StreamName(otherUser), user.Deleted{DeletedAt: later}).
			Given(reservationOf("customer-42"), user.ExternalIDReleased{ReleasedAt: later, Personal: &user.ReleasedBy{UserUUID: otherUser}})
		keyed := app.UserIDForKey("acme", "key-1")
		sc.When(createUser(svc, createUserCmd("key-1", "customer-42", "hash-1"), nil)).
			Then(reservedFor(keyed, "hash-1"), userCreated(keyed, "customer-42", "hash-1"))
	})
}

// TestConcurrentCreatesWithOneExternalID: however many requests race for one externalId, exactly
// one user is created and every other request is USER_EXISTS, on each event store.
func TestConcurrentCreatesWithOneExternalID(t *testing.T) {
	for _, st := range []struct {
		name string
		open func(t *testing.T) repository.Store
	}{
		{"memstore", func(*testing.T) repository.Store { return memstore.New() }},
		{"sqlite", func(t *testing.T) repository.Store {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			for _, keyed := range []bool{false, true} {
				t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
					raceCreates(t, st.open(t), keyed)
				})
			}
		})
	}
}

// raceCreates runs n creates of one externalId at once. Keyed, they share an Idempotency-Key and
// a body: then every one answers with the same user.
func raceCreates(t *testing.T, store repository.Store, keyed bool) {
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	// Services of their own, as on separate replicas: nothing is shared but the store.
	const n = 8
	var wg sync.WaitGroup
	outs := make([]app.UserCreated, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		svc := app.NewUserService(repository.New(store, reg, user.Kind), repository.New(store, reg, user.ReservationKind),
			userSecret, app.Erasure{Keys: keystore.NewMemory(), Collections: userCollections{},
				Ends:     repository.New(store, reg, collection.Kind),
				Consents: userConsents{}, Revokes: repository.New(store, reg, consent.Kind)}, nil)
		cmd := createUserCmd("", "customer-42", fmt.Sprintf("hash-%d", i))
		if keyed {
			cmd.IdempotencyKey, cmd.RequestHash = "key-1", "hash-1"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs[i], errs[i] = svc.Create(context.Background(), cmd)
		}()
	}
	close(start)
	wg.Wait()

	winners, winner := 0, ""
	for i := range n {
		switch {
		case errs[i] == nil:
			winners++
			if winner != "" && outs[i].UserUUID != winner {
				t.Fatalf("two users created: %s and %s", winner, outs[i].UserUUID)
			}
			winner = outs[i].UserUUID
		case !keyed && errors.Is(errs[i], user.ErrExternalIDTaken):
		default:
			t.Fatalf("create %d: %v", i, errs[i])
		}
	}
	if want := map[bool]int{false: 1, true: n}[keyed]; winners != want {
		t.Fatalf("%d creates succeeded, want %d", winners, want)
	}
	all, err := store.(interface {
		ReadAll(context.Context, uint64, int) ([]eventschema.Envelope, error)
	}).ReadAll(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, env := range all {
		counts[env.Type]++
		if env.Type == user.EventCreated && env.Stream != user.StreamName(winner) {
			t.Fatalf("a user other than the winner %s was stored: %s", winner, env.Stream)
		}
	}
	if counts[user.EventCreated] != 1 || counts[user.EventExternalIDReserved] != 1 || len(all) != 2 {
		t.Fatalf("stored %v", counts)
	}
}
