package consent_test

import (
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/domaintest"
	"github.com/samla/samla/domain/personnummer"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

const (
	consentID = "0190f4a2-7c1e-7b3a-9a51-2f1e3d4c5b6a"
	userID    = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	otherUser = "6f1c2a9e-0000-4e5f-8a7b-9c0d1e2f3a4b"
	bank      = "se-demo-bank"
	mock      = "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK"
	validity  = 180 * 24 * time.Hour
)

func scenario(t *testing.T) *domaintest.Scenario[*consent.Consent] {
	return domaintest.For(t, consent.Kind)
}

var demoBank = consent.Company{ID: bank, Consents: true, LoginMethods: []string{"SWEDISH_MOBILE_EID_OTHER_DEVICE", mock}}

func number(t *testing.T) personnummer.Number {
	t.Helper()
	n, err := personnummer.Parse("199001010017", t0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func createReq(t *testing.T) consent.CreateRequest {
	return consent.CreateRequest{ConsentID: consentID, ClientID: "acme", UserUUID: userID, Company: demoBank,
		LoginMethod: mock, PersonalNumber: number(t), RequestHash: "hash-1"}
}

func created() consent.Created {
	return consent.Created{ConsentID: consentID, ClientID: "acme", UserUUID: userID, Company: bank, LoginMethod: mock,
		Scope: consent.AllScopes(), CreatedAt: t0, Personal: &consent.CreatedPerson{PersonalNumber: "199001010017", RequestHash: "hash-1"}}
}

var (
	t1       = t0.Add(time.Second)
	deadline = t1.Add(30 * time.Second)
	t2       = t1.Add(5 * time.Second)
)

func order() consent.AuthorizationOrder {
	return consent.AuthorizationOrder{BankConsentID: "bank-c-1", StartedAt: t1, Deadline: deadline,
		AutoStartToken: "auto-1", QRStartToken: "qr-1", QRStartSecret: "secret-1"}
}

func started() consent.AuthorizationStarted {
	return consent.AuthorizationStarted{At: t1, Deadline: deadline, BankConsentID: "bank-c-1",
		Personal: &consent.AuthorizationPersonal{AutoStartToken: "auto-1", QRStartToken: "qr-1", QRStartSecret: "secret-1"}}
}

func authorized() consent.Authorized {
	return consent.Authorized{AuthorizedAt: t2, ExpiresAt: t2.Add(validity)}
}

func rehydrate(t *testing.T, events ...domain.Event) *consent.Consent {
	t.Helper()
	c := consent.Kind.New()
	if err := domain.Rehydrate(c, events...); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCreate(t *testing.T) {
	t.Run("records the consent with every scope and the personal number in the personal part", func(t *testing.T) {
		scenario(t).When(func(c *consent.Consent) error { return c.Create(createReq(t), t0.In(time.FixedZone("CET", 3600))) }).
			Then(created())
	})
	t.Run("the scope is recorded sorted and without repeats", func(t *testing.T) {
		req := createReq(t)
		req.Scope = []consent.Scope{consent.ScopeSavingsAccounts, consent.ScopeCheckingAccounts, consent.ScopeSavingsAccounts}
		want := created()
		want.Scope = []consent.Scope{consent.ScopeCheckingAccounts, consent.ScopeSavingsAccounts}
		scenario(t).When(func(c *consent.Consent) error { return c.Create(req, t0) }).Then(want)
	})
	t.Run("an unknown scope is refused", func(t *testing.T) {
		req := createReq(t)
		req.Scope = []consent.Scope{consent.ScopeCreditCards, "LOANS"}
		scenario(t).When(func(c *consent.Consent) error { return c.Create(req, t0) }).ThenFieldError(consent.FieldScope)
	})
	t.Run("a company without consents is refused", func(t *testing.T) {
		req := createReq(t)
		req.Company = consent.Company{ID: "se-demo-insurer", LoginMethods: []string{mock}}
		scenario(t).When(func(c *consent.Consent) error { return c.Create(req, t0) }).ThenError(consent.ErrNotSupported)
	})
	t.Run("a login method the company lacks is refused", func(t *testing.T) {
		req := createReq(t)
		req.LoginMethod = "PDF_UPLOAD"
		scenario(t).When(func(c *consent.Consent) error { return c.Create(req, t0) }).ThenError(consent.ErrLoginMethodNotSupported)
		if !errors.Is(consent.ErrLoginMethodNotSupported, domain.ErrRefused) || !errors.Is(consent.ErrNotSupported, domain.ErrRefused) {
			t.Fatal("refusals are not domain.ErrRefused")
		}
	})
	for field, mutate := range map[string]func(*consent.CreateRequest){
		consent.FieldConsentID:      func(r *consent.CreateRequest) { r.ConsentID = "" },
		consent.FieldClientID:       func(r *consent.CreateRequest) { r.ClientID = "" },
		consent.FieldUserUUID:       func(r *consent.CreateRequest) { r.UserUUID = "" },
		consent.FieldCompany:        func(r *consent.CreateRequest) { r.Company.ID = "" },
		consent.FieldLoginMethod:    func(r *consent.CreateRequest) { r.LoginMethod = " " },
		consent.FieldPersonalNumber: func(r *consent.CreateRequest) { r.PersonalNumber = personnummer.Number{} },
	} {
		t.Run(field+" is required", func(t *testing.T) {
			req := createReq(t)
			mutate(&req)
			scenario(t).When(func(c *consent.Consent) error { return c.Create(req, t0) }).ThenFieldError(field)
		})
	}
	t.Run("a consent that exists is a conflict", func(t *testing.T) {
		scenario(t).Given(created()).When(func(c *consent.Consent) error { return c.Create(createReq(t), t0) }).
			ThenError(domain.ErrConflict)
	})
}

func TestClaim(t *testing.T) {
	stale := 30 * time.Second
	t.Run("a worker claims a new consent", func(t *testing.T) {
		scenario(t).Given(created()).When(func(c *consent.Consent) error { return c.Claim("w1", t1, stale) }).
			Then(consent.Claimed{WorkerID: "w1", ClaimedAt: t1})
	})
	t.Run("another worker's live claim blocks, a stale one does not", func(t *testing.T) {
		scenario(t).Given(created(), consent.Claimed{WorkerID: "w1", ClaimedAt: t1}).
			When(func(c *consent.Consent) error { return c.Claim("w2", t1.Add(time.Second), stale) }).
			ThenError(consent.ErrAlreadyClaimed)
		scenario(t).Given(created(), consent.Claimed{WorkerID: "w1", ClaimedAt: t1}).
			When(func(c *consent.Consent) error { return c.Claim("w2", t1.Add(stale), stale) }).
			Then(consent.Claimed{WorkerID: "w2", ClaimedAt: t1.Add(stale)})
	})
	t.Run("the same worker claims again", func(t *testing.T) {
		scenario(t).Given(created(), consent.Claimed{WorkerID: "w1", ClaimedAt: t1}).
			When(func(c *consent.Consent) error { return c.Claim("w1", t2, stale) }).
			Then(consent.Claimed{WorkerID: "w1", ClaimedAt: t2})
	})
	t.Run("a final consent or none cannot be claimed", func(t *testing.T) {
		scenario(t).Given(created(), consent.Revoked{At: t1, Reason: consent.RevokedByClient}).
			When(func(c *consent.Consent) error { return c.Claim("w1", t2, stale) }).ThenError(consent.ErrFinal)
		scenario(t).When(func(c *consent.Consent) error { return c.Claim("w1", t2, stale) }).ThenError(consent.ErrNotCreated)
		scenario(t).Given(created()).When(func(c *consent.Consent) error { return c.Claim("", t2, stale) }).ThenFieldError("workerId")
	})
}

func TestStartAuthorization(t *testing.T) {
	t.Run("the order opens: AWAITING_AUTHORIZATION with its tokens in the personal part", func(t *testing.T) {
		scenario(t).Given(created()).When(func(c *consent.Consent) error { return c.StartAuthorization(order(), t1) }).
			Then(started())
	})
	t.Run("the same order again records nothing, a new one is recorded", func(t *testing.T) {
		scenario(t).Given(created(), started()).When(func(c *consent.Consent) error { return c.StartAuthorization(order(), t2) }).
			Then()
		next := order()
		next.BankConsentID, next.StartedAt, next.Deadline = "bank-c-2", t2, t2.Add(30*time.Second)
		scenario(t).Given(created(), started()).When(func(c *consent.Consent) error { return c.StartAuthorization(next, t2) }).
			Then(consent.AuthorizationStarted{At: t2, Deadline: t2.Add(30 * time.Second), BankConsentID: "bank-c-2",
				Personal: started().Personal})
	})
	t.Run("an order needs the bank's consent id and a deadline after its start", func(t *testing.T) {
		noID, early := order(), order()
		noID.BankConsentID, early.Deadline = "", t1
		scenario(t).Given(created()).When(func(c *consent.Consent) error { return c.StartAuthorization(noID, t1) }).
			ThenFieldError("bankConsentId")
		scenario(t).Given(created()).When(func(c *consent.Consent) error { return c.StartAuthorization(early, t1) }).
			ThenFieldError("deadline")
	})
	t.Run("not once authorized or final", func(t *testing.T) {
		scenario(t).Given(created(), started(), authorized()).
			When(func(c *consent.Consent) error { return c.StartAuthorization(order(), t2) }).ThenError(consent.ErrIllegalTransition)
		scenario(t).Given(created(), consent.Revoked{At: t1, Reason: consent.RevokedByClient}).
			When(func(c *consent.Consent) error { return c.StartAuthorization(order(), t2) }).ThenError(domain.ErrConflict)
	})
}

func TestAuthorize(t *testing.T) {
	t.Run("the signature authorizes it until authorization + validity", func(t *testing.T) {
		scenario(t).Given(created(), started()).When(func(c *consent.Consent) error { return c.Authorize(t2, validity) }).
			Then(authorized())
	})
	t.Run("authorized again records nothing", func(t *testing.T) {
		scenario(t).Given(created(), started(), authorized()).
			When(func(c *consent.Consent) error { return c.Authorize(t2.Add(time.Hour), validity) }).Then()
	})
	t.Run("only an awaiting consent is authorized", func(t *testing.T) {
		scenario(t).Given(created()).When(func(c *consent.Consent) error { return c.Authorize(t2, validity) }).
			ThenError(consent.ErrIllegalTransition)
		scenario(t).Given(created(), started(), consent.Failed{At: t2, Code: consent.FailureAuthenticationCancelled, Message: "m"}).
			When(func(c *consent.Consent) error { return c.Authorize(t2, validity) }).ThenError(consent.ErrIllegalTransition)
		scenario(t).Given(created(), started()).When(func(c *consent.Consent) error { return c.Authorize(t2, 0) }).
			ThenFieldError("validity")
	})
}

func TestFail(t *testing.T) {
	failed := consent.Failed{At: t2, Code: consent.FailureAuthenticationMismatch, Message: "Another person signed."}
	t.Run("an awaiting or initiated consent fails with its code", func(t *testing.T) {
		scenario(t).Given(created(), started()).
			When(func(c *consent.Consent) error { return c.Fail(failed.Code, failed.Message, t2) }).Then(failed)
		scenario(t).Given(created()).
			When(func(c *consent.Consent) error { return c.Fail(failed.Code, failed.Message, t2) }).Then(failed)
	})
	t.Run("a failed one records nothing again; an authorized or revoked one cannot fail", func(t *testing.T) {
		scenario(t).Given(created(), started(), failed).
			When(func(c *consent.Consent) error { return c.Fail(consent.FailureThirdPartyError, "x", t2) }).Then()
		scenario(t).Given(created(), started(), authorized()).
			When(func(c *consent.Consent) error { return c.Fail(consent.FailureThirdPartyError, "x", t2) }).
			ThenError(consent.ErrIllegalTransition)
		scenario(t).Given(created(), consent.Revoked{At: t1, Reason: consent.RevokedByClient}).
			When(func(c *consent.Consent) error { return c.Fail(consent.FailureThirdPartyError, "x", t2) }).
			ThenError(domain.ErrConflict)
	})
	t.Run("only a failure code", func(t *testing.T) {
		scenario(t).Given(created(), started()).
			When(func(c *consent.Consent) error { return c.Fail("AUTHENTICATION_ERROR", "x", t2) }).ThenFieldError("code")
	})
	t.Run("the EID order's deadline fails it with AUTHENTICATION_TIMEOUT, not before", func(t *testing.T) {
		scenario(t).Given(created(), started()).
			When(func(c *consent.Consent) error { return c.TimeOutAuthorization(deadline.Add(-time.Millisecond)) }).Then()
		scenario(t).Given(created(), started()).
			When(func(c *consent.Consent) error { return c.TimeOutAuthorization(deadline) }).
			Then(consent.Failed{At: deadline, Code: consent.FailureAuthenticationTimeout, Message: consent.MessageAuthorizationTimeout})
		scenario(t).Given(created(), started(), authorized()).
			When(func(c *consent.Consent) error { return c.TimeOutAuthorization(deadline.Add(time.Hour)) }).Then()
	})
}

func TestRevoke(t *testing.T) {
	for name, given := range map[string][]domain.Event{
		"INITIATED":              {created()},
		"AWAITING_AUTHORIZATION": {created(), started()},
		"AUTHORIZED":             {created(), started(), authorized()},
	} {
		t.Run("from "+name, func(t *testing.T) {
			scenario(t).Given(given...).When(func(c *consent.Consent) error { return c.Revoke(consent.RevokedByClient, t2) }).
				Then(consent.Revoked{At: t2, Reason: consent.RevokedByClient})
			scenario(t).Given(given...).When(func(c *consent.Consent) error { return c.Revoke(consent.RevokedUserDeleted, t2) }).
				Then(consent.Revoked{At: t2, Reason: consent.RevokedUserDeleted})
		})
	}
	for name, given := range map[string][]domain.Event{
		"FAILED":  {created(), consent.Failed{At: t1, Code: consent.FailureAuthenticationCancelled, Message: "m"}},
		"REVOKED": {created(), consent.Revoked{At: t1, Reason: consent.RevokedByClient}},
		"EXPIRED": {created(), started(), authorized(), consent.Expired{At: t2.Add(validity)}},
	} {
		t.Run("not from "+name, func(t *testing.T) {
			scenario(t).Given(given...).When(func(c *consent.Consent) error { return c.Revoke(consent.RevokedByClient, t2) }).
				ThenError(consent.ErrFinal)
		})
	}
	t.Run("not once past its expiry, recorded or not", func(t *testing.T) {
		scenario(t).Given(created(), started(), authorized()).
			When(func(c *consent.Consent) error { return c.Revoke(consent.RevokedByClient, t2.Add(validity)) }).
			ThenError(consent.ErrFinal)
		if !errors.Is(consent.ErrFinal, domain.ErrConflict) {
			t.Fatal("ErrFinal is not a conflict")
		}
	})
	t.Run("a reason and a consent are required", func(t *testing.T) {
		scenario(t).Given(created()).When(func(c *consent.Consent) error { return c.Revoke("BANK", t2) }).ThenFieldError("reason")
		scenario(t).When(func(c *consent.Consent) error { return c.Revoke(consent.RevokedByClient, t2) }).
			ThenError(consent.ErrNotCreated)
	})
}

func TestExpire(t *testing.T) {
	expiry := t2.Add(validity)
	t.Run("an authorized consent expires at expiresAt", func(t *testing.T) {
		scenario(t).Given(created(), started(), authorized()).
			When(func(c *consent.Consent) error { return c.Expire(expiry) }).Then(consent.Expired{At: expiry})
	})
	t.Run("not before, and nothing but an authorized one", func(t *testing.T) {
		scenario(t).Given(created(), started(), authorized()).
			When(func(c *consent.Consent) error { return c.Expire(expiry.Add(-time.Millisecond)) }).Then()
		scenario(t).Given(created(), started()).When(func(c *consent.Consent) error { return c.Expire(expiry) }).Then()
		scenario(t).Given(created(), started(), authorized(), consent.Revoked{At: t2, Reason: consent.RevokedByClient}).
			When(func(c *consent.Consent) error { return c.Expire(expiry) }).Then()
		scenario(t).Given(created(), started(), authorized(), consent.Expired{At: expiry}).
			When(func(c *consent.Consent) error { return c.Expire(expiry.Add(time.Hour)) }).Then()
	})
}

func TestState(t *testing.T) {
	c := rehydrate(t, created(), consent.Claimed{WorkerID: "w1", ClaimedAt: t1}, started())
	pn := c.PersonalNumber()
	if !c.Exists() || c.ConsentID() != consentID || c.ClientID() != "acme" || c.UserUUID() != userID || c.Company() != bank ||
		c.LoginMethod() != mock || c.Status() != consent.StatusAwaitingAuthorization || pn == nil || *pn != "199001010017" ||
		c.RequestHash() != "hash-1" || c.BankConsentID() != "bank-c-1" || !c.AuthorizationDeadline().Equal(deadline) ||
		c.ClaimedBy() != "w1" || !c.CreatedAt().Equal(t0) || c.Error() != nil || !c.AuthorizedAt().IsZero() {
		t.Fatalf("awaiting consent %+v", c)
	}
	if o := c.AuthorizationOrder(); o == nil || o.QRStartSecret != "secret-1" || o.AutoStartToken != "auto-1" || !o.StartedAt.Equal(t1) {
		t.Fatalf("order %+v", o)
	}
	if c.DataSubject() != domain.UserSubject(userID) {
		t.Fatalf("subject %s", c.DataSubject())
	}
	if err := domain.Rehydrate(c, authorized()); err != nil {
		t.Fatal(err)
	}
	if !c.AuthorizedAt().Equal(t2) || !c.ExpiresAt().Equal(t2.Add(validity)) {
		t.Fatalf("authorized consent %+v", c)
	}
	if c.EffectiveStatus(t2.Add(validity-time.Millisecond)) != consent.StatusAuthorized ||
		c.EffectiveStatus(t2.Add(validity)) != consent.StatusExpired {
		t.Fatal("an authorized consent past expiresAt does not read EXPIRED")
	}

	failed := rehydrate(t, created(), consent.Failed{At: t1, Code: consent.FailureThirdPartyError, Message: "The bank failed."})
	if e := failed.Error(); failed.Status() != consent.StatusFailed || e == nil || e.Code != consent.FailureThirdPartyError ||
		e.Message != "The bank failed." || !failed.EndedAt().Equal(t1) {
		t.Fatalf("failed consent %+v", failed)
	}

	// An erased consent's events have no personal part: they fold, without the number or tokens.
	erasedCreated, erasedStarted := created(), started()
	erasedCreated.Personal, erasedStarted.Personal = nil, nil
	e := rehydrate(t, erasedCreated, erasedStarted)
	if e.PersonalNumber() != nil || e.RequestHash() != "" || e.AuthorizationOrder().QRStartSecret != "" || e.BankConsentID() != "bank-c-1" {
		t.Fatalf("erased consent %+v", e)
	}
	if err := domain.Rehydrate(consent.Kind.New(), struct{ domain.Event }{consent.Expired{}}); err == nil {
		t.Fatal("a consent applied a foreign event")
	}
}

func TestUsable(t *testing.T) {
	live := []domain.Event{created(), started(), authorized()}
	for _, tc := range []struct {
		name             string
		given            []domain.Event
		client, user, co string
		at               time.Time
		want             consent.Reason
		wantOK           bool
	}{
		{"authorized, this client, user and company", live, "acme", userID, bank, t2, "", true},
		{"unknown", nil, "acme", userID, bank, t2, consent.ReasonNotAuthorized, false},
		{"another client's, whatever its state", live, "globex", userID, bank, t2, consent.ReasonNotAuthorized, false},
		{"initiated", []domain.Event{created()}, "acme", userID, bank, t2, consent.ReasonNotAuthorized, false},
		{"awaiting", []domain.Event{created(), started()}, "acme", userID, bank, t2, consent.ReasonNotAuthorized, false},
		{"failed", []domain.Event{created(), consent.Failed{At: t1, Code: consent.FailureAuthenticationCancelled}}, "acme", userID, bank, t2,
			consent.ReasonNotAuthorized, false},
		{"revoked", append(live[:3:3], consent.Revoked{At: t2, Reason: consent.RevokedByClient}), "acme", userID, bank, t2,
			consent.ReasonRevoked, false},
		{"expired, recorded", append(live[:3:3], consent.Expired{At: t2.Add(validity)}), "acme", userID, bank, t2.Add(validity),
			consent.ReasonExpired, false},
		{"expired, not yet recorded", live, "acme", userID, bank, t2.Add(validity), consent.ReasonExpired, false},
		{"another user's", live, "acme", otherUser, bank, t2, consent.ReasonOtherUser, false},
		{"another company's", live, "acme", userID, "se-demo-pension", t2, consent.ReasonOtherCompany, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rehydrate(t, tc.given...)
			if got, ok := c.Usable(tc.client, tc.user, tc.co, tc.at); got != tc.want || ok != tc.wantOK {
				t.Fatalf("Usable = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestUsableForAPerson: a collection that logs in as a person may use only a consent signed for
// that person; one that names nobody is decided as before.
func TestUsableForAPerson(t *testing.T) {
	live := []domain.Event{created(), started(), authorized()} // signed for 199001010017
	erasedCreated := created()
	erasedCreated.Personal = nil
	parse := func(s string) personnummer.Number {
		t.Helper()
		n, err := personnummer.Parse(s, t0)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name   string
		given  []domain.Event
		person personnummer.Number
		want   consent.Reason
		wantOK bool
	}{
		{"given a consent for A, when a collection logs in as A, then it is usable", live, number(t), "", true},
		{"given a consent for A, when a collection names A in a short spelling, then it is usable", live, parse("900101-0017"), "", true},
		{"given a consent for A, when a collection logs in as B, then it is OTHER_USER", live, parse("198507099805"),
			consent.ReasonOtherUser, false},
		{"given a consent for A, when a collection names nobody, then it is usable", live, personnummer.Number{}, "", true},
		{"given an erased consent, when a collection names a person, then it is OTHER_USER",
			[]domain.Event{erasedCreated, started(), authorized()}, number(t), consent.ReasonOtherUser, false},
		{"given an erased consent, when a collection names nobody, then it is usable",
			[]domain.Event{erasedCreated, started(), authorized()}, personnummer.Number{}, "", true},
		{"given a revoked consent for A, when a collection logs in as B, then its status decides first",
			append(live[:3:3], consent.Revoked{At: t2, Reason: consent.RevokedByClient}), parse("198507099805"),
			consent.ReasonRevoked, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rehydrate(t, tc.given...)
			if got, ok := c.UsableFor("acme", userID, bank, tc.person, t2); got != tc.want || ok != tc.wantOK {
				t.Fatalf("UsableFor = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	t.Run("given another client's consent, when a collection logs in as another person, then it is NOT_AUTHORIZED", func(t *testing.T) {
		// A client never learns that another client's consent exists, nor whose it is.
		c := rehydrate(t, live...)
		if got, ok := c.UsableFor("globex", userID, bank, parse("198507099805"), t2); got != consent.ReasonNotAuthorized || ok {
			t.Fatalf("UsableFor = %q, %v; want NOT_AUTHORIZED", got, ok)
		}
	})
}

func TestScope(t *testing.T) {
	all, err := consent.NormalizeScope(nil)
	if err != nil || len(all) != 3 || all[0] != consent.ScopeCheckingAccounts || all[1] != consent.ScopeCreditCards ||
		all[2] != consent.ScopeSavingsAccounts {
		t.Fatalf("default scope %v, %v", all, err)
	}
	for _, s := range consent.AllStatuses() {
		if s.IsFinal() != (s == consent.StatusFailed || s == consent.StatusRevoked || s == consent.StatusExpired) {
			t.Errorf("%s final: %v", s, s.IsFinal())
		}
	}
}
