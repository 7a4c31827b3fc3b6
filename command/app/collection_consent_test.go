package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/commandtest"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/user"
)

// Collections that use consents: Psd2AisConsentParameter names a consent, which must be
// AUTHORIZED, unexpired, the client's, the collection's user's and the company's, as the event
// store shows it; or asks for the user's newest such consent. The one used is recorded on
// collection.started; a refusal records nothing.

const (
	olderConsentID = "0197c0a1-1111-7e5f-8a9b-000000000000"
	newerConsentID = "0197c0a1-1111-7e5f-8a9b-000000000002"
	bankRef        = "bank-consent-1"
)

// consentStartService is the collection service with consents, listing stored consents from list.
func consentStartService(t *testing.T, list userConsents) (*commandtest.Scenario, *app.CollectionService) {
	sc := commandtest.New(t, testNow)
	svc := app.NewCollectionService(companytest.Catalog(), commandtest.Repository(sc, collection.Kind),
		commandtest.Repository(sc, user.Kind), sc.Clock()).
		WithConsents(commandtest.Repository(sc, consent.Kind), list)
	sc.Given(user.StreamName(consentUser), acmeUser(consentUser))
	sc.Given(user.StreamName(consentOther), acmeUser(consentOther))
	return sc, svc
}

// authorizedConsent is an authorized consent of acme's consentUser at the bank.
func authorizedConsent(id string, scope ...consent.Scope) []domain.Event {
	c := consentCreated(id, scope...)
	c.ConsentID = id
	return []domain.Event{c,
		consent.AuthorizationStarted{At: testNow, Deadline: testNow.Add(time.Minute), BankConsentID: bankRef + "-" + id[len(id)-1:]},
		consent.Authorized{AuthorizedAt: testNow, ExpiresAt: testNow.Add(180 * 24 * time.Hour)}}
}

func bankStartCmd(choice *app.ConsentChoice) app.StartCollection {
	return app.StartCollection{Tenant: "acme", APIVersion: "2026-04-01", IdempotencyKey: "key-1", Company: consentCompany,
		LoginMethod: mockEID, UserUUID: consentUser, RequestHash: "hash-1", CorrelationID: "corr-1", RequestID: "req-1",
		Consent: choice}
}

func bankStarted(used *collection.UsedConsent) collection.Started {
	return collection.Started{CollectionID: app.CollectionIDForKey("acme", "key-1"), ClientID: "acme", Company: consentCompany,
		Product: collection.ProductWealth, LoginMethod: mockEID, APIVersion: "2026-04-01", UserUUID: consentUser,
		StartedAt: created, Consent: used, Personal: &collection.StartedPerson{RequestHash: "hash-1"}}
}

func startWith(svc *app.CollectionService, cmd app.StartCollection) func(context.Context) error {
	return func(ctx context.Context) error { _, err := svc.Start(ctx, cmd); return err }
}

func TestScenarioStartWithConsent(t *testing.T) {
	named := &app.ConsentChoice{ConsentID: consentID}

	t.Run("an authorized consent of the user at the company is recorded on the start", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		sc.Given(consent.StreamName(consentID), authorizedConsent(consentID, consent.ScopeCreditCards)...).
			When(startWith(svc, bankStartCmd(named))).
			Then(bankStarted(&collection.UsedConsent{ConsentID: consentID, BankConsentID: bankRef + "-1",
				Scope: []consent.Scope{consent.ScopeCreditCards}}))
	})
	t.Run("the id in any case names the same consent", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		upper := bankStartCmd(&app.ConsentChoice{ConsentID: "0197C0A1-1111-7E5F-8A9B-000000000001"})
		sc.Given(consent.StreamName(consentID), authorizedConsent(consentID)...).
			When(startWith(svc, upper)).
			Then(bankStarted(&collection.UsedConsent{ConsentID: consentID, BankConsentID: bankRef + "-1", Scope: consent.AllScopes()}))
	})

	otherClients := authorizedConsent(consentID)
	oc := otherClients[0].(consent.Created)
	oc.ClientID = "globex"
	otherClients[0] = oc
	otherUsers := authorizedConsent(consentID)
	ou := otherUsers[0].(consent.Created)
	ou.UserUUID = consentOther
	otherUsers[0] = ou
	otherCompanys := authorizedConsent(consentID)
	ocy := otherCompanys[0].(consent.Created)
	ocy.Company = "se-demo-pension"
	otherCompanys[0] = ocy
	for _, tc := range []struct {
		name   string
		given  []domain.Event
		reason consent.Reason
	}{
		{"an unknown consent", nil, consent.ReasonNotAuthorized},
		{"another client's consent", otherClients, consent.ReasonNotAuthorized},
		{"a consent awaiting its authorization", authorizedConsent(consentID)[:2], consent.ReasonNotAuthorized},
		{"a failed consent", append(authorizedConsent(consentID)[:2:2],
			consent.Failed{At: testNow, Code: consent.FailureAuthenticationCancelled, Message: "cancelled"}), consent.ReasonNotAuthorized},
		{"a revoked consent", append(authorizedConsent(consentID), consent.Revoked{At: testNow, Reason: consent.RevokedByClient}),
			consent.ReasonRevoked},
		{"an expired consent", append(authorizedConsent(consentID), consent.Expired{At: testNow}), consent.ReasonExpired},
		{"another user's consent", otherUsers, consent.ReasonOtherUser},
		{"a consent at another company", otherCompanys, consent.ReasonOtherCompany},
	} {
		t.Run(tc.name+" is CONSENT_INVALID "+string(tc.reason)+", nothing recorded", func(t *testing.T) {
			sc, svc := consentStartService(t, nil)
			if len(tc.given) > 0 {
				sc.Given(consent.StreamName(consentID), tc.given...)
			}
			err := sc.When(startWith(svc, bankStartCmd(named))).ThenError(domain.ErrRefused)
			var invalid *app.ConsentInvalidError
			if !errors.As(err, &invalid) || invalid.Reason != tc.reason {
				t.Fatalf("err = %v, want CONSENT_INVALID %s", err, tc.reason)
			}
		})
	}
	t.Run("an authorized consent past its expiry is EXPIRED before its expiry is recorded", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		events := authorizedConsent(consentID)
		events[2] = consent.Authorized{AuthorizedAt: testNow.Add(-time.Hour), ExpiresAt: created}
		err := sc.Given(consent.StreamName(consentID), events...).
			When(startWith(svc, bankStartCmd(named))).ThenError(domain.ErrRefused)
		var invalid *app.ConsentInvalidError
		if !errors.As(err, &invalid) || invalid.Reason != consent.ReasonExpired {
			t.Fatalf("err = %v, want CONSENT_INVALID EXPIRED", err)
		}
	})
	t.Run("a consent at a company without consents is CONSENT_NOT_SUPPORTED", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		cmd := bankStartCmd(named)
		cmd.Company = "se-demo-pension"
		sc.Given(consent.StreamName(consentID), authorizedConsent(consentID)...).
			When(startWith(svc, cmd)).ThenError(collection.ErrConsentNotSupported)
		cmd.Consent = &app.ConsentChoice{ReuseStored: true}
		sc.When(startWith(svc, cmd)).ThenError(collection.ErrConsentNotSupported)
	})
	t.Run("a consent needs the collection's user", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		cmd := bankStartCmd(named)
		cmd.UserUUID = ""
		err := sc.When(startWith(svc, cmd)).ThenError(domain.ErrInvalid)
		if fields := domain.FieldErrors(err); len(fields) != 1 || fields[0].Field != app.FieldUserUUID {
			t.Fatalf("err = %v, want a field error at %s", err, app.FieldUserUUID)
		}
	})
	t.Run("a consent id that is no UUID is a field error", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		err := sc.When(startWith(svc, bankStartCmd(&app.ConsentChoice{ConsentID: "does-not-exist", ReuseStored: true}))).
			ThenError(domain.ErrInvalid)
		if fields := domain.FieldErrors(err); len(fields) != 1 || fields[0].Field != app.FieldConsentID {
			t.Fatalf("err = %v, want a field error at %s", err, app.FieldConsentID)
		}
	})
	t.Run("an unknown user is UNKNOWN_USER before its consent is looked at", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		cmd := bankStartCmd(named)
		cmd.UserUUID = "0190f4a2-0000-7b3a-9a51-000000000099"
		sc.When(startWith(svc, cmd)).ThenError(app.ErrUnknownUser)
	})
	t.Run("a retry is answered as it was after its consent was revoked", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		used := &collection.UsedConsent{ConsentID: consentID, BankConsentID: bankRef + "-1", Scope: consent.AllScopes()}
		sc.Given(consent.StreamName(consentID), append(authorizedConsent(consentID),
			consent.Revoked{At: testNow, Reason: consent.RevokedByClient})...).
			Given(collection.StreamName(app.CollectionIDForKey("acme", "key-1")), bankStarted(used)).
			When(startWith(svc, bankStartCmd(named))).Then()
	})
	t.Run("no consent asked for records none", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		sc.When(startWith(svc, bankStartCmd(&app.ConsentChoice{}))).Then(bankStarted(nil))
	})
}

// consentOfPerson is authorizedConsent signed for number instead ("" for an erased one).
func consentOfPerson(id, number string) []domain.Event {
	events := authorizedConsent(id)
	c := events[0].(consent.Created)
	c.Personal = nil
	if number != "" {
		c.Personal = &consent.CreatedPerson{PersonalNumber: number, RequestHash: "hash-1"}
	}
	events[0] = c
	return events
}

// startAs is bankStartCmd for a collection that logs in as number (any accepted spelling).
func startAs(choice *app.ConsentChoice, number string) app.StartCollection {
	cmd := bankStartCmd(choice)
	cmd.PersonalNumber = personalNumber(number)
	return cmd
}

// TestScenarioStartWithAnotherPersonsConsent: a collection that logs in as a person reads PSD2
// data only under a consent signed for that person; otherwise it would put one person's accounts
// next to another's loans and personal details.
func TestScenarioStartWithAnotherPersonsConsent(t *testing.T) {
	const signer, other = "199001010017", "198507099805" // authorizedConsent is signed for signer
	named := &app.ConsentChoice{ConsentID: consentID}
	withPerson := func(used *collection.UsedConsent, n string) collection.Started {
		e := bankStarted(used)
		e.Personal = &collection.StartedPerson{PersonalNumber: n, RequestHash: "hash-1"}
		return e
	}

	t.Run("given a consent for A, when a collection logs in as A, then it starts under the consent", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		sc.Given(consent.StreamName(consentID), authorizedConsent(consentID)...).
			When(startWith(svc, startAs(named, "19900101-0017"))).
			Then(withPerson(&collection.UsedConsent{ConsentID: consentID, BankConsentID: bankRef + "-1", Scope: consent.AllScopes()}, signer))
	})
	t.Run("given a consent for A, when a collection names nobody, then it starts under the consent", func(t *testing.T) {
		sc, svc := consentStartService(t, nil)
		sc.Given(consent.StreamName(consentID), consentOfPerson(consentID, other)...).
			When(startWith(svc, bankStartCmd(named))).
			Then(bankStarted(&collection.UsedConsent{ConsentID: consentID, BankConsentID: bankRef + "-1", Scope: consent.AllScopes()}))
	})
	for _, tc := range []struct {
		name  string
		given []domain.Event
	}{
		{"given a consent for A, when a collection logs in as B, then", authorizedConsent(consentID)},
		{"given an erased consent, when a collection names a person, then", consentOfPerson(consentID, "")},
	} {
		t.Run(tc.name+" it is CONSENT_INVALID OTHER_USER, nothing recorded", func(t *testing.T) {
			sc, svc := consentStartService(t, nil)
			err := sc.Given(consent.StreamName(consentID), tc.given...).
				When(startWith(svc, startAs(named, other))).ThenError(domain.ErrRefused)
			var invalid *app.ConsentInvalidError
			if !errors.As(err, &invalid) || invalid.Reason != consent.ReasonOtherUser {
				t.Fatalf("err = %v, want CONSENT_INVALID OTHER_USER", err)
			}
		})
	}

	reuse := &app.ConsentChoice{ReuseStored: true}
	t.Run("given the newest stored consent is another person's, when reusing as B, then the next one for B is used", func(t *testing.T) {
		sc, svc := consentStartService(t, userConsents{consentUser: {newerConsentID, olderConsentID}})
		sc.Given(consent.StreamName(newerConsentID), authorizedConsent(newerConsentID)...).
			Given(consent.StreamName(olderConsentID), consentOfPerson(olderConsentID, other)...).
			When(startWith(svc, startAs(reuse, other))).
			Then(withPerson(&collection.UsedConsent{ConsentID: olderConsentID, BankConsentID: bankRef + "-0", Scope: consent.AllScopes()}, other))
	})
	t.Run("given only another person's stored consents, when reusing as B, then it is NO_STORED_CONSENT, nothing recorded", func(t *testing.T) {
		sc, svc := consentStartService(t, userConsents{consentUser: {newerConsentID, olderConsentID}})
		sc.Given(consent.StreamName(newerConsentID), authorizedConsent(newerConsentID)...).
			Given(consent.StreamName(olderConsentID), consentOfPerson(olderConsentID, "")...).
			When(startWith(svc, startAs(reuse, other))).ThenError(app.ErrNoStoredConsent)
	})
}

func TestScenarioStartReusingAStoredConsent(t *testing.T) {
	reuse := &app.ConsentChoice{ReuseStored: true}
	t.Run("the newest usable consent of the user at the company is used", func(t *testing.T) {
		// Newest first: a revoked consent, another company's, then two authorized ones.
		revokedID, pensionID := "0197c0a1-1111-7e5f-8a9b-000000000004", "0197c0a1-1111-7e5f-8a9b-000000000003"
		sc, svc := consentStartService(t, userConsents{consentUser: {revokedID, pensionID, newerConsentID, olderConsentID}})
		pension := authorizedConsent(pensionID)
		pc := pension[0].(consent.Created)
		pc.Company = "se-demo-pension"
		pension[0] = pc
		sc.Given(consent.StreamName(revokedID), append(authorizedConsent(revokedID), consent.Revoked{At: testNow, Reason: consent.RevokedByClient})...).
			Given(consent.StreamName(pensionID), pension...).
			Given(consent.StreamName(newerConsentID), authorizedConsent(newerConsentID, consent.ScopeSavingsAccounts)...).
			Given(consent.StreamName(olderConsentID), authorizedConsent(olderConsentID)...).
			When(startWith(svc, bankStartCmd(reuse))).
			Then(bankStarted(&collection.UsedConsent{ConsentID: newerConsentID, BankConsentID: bankRef + "-2",
				Scope: []consent.Scope{consent.ScopeSavingsAccounts}}))
	})
	t.Run("the event store decides: a listed consent revoked since is skipped", func(t *testing.T) {
		sc, svc := consentStartService(t, userConsents{consentUser: {newerConsentID, olderConsentID}})
		sc.Given(consent.StreamName(newerConsentID), append(authorizedConsent(newerConsentID), consent.Expired{At: testNow})...).
			Given(consent.StreamName(olderConsentID), authorizedConsent(olderConsentID)...).
			When(startWith(svc, bankStartCmd(reuse))).
			Then(bankStarted(&collection.UsedConsent{ConsentID: olderConsentID, BankConsentID: bankRef + "-0", Scope: consent.AllScopes()}))
	})
	t.Run("a named consent wins over reuse", func(t *testing.T) {
		sc, svc := consentStartService(t, userConsents{consentUser: {newerConsentID}})
		sc.Given(consent.StreamName(newerConsentID), authorizedConsent(newerConsentID)...).
			Given(consent.StreamName(consentID), append(authorizedConsent(consentID), consent.Revoked{At: testNow, Reason: consent.RevokedByClient})...)
		err := sc.When(startWith(svc, bankStartCmd(&app.ConsentChoice{ConsentID: consentID, ReuseStored: true}))).ThenError(domain.ErrRefused)
		var invalid *app.ConsentInvalidError
		if !errors.As(err, &invalid) || invalid.Reason != consent.ReasonRevoked {
			t.Fatalf("err = %v, want CONSENT_INVALID REVOKED", err)
		}
	})
	for _, tc := range []struct {
		name  string
		list  userConsents
		given func(*commandtest.Scenario)
	}{
		{"no consents at all", userConsents{}, func(*commandtest.Scenario) {}},
		{"only unusable ones", userConsents{consentUser: {newerConsentID, olderConsentID}}, func(sc *commandtest.Scenario) {
			sc.Given(consent.StreamName(newerConsentID), authorizedConsent(newerConsentID)[:2]...).
				Given(consent.StreamName(olderConsentID), append(authorizedConsent(olderConsentID), consent.Expired{At: testNow})...)
		}},
		{"only another user's", userConsents{consentOther: {newerConsentID}}, func(sc *commandtest.Scenario) {
			other := authorizedConsent(newerConsentID)
			c := other[0].(consent.Created)
			c.UserUUID = consentOther
			other[0] = c
			sc.Given(consent.StreamName(newerConsentID), other...)
		}},
	} {
		t.Run(tc.name+" is NO_STORED_CONSENT, nothing recorded", func(t *testing.T) {
			sc, svc := consentStartService(t, tc.list)
			tc.given(sc)
			sc.When(startWith(svc, bankStartCmd(reuse))).ThenError(app.ErrNoStoredConsent)
		})
	}
}

// TestStartWithConsentNeedsConsents: a service built without consents never starts a
// collection that asked for one as if it had not.
func TestStartWithConsentNeedsConsents(t *testing.T) {
	f := newFixture(t)
	if _, err := f.svc.Start(context.Background(), bankStartCmd(&app.ConsentChoice{ReuseStored: true})); err == nil {
		t.Fatal("a start with a consent succeeded on a service without consents")
	}
	if len(f.store.Events(collection.StreamName(app.CollectionIDForKey("acme", "key-1")))) != 0 {
		t.Fatal("something was recorded")
	}
}
