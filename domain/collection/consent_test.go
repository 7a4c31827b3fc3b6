package collection_test

import (
	"testing"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
)

var bank = collection.Company{ID: "se-demo-bank", Products: []collection.Product{collection.ProductWealth}, Available: true, Consents: true}

func bankStart(used *collection.UsedConsent) collection.StartRequest {
	return collection.StartRequest{CollectionID: "c1", ClientID: "acme", Company: bank, UserUUID: "u1",
		LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK", APIVersion: "2026-04-01", RequestHash: "h", Consent: used}
}

func TestStartWithConsent(t *testing.T) {
	used := func() *collection.UsedConsent {
		return &collection.UsedConsent{ConsentID: "k1", BankConsentID: "bank-consent-1",
			Scope: []consent.Scope{consent.ScopeSavingsAccounts, consent.ScopeCheckingAccounts}}
	}
	t.Run("the consent is recorded on collection.started, its scope sorted", func(t *testing.T) {
		scenario(t).When(func(c *collection.Collection) error { return c.Start(bankStart(used()), t0) }).
			Then(collection.Started{CollectionID: "c1", ClientID: "acme", Company: "se-demo-bank",
				Product: collection.ProductWealth, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",
				APIVersion: "2026-04-01", UserUUID: "u1", StartedAt: t0,
				Consent: &collection.UsedConsent{ConsentID: "k1", BankConsentID: "bank-consent-1",
					Scope: []consent.Scope{consent.ScopeCheckingAccounts, consent.ScopeSavingsAccounts}},
				Personal: &collection.StartedPerson{RequestHash: "h"}})
	})
	t.Run("the collection tells its consent, and a copy of it", func(t *testing.T) {
		c := collection.Kind.New()
		if err := c.Start(bankStart(used()), t0); err != nil {
			t.Fatal(err)
		}
		got := c.Consent()
		if got == nil || got.ConsentID != "k1" || got.BankConsentID != "bank-consent-1" || len(got.Scope) != 2 {
			t.Fatalf("Consent() = %+v", got)
		}
		got.Scope[0] = "CHANGED"
		if c.Consent().Scope[0] != consent.ScopeCheckingAccounts {
			t.Fatal("Consent() shares its scope with the collection")
		}
		without := collection.Kind.New()
		if err := without.Start(bankStart(nil), t0); err != nil {
			t.Fatal(err)
		}
		if without.Consent() != nil {
			t.Fatalf("a collection without consent tells %+v", without.Consent())
		}
	})
	t.Run("a company without consents refuses one", func(t *testing.T) {
		r := bankStart(used())
		r.Company = insurer
		scenario(t).When(func(c *collection.Collection) error { return c.Start(r, t0) }).
			ThenError(collection.ErrConsentNotSupported)
	})
	t.Run("a consent needs the collection's user", func(t *testing.T) {
		r := bankStart(used())
		r.UserUUID = ""
		scenario(t).When(func(c *collection.Collection) error { return c.Start(r, t0) }).
			ThenFieldError(collection.FieldUserUUID)
	})
	t.Run("a consent without the bank's id or a scope is invalid", func(t *testing.T) {
		noBank := used()
		noBank.BankConsentID = ""
		scenario(t).When(func(c *collection.Collection) error { return c.Start(bankStart(noBank), t0) }).
			ThenFieldError(collection.FieldConsent)
		noScope := used()
		noScope.Scope = nil
		scenario(t).When(func(c *collection.Collection) error { return c.Start(bankStart(noScope), t0) }).
			ThenFieldError(collection.FieldConsent)
	})
}
