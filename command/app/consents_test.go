package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/platform/keystore"
)

// The consent commands: POST /consents (with Idempotency-Key as collections and users have it)
// and DELETE /consents/{consentId}, and the revocation of a deleted user's consents.

const (
	consentUser    = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	consentOther   = "6f1c2a9e-9999-4e5f-8a7b-9c0d1e2f3a4b" // another user of acme
	consentID      = "0197c0a1-1111-7e5f-8a9b-000000000001"
	mockEID        = "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK"
	consentCompany = "se-demo-bank"
)

func acmeUser(id string) user.Created {
	return user.Created{UserUUID: id, ClientID: "acme", CreatedAt: testNow,
		Personal: &user.CreatedPerson{ExternalID: "customer-" + id[:4], RequestHash: "h"}}
}

func consentScenario(t *testing.T) (*commandtest.Scenario, *app.ConsentService) {
	sc := commandtest.New(t, testNow)
	return sc, app.NewConsentService(companytest.Catalog(), commandtest.Repository(sc, consent.Kind),
		commandtest.Repository(sc, user.Kind), sc.Clock())
}

func createConsentCmd(key string) app.CreateConsent {
	return app.CreateConsent{Tenant: "acme", IdempotencyKey: key, UserUUID: consentUser, Company: consentCompany,
		LoginMethod: mockEID, PersonalNumber: personalNumber("19900101-0017"), RequestHash: "hash-1",
		CorrelationID: "corr-1", RequestID: "req-1"}
}

func consentCreated(id string, scope ...consent.Scope) consent.Created {
	if len(scope) == 0 {
		scope = consent.AllScopes()
	}
	return consent.Created{ConsentID: id, ClientID: "acme", UserUUID: consentUser, Company: consentCompany, LoginMethod: mockEID,
		Scope: scope, CreatedAt: created, Personal: &consent.CreatedPerson{PersonalNumber: "199001010017", RequestHash: "hash-1"}}
}

func createConsent(svc *app.ConsentService, cmd app.CreateConsent, out *app.ConsentCreated) func(context.Context) error {
	return func(ctx context.Context) error {
		got, err := svc.Create(ctx, cmd)
		if out != nil {
			*out = got
		}
		return err
	}
}

func TestScenarioCreateConsent(t *testing.T) {
	keyed := app.ConsentIDForKey("acme", "key-1")
	t.Run("records the consent on consent-<id>, with the person and the fingerprint in the personal part", func(t *testing.T) {
		sc, svc := consentScenario(t)
		var out app.ConsentCreated
		envs := sc.Given(user.StreamName(consentUser), acmeUser(consentUser)).
			When(createConsent(svc, createConsentCmd("key-1"), &out)).Then(consentCreated(keyed))
		if envs[0].Stream != consent.StreamName(keyed) || envs[0].Tenant != "acme" || envs[0].CorrelationID != "corr-1" ||
			envs[0].CausationID != "req-1" || envs[0].Actor != "client:acme" {
			t.Fatalf("envelope %+v", envs[0])
		}
		if out != (app.ConsentCreated{ConsentID: keyed, Status: consent.StatusInitiated}) {
			t.Fatalf("outcome %+v", out)
		}
	})
	t.Run("without a key, a new time-ordered id", func(t *testing.T) {
		sc, svc := consentScenario(t)
		sc.Given(user.StreamName(consentUser), acmeUser(consentUser))
		out, err := svc.Create(context.Background(), createConsentCmd(""))
		if err != nil {
			t.Fatal(err)
		}
		if id, err := uuid.Parse(out.ConsentID); err != nil || id.Version() != 7 {
			t.Fatalf("id %q is not a UUIDv7 (%v)", out.ConsentID, err)
		}
		c, err := repoOf(sc, consent.Kind).Load(context.Background(), out.ConsentID)
		if err != nil || c.Status() != consent.StatusInitiated || c.UserUUID() != consentUser || c.RequestHash() != "hash-1" {
			t.Fatalf("stored consent %+v, %v", c, err)
		}
	})
	t.Run("the requested scope, sorted and without repeats", func(t *testing.T) {
		sc, svc := consentScenario(t)
		cmd := createConsentCmd("key-1")
		cmd.Scope = []consent.Scope{consent.ScopeSavingsAccounts, consent.ScopeCheckingAccounts, consent.ScopeSavingsAccounts}
		sc.Given(user.StreamName(consentUser), acmeUser(consentUser)).When(createConsent(svc, cmd, nil)).
			Then(consentCreated(keyed, consent.ScopeCheckingAccounts, consent.ScopeSavingsAccounts))
	})
	t.Run("a retry with the same key and request is answered as it was, recording nothing", func(t *testing.T) {
		sc, svc := consentScenario(t)
		var out app.ConsentCreated
		sc.Given(user.StreamName(consentUser), acmeUser(consentUser)).Given(consent.StreamName(keyed), consentCreated(keyed)).
			When(createConsent(svc, createConsentCmd("key-1"), &out)).Then()
		if out != (app.ConsentCreated{ConsentID: keyed, Status: consent.StatusInitiated, Replayed: true}) {
			t.Fatalf("outcome %+v", out)
		}
	})
	t.Run("a key reused for another request, or by another client's consent, is refused", func(t *testing.T) {
		sc, svc := consentScenario(t)
		cmd := createConsentCmd("key-1")
		cmd.RequestHash = "hash-2"
		sc.Given(user.StreamName(consentUser), acmeUser(consentUser)).Given(consent.StreamName(keyed), consentCreated(keyed)).
			When(createConsent(svc, cmd, nil)).ThenError(app.ErrIdempotencyKeyReused)
		// Erased, the first request is nobody's: every retry is a key reused.
		erased := consentCreated(keyed)
		erased.Personal = nil
		sc2, svc2 := consentScenario(t)
		sc2.Given(user.StreamName(consentUser), acmeUser(consentUser)).Given(consent.StreamName(keyed), erased).
			When(createConsent(svc2, createConsentCmd("key-1"), nil)).ThenError(app.ErrIdempotencyKeyReused)
	})
	globex := acmeUser(consentUser)
	globex.ClientID = "globex"
	for _, tc := range []struct {
		name  string
		given []domain.Event
	}{
		{"an unknown user", nil},
		{"another client's user", []domain.Event{globex}},
		{"a deleted user", []domain.Event{acmeUser(consentUser), user.Deleted{DeletedAt: testNow}}},
	} {
		t.Run(tc.name+" is UNKNOWN_USER", func(t *testing.T) {
			sc, svc := consentScenario(t)
			if len(tc.given) > 0 {
				sc.Given(user.StreamName(consentUser), tc.given...)
			}
			sc.When(createConsent(svc, createConsentCmd("key-1"), nil)).ThenError(app.ErrUnknownUser)
		})
	}
	for _, tc := range []struct {
		name   string
		mutate func(*app.CreateConsent)
		want   error
	}{
		{"a company without consents", func(c *app.CreateConsent) { c.Company = "se-demo-insurer" }, consent.ErrNotSupported},
		{"a login method the company lacks", func(c *app.CreateConsent) { c.LoginMethod = "PDF_UPLOAD" }, consent.ErrLoginMethodNotSupported},
		{"an unknown company", func(c *app.CreateConsent) { c.Company = "se-nowhere" }, domain.ErrInvalid},
		{"an unknown scope", func(c *app.CreateConsent) { c.Scope = []consent.Scope{"LOANS"} }, domain.ErrInvalid},
		{"a userUuid that is no UUID", func(c *app.CreateConsent) { c.UserUUID = "customer-42" }, domain.ErrInvalid},
		{"no tenant", func(c *app.CreateConsent) { c.Tenant = "" }, domain.ErrInvalid},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			sc, svc := consentScenario(t)
			cmd := createConsentCmd("key-1")
			tc.mutate(&cmd)
			sc.Given(user.StreamName(consentUser), acmeUser(consentUser)).When(createConsent(svc, cmd, nil)).ThenError(tc.want)
		})
	}
	t.Run("an unknown company is a field error at company", func(t *testing.T) {
		_, svc := consentScenario(t)
		cmd := createConsentCmd("key-1")
		cmd.Company = "se-nowhere"
		_, err := svc.Create(context.Background(), cmd)
		if f := domain.FieldErrors(err); len(f) != 1 || f[0].Field != app.FieldCompany {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("an uppercase userUuid is the same user", func(t *testing.T) {
		sc, svc := consentScenario(t)
		cmd := createConsentCmd("key-1")
		cmd.UserUUID = "6F1C2A9E-3B4D-4E5F-8A7B-9C0D1E2F3A4B"
		sc.Given(user.StreamName(consentUser), acmeUser(consentUser)).When(createConsent(svc, cmd, nil)).Then(consentCreated(keyed))
	})
}

func revokeConsent(svc *app.ConsentService, tenant, id, sessionUser string, out **consent.Consent) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := svc.Revoke(ctx, app.RevokeConsent{Tenant: tenant, ConsentID: id, SessionUser: sessionUser, CorrelationID: "corr-2", RequestID: "req-2"})
		if out != nil {
			*out = c
		}
		return err
	}
}

func TestScenarioRevokeConsent(t *testing.T) {
	started := consent.AuthorizationStarted{At: created, Deadline: created.Add(30 * time.Second), BankConsentID: "b-1"}
	authorized := consent.Authorized{AuthorizedAt: created, ExpiresAt: created.Add(time.Hour)}
	revoked := consent.Revoked{At: created, Reason: consent.RevokedByClient}
	for name, given := range map[string][]domain.Event{
		"an initiated consent":  {consentCreated(consentID)},
		"an awaiting consent":   {consentCreated(consentID), started},
		"an authorized consent": {consentCreated(consentID), started, authorized},
	} {
		t.Run(name+" is revoked by the client, and by its user's session", func(t *testing.T) {
			sc, svc := consentScenario(t)
			var out *consent.Consent
			envs := sc.Given(consent.StreamName(consentID), given...).
				When(revokeConsent(svc, "acme", consentID, "", &out)).Then(revoked)
			if out == nil || out.Status() != consent.StatusRevoked || out.ConsentID() != consentID || envs[0].Actor != "client:acme" {
				t.Fatalf("revoked %+v, envelope %+v", out, envs[0])
			}
			sc2, svc2 := consentScenario(t)
			envs = sc2.Given(consent.StreamName(consentID), given...).
				When(revokeConsent(svc2, "acme", consentID, consentUser, nil)).Then(revoked)
			if envs[0].Actor != "user:"+consentUser {
				t.Fatalf("actor %s", envs[0].Actor)
			}
		})
	}
	for name, given := range map[string][]domain.Event{
		"a failed consent":  {consentCreated(consentID), consent.Failed{At: created, Code: consent.FailureAuthenticationCancelled, Message: "m"}},
		"a revoked consent": {consentCreated(consentID), revoked},
		"an expired consent": {consentCreated(consentID), started, consent.Authorized{AuthorizedAt: created.Add(-2 * time.Hour),
			ExpiresAt: created.Add(-time.Hour)}, consent.Expired{At: created.Add(-time.Hour)}},
		"an authorized consent past its expiry, not yet recorded": {consentCreated(consentID), started,
			consent.Authorized{AuthorizedAt: created.Add(-2 * time.Hour), ExpiresAt: created.Add(-time.Hour)}},
	} {
		t.Run(name+" is final", func(t *testing.T) {
			sc, svc := consentScenario(t)
			err := sc.Given(consent.StreamName(consentID), given...).
				When(revokeConsent(svc, "acme", consentID, "", nil)).ThenError(consent.ErrFinal)
			if !errors.Is(err, domain.ErrConflict) {
				t.Fatalf("err %v is not a conflict", err)
			}
		})
	}
	t.Run("another client's consent, an unknown one and a malformed id are not found", func(t *testing.T) {
		sc, svc := consentScenario(t)
		sc.Given(consent.StreamName(consentID), consentCreated(consentID)).
			When(revokeConsent(svc, "globex", consentID, "", nil)).ThenError(app.ErrConsentNotFound)
		sc.When(revokeConsent(svc, "acme", "0197c0a1-0000-7e5f-8a9b-000000000009", "", nil)).ThenError(app.ErrConsentNotFound)
		sc.When(revokeConsent(svc, "acme", "not-an-id", "", nil)).ThenError(app.ErrConsentNotFound)
	})
	t.Run("another user's session is refused", func(t *testing.T) {
		sc, svc := consentScenario(t)
		sc.Given(consent.StreamName(consentID), consentCreated(consentID)).
			When(revokeConsent(svc, "acme", consentID, consentOther, nil)).ThenError(app.ErrConsentOfOtherUser)
	})
}

// TestScenarioDeleteRevokesTheUsersConsents: a user's deletion revokes each of its consents that
// the event store shows live (USER_DELETED), before the user's key is destroyed, and touches no
// final consent and none of another user's that the list names by mistake; a deletion that
// stopped before is finished by FinishErasure, revocations included.
func TestScenarioDeleteRevokesTheUsersConsents(t *testing.T) {
	const (
		initiated  = "0197c0a1-1111-7e5f-8a9b-000000000001"
		authorized = "0197c0a1-1111-7e5f-8a9b-000000000002"
		failed     = "0197c0a1-1111-7e5f-8a9b-000000000003"
		stranger   = "0197c0a1-1111-7e5f-8a9b-000000000004"
	)
	createdFor := func(id, userUUID string) consent.Created {
		c := consentCreated(id)
		c.UserUUID = userUUID
		return c
	}
	given := func(t *testing.T, failKeyOf string) (*commandtest.Scenario, *app.UserService, *failingKeys) {
		sc := commandtest.New(t, testNow)
		mem := newKeysWith(t, domain.UserSubject(consentUser))
		keys := &failingKeys{Memory: mem, fail: failKeyOf}
		svc := app.NewUserService(repoOf(sc, user.Kind), repoOf(sc, user.ReservationKind), userSecret,
			app.Erasure{Keys: keys, Collections: userCollections{}, Ends: repoOf(sc, collection.Kind),
				Consents: userConsents{consentUser: {initiated, authorized, failed, stranger}}, Revokes: repoOf(sc, consent.Kind)},
			sc.Clock(), app.WithHoldTokens(holdToken))
		sc.Given(reservationOf("customer-42"), reservedFor(consentUser, "hash-0")).
			Given(user.StreamName(consentUser), userCreated(consentUser, "customer-42", "hash-0")).
			Given(consent.StreamName(initiated), createdFor(initiated, consentUser)).
			Given(consent.StreamName(authorized), createdFor(authorized, consentUser),
				consent.AuthorizationStarted{At: created, Deadline: created.Add(time.Minute), BankConsentID: "b"},
				consent.Authorized{AuthorizedAt: created, ExpiresAt: created.Add(time.Hour)}).
			Given(consent.StreamName(failed), createdFor(failed, consentUser),
				consent.Failed{At: created, Code: consent.FailureThirdPartyError, Message: "m"}).
			Given(consent.StreamName(stranger), createdFor(stranger, consentOther))
		return sc, svc, keys
	}
	userDeleted := consent.Revoked{At: created, Reason: consent.RevokedUserDeleted}
	released := user.ExternalIDReleased{ReleasedAt: created, Personal: &user.ReleasedBy{UserUUID: consentUser}}

	t.Run("the DELETE revokes the live ones, then destroys the key", func(t *testing.T) {
		sc, svc, keys := given(t, "")
		envs := sc.When(deleteUser(svc, "acme", consentUser)).
			Then(user.Deleted{DeletedAt: created}, released, userDeleted, userDeleted)
		if envs[2].Stream != consent.StreamName(initiated) || envs[3].Stream != consent.StreamName(authorized) {
			t.Fatalf("revoked %s and %s", envs[2].Stream, envs[3].Stream)
		}
		assertErased(t, keys.Memory, domain.UserSubject(consentUser), true)
	})
	t.Run("a DELETE that stops before the key is finished by FinishErasure, which revokes nothing twice", func(t *testing.T) {
		sc, svc, keys := given(t, domain.UserSubject(consentUser))
		if err := deleteUser(svc, "acme", consentUser)(context.Background()); !errors.Is(err, errKeyStoreDown) {
			t.Fatalf("the delete that stops = %v", err)
		}
		// The revocations came before the key: they are stored although the key survived.
		for _, id := range []string{initiated, authorized} {
			c, err := repoOf(sc, consent.Kind).Load(context.Background(), id)
			if err != nil || c.Status() != consent.StatusRevoked || c.RevokeReason() != consent.RevokedUserDeleted {
				t.Fatalf("%s after the stopped delete: %v %v", id, c.Status(), err)
			}
		}
		keys.fail = ""
		sc.When(finishErasure(svc, consentUser)).Then()
		assertErased(t, keys.Memory, domain.UserSubject(consentUser), true)
	})
	t.Run("a failing list stops the erasure before the key", func(t *testing.T) {
		sc := commandtest.New(t, testNow)
		mem := newKeysWith(t, domain.UserSubject(consentUser))
		svc := app.NewUserService(repoOf(sc, user.Kind), repoOf(sc, user.ReservationKind), userSecret,
			app.Erasure{Keys: mem, Collections: userCollections{}, Ends: repoOf(sc, collection.Kind),
				Consents: failingConsents{}, Revokes: repoOf(sc, consent.Kind)}, sc.Clock(), app.WithHoldTokens(holdToken))
		sc.Given(user.StreamName(consentUser), userCreated(consentUser, "customer-42", "hash-0"))
		if err := deleteUser(svc, "acme", consentUser)(context.Background()); !errors.Is(err, errConsentsDown) {
			t.Fatalf("delete = %v", err)
		}
		assertErased(t, mem, domain.UserSubject(consentUser), false)
	})
}

var errConsentsDown = errors.New("consents read model down")

type failingConsents struct{}

func (failingConsents) UserConsentIDs(context.Context, string, string) ([]string, error) {
	return nil, errConsentsDown
}

func newKeysWith(t *testing.T, subjects ...string) *keystore.Memory {
	t.Helper()
	keys := keystore.NewMemory()
	withKeys(t, keys, subjects...)
	return keys
}
