package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/platform/keystore"
)

// The cancellation commands: POST /cancellations (one document per insurance, one live
// cancellation per insurance, Idempotency-Key as elsewhere) and DELETE /cancellations/{id}.

const (
	cancelCollection = "0197c0a1-2222-7e5f-8a9b-000000000002"
	cancelUser       = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
)

var cancelAt = testNow.Truncate(time.Millisecond)

const docSHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func strp(s string) *string { return &s }

// completedInsurances is acme's completed insurance collection for cancelUser with i1 and i2.
func completedInsurances(status collection.Status) []domain.Event {
	return []domain.Event{
		collection.Started{CollectionID: cancelCollection, ClientID: "acme", Company: "se-demo-insurer", Product: collection.ProductInsurance,
			LoginMethod: mockEID, APIVersion: "2026-04-01", UserUUID: cancelUser, StartedAt: testNow,
			Personal: &collection.StartedPerson{PersonalNumber: "191212121212", RequestHash: "h"}},
		collection.StatusChanged{From: collection.StatusRunning, To: collection.StatusCollecting, ChangedAt: testNow},
		collection.InsurancesCollected{InsuranceCount: 2, CollectedAt: testNow, Personal: &collection.InsuranceRecords{
			Insurances:  []collection.Insurance{{ID: "i1", InsuranceType: "HOME", InsuranceNumber: strp("HEM-1")}, {ID: "i2"}},
			HolderNames: map[string]string{"i1": "Tolvan Tolvansson", "i2": "Tolvan Tolvansson"}}},
		collection.StatusChanged{From: collection.StatusCollecting, To: status, ChangedAt: testNow},
	}
}

var signingConfigured = client.SigningConfigured{TemplateVersion: 3, Template: "T", TemplateHash: "sha256:t", ConfiguredAt: testNow,
	Personal: &client.SigningSecret{ProviderKey: "provider-key-0123456789"}}

func cancellationScenario(t *testing.T, configured bool) (*commandtest.Scenario, *app.CancellationService, *keystore.Memory) {
	sc := commandtest.New(t, testNow)
	keys := keystore.NewMemory()
	sc.Given(client.StreamName("acme"), client.Registered{ClientID: "acme", Name: "Acme", RegisteredAt: testNow})
	if configured {
		sc.Given(client.StreamName("acme"), signingConfigured)
	}
	sc.Given(collection.StreamName(cancelCollection), completedInsurances(collection.StatusCompleted)...)
	svc := app.NewCancellationService(commandtest.Repository(sc, cancellation.Kind), commandtest.Repository(sc, collection.Kind),
		commandtest.Repository(sc, client.Kind), keystore.Erasures{Keys: keys}, sc.Clock())
	return sc, svc, keys
}

func cancelCmd(key string, insurances ...string) app.RequestCancellations {
	return app.RequestCancellations{Tenant: "acme", IdempotencyKey: key, CollectionID: cancelCollection, InsuranceIDs: insurances,
		DeliveryMethod: cancellation.DeliveryEmail, Email: "tolvan@example.se", RequestHash: "hash-1", RequestID: "req-1"}
}

func requestedEvent(docID, insurance string, generation int, key string) cancellation.Requested {
	r := cancellation.Requested{DocumentID: docID, ClientID: "acme", CollectionID: cancelCollection, UserUUID: cancelUser,
		Company: "se-demo-insurer", InsuranceID: insurance, Generation: generation, DeliveryMethod: cancellation.DeliveryEmail,
		TemplateVersion: 3, CancellationDate: cancelAt.Format(time.DateOnly), RequestedAt: cancelAt,
		Personal: &cancellation.Requester{HolderName: "Tolvan Tolvansson", PersonalNumber: "191212121212",
			Email: "tolvan@example.se", IdempotencyKey: key, RequestHash: "hash-1"}}
	if insurance == "i1" {
		r.InsuranceType, r.Personal.InsuranceNumber = "HOME", "HEM-1"
	}
	return r
}

func request(svc *app.CancellationService, cmd app.RequestCancellations, out *app.CancellationsRequested) func(context.Context) error {
	return func(ctx context.Context) error {
		got, err := svc.Request(ctx, cmd)
		if out != nil {
			*out = got
		}
		return err
	}
}

func TestScenarioRequestCancellations(t *testing.T) {
	d1, d2 := app.DocumentID("acme", cancelCollection, "i1", 0), app.DocumentID("acme", cancelCollection, "i2", 0)
	t.Run("one document per insurance, each PREPARATION, on its derived stream", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		var out app.CancellationsRequested
		envs := sc.When(request(svc, cancelCmd("k1", "i1", "i2"), &out)).
			Then(requestedEvent(d1, "i1", 0, "k1"), requestedEvent(d2, "i2", 0, "k1"))
		if envs[0].Stream != cancellation.StreamName(d1) || envs[1].Stream != cancellation.StreamName(d2) {
			t.Fatalf("streams %s, %s", envs[0].Stream, envs[1].Stream)
		}
		if len(out.Cancellations) != 2 || out.Cancellations[0].DocumentID != d1 || out.Cancellations[1].InsuranceID != "i2" ||
			out.Cancellations[1].Status != cancellation.StatusPreparation || out.Replayed {
			t.Fatalf("answer %+v", out)
		}
	})
	t.Run("a retry with the same key is answered as the first, and appends nothing", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(cancellation.StreamName(d1), requestedEvent(d1, "i1", 0, "k1"))
		var out app.CancellationsRequested
		sc.When(request(svc, cancelCmd("k1", "i1"), &out)).Then()
		if !out.Replayed || len(out.Cancellations) != 1 || out.Cancellations[0].DocumentID != d1 {
			t.Fatalf("answer %+v", out)
		}
	})
	t.Run("a retry completes a request that stopped halfway", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(cancellation.StreamName(d1), requestedEvent(d1, "i1", 0, "k1"))
		var out app.CancellationsRequested
		sc.When(request(svc, cancelCmd("k1", "i1", "i2"), &out)).Then(requestedEvent(d2, "i2", 0, "k1"))
		if out.Replayed || len(out.Cancellations) != 2 || out.Cancellations[0].DocumentID != d1 {
			t.Fatalf("answer %+v", out)
		}
	})
	t.Run("the same key with another request is refused", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(cancellation.StreamName(d1), requestedEvent(d1, "i1", 0, "k1"))
		cmd := cancelCmd("k1", "i1")
		cmd.RequestHash = "hash-2"
		sc.When(request(svc, cmd, nil)).ThenError(app.ErrIdempotencyKeyReused)
	})
	t.Run("an insurance with a live cancellation: 409, nothing recorded", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(cancellation.StreamName(d2), requestedEvent(d2, "i2", 0, "other-key"))
		err := sc.When(request(svc, cancelCmd("k2", "i1", "i2"), nil)).ThenError(domain.ErrConflict)
		var exists *app.CancellationExistsError
		if !errors.As(err, &exists) || exists.InsuranceID != "i2" || exists.DocumentID != d2 {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("after a cancellation ended, the next generation", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(cancellation.StreamName(d1), requestedEvent(d1, "i1", 0, ""), cancellation.Canceled{At: testNow, Reason: cancellation.CanceledByClient})
		next := app.DocumentID("acme", cancelCollection, "i1", 1)
		sc.When(request(svc, cancelCmd("", "i1"), nil)).Then(requestedEvent(next, "i1", 1, ""))
	})
	t.Run("a concurrent request that took the generation first: the loser withdraws what it created", func(t *testing.T) {
		sc, _, keys := cancellationScenario(t, true)
		// The store answers the loser's probe of i2 as empty, then holds the winner's event.
		racing := &racingCancellations{CancellationRepository: commandtest.Repository(sc, cancellation.Kind), insurance: d2,
			winner: func() {
				sc.Given(cancellation.StreamName(d2), requestedEvent(d2, "i2", 0, "winner"))
			}}
		svc := app.NewCancellationService(racing, commandtest.Repository(sc, collection.Kind), commandtest.Repository(sc, client.Kind),
			keystore.Erasures{Keys: keys}, sc.Clock())
		envs, err := sc.Store().ReadAll(context.Background(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Request(context.Background(), cancelCmd("k3", "i1", "i2")); !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("error %v", err)
		}
		after, err := sc.Store().ReadAll(context.Background(), envs[len(envs)-1].Position, 0)
		if err != nil {
			t.Fatal(err)
		}
		// i1's document, the winner's i2 (given), then i1's withdrawal.
		types := []string{}
		for _, e := range after {
			types = append(types, e.Type)
		}
		if len(types) != 3 || types[0] != cancellation.EventRequested || types[2] != cancellation.EventCanceled {
			t.Fatalf("appended %v", types)
		}
	})
	t.Run("appended in the insurances' sorted order, answered in the request's", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		var out app.CancellationsRequested
		sc.When(request(svc, cancelCmd("", "i2", "i1"), &out)).Then(requestedEvent(d1, "i1", 0, ""), requestedEvent(d2, "i2", 0, ""))
		if out.Cancellations[0].InsuranceID != "i2" || out.Cancellations[0].DocumentID != d2 || out.Cancellations[1].DocumentID != d1 {
			t.Fatalf("answer %+v", out)
		}
	})
	t.Run("422 after MaxCancellationsPerInsurance", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		for n := 0; n < app.MaxCancellationsPerInsurance; n++ {
			id := app.DocumentID("acme", cancelCollection, "i1", n)
			sc.Given(cancellation.StreamName(id), requestedEvent(id, "i1", n, ""), cancellation.Canceled{At: testNow, Reason: cancellation.CanceledByClient})
		}
		sc.When(request(svc, cancelCmd("", "i1"), nil)).ThenError(app.ErrTooManyCancellations)
	})
	for _, tc := range []struct {
		name  string
		cmd   func() app.RequestCancellations
		field string
	}{
		{"an e-mail address with control characters", func() app.RequestCancellations {
			c := cancelCmd("", "i1")
			c.Email = "\u0000\u001b[31m@evil.se"
			return c
		}, "email"},
		{"no insurance", func() app.RequestCancellations { return cancelCmd("") }, "insuranceIds"},
		{"a duplicate", func() app.RequestCancellations { return cancelCmd("", "i1", "i1") }, "insuranceIds[1]"},
		{"a collection id that is no UUID", func() app.RequestCancellations {
			c := cancelCmd("", "i1")
			c.CollectionID = "c1"
			return c
		}, "collectionId"},
		{"SMS without a number", func() app.RequestCancellations {
			c := cancelCmd("", "i1")
			c.DeliveryMethod = cancellation.DeliverySMS
			return c
		}, "phoneNumber"},
		{"too many insurances", func() app.RequestCancellations {
			ids := make([]string, app.MaxInsurancesPerCancellation+1)
			for i := range ids {
				ids[i] = string(rune('a'+i%26)) + string(rune('a'+i/26))
			}
			return cancelCmd("", ids...)
		}, "insuranceIds"},
	} {
		t.Run("400: "+tc.name, func(t *testing.T) {
			sc, svc, _ := cancellationScenario(t, true)
			err := sc.When(request(svc, tc.cmd(), nil)).ThenError(domain.ErrInvalid)
			if fe := domain.FieldErrors(err); len(fe) != 1 || fe[0].Field != tc.field {
				t.Fatalf("field errors %v", fe)
			}
		})
	}
	t.Run("422: no signing configuration", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, false)
		sc.When(request(svc, cancelCmd("", "i1"), nil)).ThenError(app.ErrSigningNotConfigured)
	})
	t.Run("422: an insurance the collection lacks, named", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		err := sc.When(request(svc, cancelCmd("", "i1", "i9"), nil)).ThenError(cancellation.ErrUnknownInsurance)
		var unknown *app.UnknownInsuranceError
		if !errors.As(err, &unknown) || unknown.InsuranceID != "i9" {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("422: another client's collection, as one that does not exist", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(client.StreamName("other"), client.Registered{ClientID: "other", Name: "Other", RegisteredAt: testNow}, signingConfigured)
		cmd := cancelCmd("", "i1")
		cmd.Tenant = "other"
		sc.When(request(svc, cmd, nil)).ThenError(cancellation.ErrNotCancellable)
		cmd.CollectionID = "0197c0a1-9999-7e5f-8a9b-000000000009"
		sc.When(request(svc, cmd, nil)).ThenError(cancellation.ErrNotCancellable)
	})
	t.Run("422: the collection's user was erased", func(t *testing.T) {
		sc, svc, keys := cancellationScenario(t, true)
		withKeys(t, keys, "user-"+cancelUser)
		if err := keys.Destroy(context.Background(), "user-"+cancelUser); err != nil {
			t.Fatal(err)
		}
		sc.When(request(svc, cancelCmd("", "i1"), nil)).ThenError(cancellation.ErrHolderErased)
	})
	t.Run("403: a session of another user", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		cmd := cancelCmd("", "i1")
		cmd.SessionUser = "6f1c2a9e-9999-4e5f-8a7b-9c0d1e2f3a4b"
		sc.When(request(svc, cmd, nil)).ThenError(app.ErrCancellationOfOtherUser)
		cmd.SessionUser = cancelUser
		sc.When(request(svc, cmd, nil)).Then(requestedEvent(d1, "i1", 0, ""))
	})
}

// racingCancellations lets a concurrent writer take one document id between the service's
// probe (which finds it free) and its append.
type racingCancellations struct {
	app.CancellationRepository
	insurance string
	winner    func()
	raced     bool
}

func (r *racingCancellations) Load(ctx context.Context, id string) (*cancellation.Cancellation, error) {
	c, err := r.CancellationRepository.Load(ctx, id)
	if err == nil && id == r.insurance && !r.raced {
		r.raced = true
		r.winner()
	}
	return c, err
}

func TestScenarioCancelCancellation(t *testing.T) {
	d1 := app.DocumentID("acme", cancelCollection, "i1", 0)
	cmd := app.CancelCancellation{Tenant: "acme", DocumentID: d1}
	cancel := func(svc *app.CancellationService, cmd app.CancelCancellation) func(context.Context) error {
		return func(ctx context.Context) error { _, err := svc.Cancel(ctx, cmd); return err }
	}
	t.Run("a pending one is withdrawn", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(cancellation.StreamName(d1), requestedEvent(d1, "i1", 0, ""),
			cancellation.Sent{At: testNow, Deadline: testNow.Add(time.Hour), ProcessID: "p", DocumentSHA256: docSHA, DocumentSize: 1})
		sc.When(cancel(svc, cmd)).Then(cancellation.Canceled{At: testNow.UTC(), Reason: cancellation.CanceledByClient})
	})
	t.Run("409 once final", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(cancellation.StreamName(d1), requestedEvent(d1, "i1", 0, ""), cancellation.Canceled{At: testNow, Reason: cancellation.CanceledByClient})
		sc.When(cancel(svc, cmd)).ThenError(cancellation.ErrFinal)
	})
	t.Run("404 for another client's, or none", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(cancellation.StreamName(d1), requestedEvent(d1, "i1", 0, ""))
		other := cmd
		other.Tenant = "other"
		sc.When(cancel(svc, other)).ThenError(app.ErrCancellationNotFound)
		none := cmd
		none.DocumentID = "0197c0a1-9999-7e5f-8a9b-000000000009"
		sc.When(cancel(svc, none)).ThenError(app.ErrCancellationNotFound)
	})
	t.Run("403 for another user's session", func(t *testing.T) {
		sc, svc, _ := cancellationScenario(t, true)
		sc.Given(cancellation.StreamName(d1), requestedEvent(d1, "i1", 0, ""))
		s := cmd
		s.SessionUser = "6f1c2a9e-9999-4e5f-8a7b-9c0d1e2f3a4b"
		sc.When(cancel(svc, s)).ThenError(app.ErrCancellationOfOtherUser)
	})
}

func TestScenarioProviderCallback(t *testing.T) {
	d1 := app.DocumentID("acme", cancelCollection, "i1", 0)
	sc, svc, _ := cancellationScenario(t, true)
	sc.Given(cancellation.StreamName(d1), requestedEvent(d1, "i1", 0, ""),
		cancellation.Sent{At: testNow, Deadline: testNow.Add(time.Hour), ProcessID: "p", DocumentSHA256: docSHA, DocumentSize: 1})
	note := func(tenant, eventID string) func(context.Context) error {
		return func(ctx context.Context) error {
			return svc.NoteProviderCallback(ctx, tenant, app.ProviderCallback{EventID: eventID, Reference: d1}, "corr")
		}
	}
	sc.When(note("acme", "e1")).Then(cancellation.ProviderNotified{At: testNow.UTC(), EventID: "e1"})
	sc.When(note("acme", "e1")).Then() // replayed
	sc.When(note("other", "e2")).ThenError(app.ErrCancellationNotFound)
	if key, ok, err := svc.SigningKey(context.Background(), "acme"); err != nil || !ok || key != "provider-key-0123456789" {
		t.Fatalf("signing key %q %v %v", key, ok, err)
	}
}

// userCancellations lists acme's users' cancellations, as the read model would.
type userCancellations map[string][]string

func (u userCancellations) UserCancellationIDs(_ context.Context, tenant, userUUID string) ([]string, error) {
	if tenant != "acme" {
		return nil, nil
	}
	return u[userUUID], nil
}

// TestScenarioDeleteWithdrawsCancellations: a user's erasure withdraws the user's cancellations
// that are not final (USER_DELETED), before its key is destroyed; a final one, and one the read
// model wrongly lists of another user, stay as they are.
func TestScenarioDeleteWithdrawsCancellations(t *testing.T) {
	sc := commandtest.New(t, testNow)
	keys := keystore.NewMemory()
	pending, closed, foreign := app.DocumentID("acme", cancelCollection, "i1", 0), app.DocumentID("acme", cancelCollection, "i2", 0),
		app.DocumentID("acme", cancelCollection, "i9", 0)
	svc := app.NewUserService(commandtest.Repository(sc, user.Kind), commandtest.Repository(sc, user.ReservationKind), userSecret,
		app.Erasure{Keys: keys, Collections: userCollections{}, Ends: commandtest.Repository(sc, collection.Kind),
			Consents: userConsents{}, Revokes: commandtest.Repository(sc, consent.Kind),
			Cancellations: userCancellations{otherUser: {pending, closed, foreign}}, Withdraws: commandtest.Repository(sc, cancellation.Kind)},
		sc.Clock(), app.WithHoldTokens(holdToken))
	withKeys(t, keys, domain.UserSubject(otherUser))
	mine := func(docID, insurance string) cancellation.Requested {
		r := requestedEvent(docID, insurance, 0, "")
		r.UserUUID = otherUser
		return r
	}
	sc.Given(reservationOf("customer-42"), reservedFor(otherUser, "hash-0")).
		Given(user.StreamName(otherUser), userCreated(otherUser, "customer-42", "hash-0")).
		Given(cancellation.StreamName(pending), mine(pending, "i1")).
		Given(cancellation.StreamName(closed), mine(closed, "i2"),
			cancellation.Sent{At: testNow, Deadline: testNow.Add(time.Hour), ProcessID: "p", DocumentSHA256: docSHA, DocumentSize: 1},
			cancellation.Signed{SignedAt: testNow}).
		Given(cancellation.StreamName(foreign), requestedEvent(foreign, "i9", 0, ""))
	envs := sc.When(deleteUser(svc, "acme", otherUser)).
		Then(user.Deleted{DeletedAt: created}, user.ExternalIDReleased{ReleasedAt: created, Personal: &user.ReleasedBy{UserUUID: otherUser}},
			cancellation.Canceled{At: created, Reason: cancellation.CanceledUserDeleted})
	if envs[2].Stream != cancellation.StreamName(pending) {
		t.Fatalf("withdrew %s", envs[2].Stream)
	}
}
