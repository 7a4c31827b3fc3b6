package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
)

// The fingerprint of a request with an Idempotency-Key is personal data: it is stored sealed
// with the person's data and erased with it. A retry after the erasure is then a key reused
// (IDEMPOTENCY_KEY_REUSED), whatever its body holds, so that no answer tells a right guess of
// the erased person's number or externalId from a wrong one. A request that an older build
// recorded is recognised by its fingerprint in the scheme before.

// erasedStart is the started event of a keyed collection as it reads after its subject's
// erasure: without its personal part, which held the fingerprint.
func erasedStart(key string) collection.Started {
	s := startedWithKey(key)
	s.Personal = nil
	return s
}

func TestScenarioStartRetryAfterErasure(t *testing.T) {
	start := func(svc *app.CollectionService, cmd app.StartCollection) func(context.Context) error {
		return func(ctx context.Context) error { _, err := svc.Start(ctx, cmd); return err }
	}
	stream := collection.StreamName(app.CollectionIDForKey("acme", "key-1"))
	right, wrong := startCmd(), startCmd()
	right.IdempotencyKey, wrong.IdempotencyKey = "key-1", "key-1"
	wrong.RequestHash = "hash-of-another-personal-number"
	for name, cmd := range map[string]app.StartCollection{"the same request": right, "another request": wrong} {
		t.Run(name+" is a key reused", func(t *testing.T) {
			sc, svc := scenarioService(t)
			sc.Given(stream, erasedStart("key-1")).When(start(svc, cmd)).ThenError(app.ErrIdempotencyKeyReused)
		})
	}
	t.Run("a request an older build recorded replays by its legacy fingerprint", func(t *testing.T) {
		sc, svc := scenarioService(t)
		retry := right
		retry.RequestHash, retry.LegacyRequestHash = "hash-in-the-new-scheme", right.RequestHash
		sc.Given(stream, startedWithKey("key-1")).When(start(svc, retry)).Then()
		retry.LegacyRequestHash = "another-legacy-hash"
		sc.When(start(svc, retry)).ThenError(app.ErrIdempotencyKeyReused)
	})
}

func TestScenarioCreateUserRetryAfterErasure(t *testing.T) {
	keyed := app.UserIDForKey("acme", "key-1")
	erased := userCreated(keyed, "customer-42", "hash-1")
	erased.Personal = nil
	create := func(svc *app.UserService, cmd app.CreateUser) func(context.Context) error {
		return func(ctx context.Context) error { _, err := svc.Create(ctx, cmd); return err }
	}
	for name, cmd := range map[string]app.CreateUser{
		"the same externalId":    createUserCmd("key-1", "customer-42", "hash-1"),
		"another externalId":     createUserCmd("key-1", "customer-43", "hash-2"),
		"an empty fingerprint":   createUserCmd("key-1", "customer-42", ""),
		"a fingerprint of other": createUserCmd("key-1", "customer-42", "hash-2"),
	} {
		t.Run(name+" is a key reused", func(t *testing.T) {
			sc, svc := userScenario(t)
			sc.Given(user.StreamName(keyed), erased, user.Deleted{DeletedAt: created}).
				When(create(svc, cmd)).ThenError(app.ErrIdempotencyKeyReused)
		})
	}
	t.Run("a user an older build created replays by its legacy fingerprint", func(t *testing.T) {
		sc, svc := userScenario(t)
		cmd := createUserCmd("key-1", "customer-42", "hash-in-the-new-scheme")
		cmd.LegacyRequestHash = "hash-1"
		sc.Given(reservationOf("customer-42"), reservedFor(keyed, "hash-1")).
			Given(user.StreamName(keyed), userCreated(keyed, "customer-42", "hash-1")).
			When(create(svc, cmd)).Then()
	})
}

// TestScenarioReservationOfAnErasedHolder: a reservation whose holder was erased before its
// release (its events no longer say who it was) is released in nobody's name and taken.
func TestScenarioReservationOfAnErasedHolder(t *testing.T) {
	keyed := app.UserIDForKey("acme", "key-1")
	erasedHolder := reservedFor(otherUser, "hash-0")
	erasedHolder.Personal = nil
	sc, svc := userScenario(t)
	sc.Given(reservationOf("customer-42"), erasedHolder).
		When(func(ctx context.Context) error {
			_, err := svc.Create(ctx, createUserCmd("key-1", "customer-42", "hash-1"))
			return err
		}).
		Then(user.ExternalIDReleased{ReleasedAt: created}, reservedFor(keyed, "hash-1"), userCreated(keyed, "customer-42", "hash-1"))
}

// TestReservationNamesNoUser: with the repositories sealing as the service runs them, an
// externalId's reservation stream, held by one user and then by the next, never names either
// user: not in plain text, and not as the subject its holds are sealed under (a sealed form
// names its subject in plain text). Erasing the first user destroys its hold's key, so that
// what is left says only that some user held the externalId; the next user's hold still reads.
func TestReservationNamesNoUser(t *testing.T) {
	ctx := context.Background()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	keys := keystore.NewMemory()
	reservations := repository.New(store, reg, user.ReservationKind, repository.WithKeys(keys))
	svc := app.NewUserService(repository.New(store, reg, user.Kind, repository.WithKeys(keys)), reservations, userSecret,
		app.Erasure{Keys: keys, Collections: userCollections{}, Ends: repository.New(store, reg, collection.Kind, repository.WithKeys(keys)),
			Consents: userConsents{}, Revokes: repository.New(store, reg, consent.Kind, repository.WithKeys(keys))}, nil)
	first, err := svc.Create(ctx, app.CreateUser{Tenant: "acme", ExternalID: "customer-42", RequestHash: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Delete(ctx, app.DeleteUser{Tenant: "acme", UserUUID: first.UserUUID}); err != nil {
		t.Fatal(err)
	}
	next, err := svc.Create(ctx, app.CreateUser{Tenant: "acme", ExternalID: "customer-42", RequestHash: "h2"})
	if err != nil {
		t.Fatal(err)
	}
	key := user.ExternalIDKey(userSecret, "acme", "customer-42")
	envs, err := store.ReadStream(ctx, user.ReservationStreamName(key), 0, 0)
	if err != nil || len(envs) != 3 {
		t.Fatalf("reservation stream = %d events, %v", len(envs), err)
	}
	holds := map[string]bool{}
	for _, env := range envs {
		for _, id := range []string{first.UserUUID, next.UserUUID} {
			if strings.Contains(string(env.Payload), id) {
				t.Errorf("%s names user %s: %s", env.Type, id, env.Payload)
			}
		}
		subject, sealed, _ := eventschema.InspectPersonal(env.Payload)
		if !sealed || !strings.HasPrefix(subject, "holder-") {
			t.Errorf("%s is sealed under %q (sealed %v)", env.Type, subject, sealed)
		}
		holds[subject] = true
	}
	if len(holds) != 2 {
		t.Fatalf("holds %v: want the first user's and the next one's", holds)
	}
	r, err := reservations.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if holder, held := r.Holder(); !held || holder.UserUUID != next.UserUUID {
		t.Fatalf("holder %+v held %v", holder, held)
	}
	erased := 0
	for subject := range holds {
		if _, err := keys.Get(ctx, subject); errors.Is(err, eventschema.ErrSubjectErased) {
			erased++
		}
	}
	if erased != 1 {
		t.Fatalf("%d of the holds' keys erased, want the first user's", erased)
	}
}
