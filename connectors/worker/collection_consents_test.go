package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/eventschema"
)

// Collections that use a consent: the grant comes from what collection.started recorded (the
// bank's consent id and the scope), and Samla's consent is asked again before each PSD2 read, so
// that a consent revoked or expired meanwhile stops the PSD2 part even while the bank would still
// serve it.

const consentUserUUID = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"

func (e *env) consents() *repository.Repository[*consent.Consent] {
	return repository.New(e.store, e.reg, consent.Kind)
}

// samlaConsent records an authorized consent of the test client's user at the bank, over the
// bank's consent bankID, valid for validity, and returns its id.
func (e *env) samlaConsent(bankID string, validity time.Duration, scope ...consent.Scope) string {
	e.t.Helper()
	co, err := sandbox.Catalog().Get(bankCo)
	if err != nil {
		e.t.Fatal(err)
	}
	pn, err := personnummer.Parse(tolvan, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	id, now := uuid.NewString(), time.Now()
	meta := repository.Meta{Tenant: clientID, Actor: "test"}
	if _, _, err := e.consents().Update(context.Background(), id, meta, func(k *consent.Consent) error {
		if err := k.Create(consent.CreateRequest{ConsentID: id, ClientID: clientID, UserUUID: consentUserUUID,
			Company: co.ForConsent(), LoginMethod: mock, Scope: scope, PersonalNumber: pn, RequestHash: "h"}, now); err != nil {
			return err
		}
		if err := k.StartAuthorization(consent.AuthorizationOrder{BankConsentID: bankID, StartedAt: now,
			Deadline: now.Add(time.Minute)}, now); err != nil {
			return err
		}
		return k.Authorize(now, validity)
	}, repository.NewID()); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) revokeConsent(id string) {
	e.t.Helper()
	if _, _, err := e.consents().Update(context.Background(), id, repository.Meta{Tenant: clientID, Actor: "test"},
		func(k *consent.Consent) error { return k.Revoke(consent.RevokedByClient, time.Now()) }); err != nil {
		e.t.Fatal(err)
	}
}

// startUnder records a bank collection of the richest persona for the consent's user, with the
// consent id k (none when ""), recorded as the start's check found it.
func (e *env) startUnder(k string) (string, eventschema.Envelope) {
	e.t.Helper()
	ctx := context.Background()
	co, err := sandbox.Catalog().Get(bankCo)
	if err != nil {
		e.t.Fatal(err)
	}
	pn, err := personnummer.Parse(tolvan, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	req := collection.StartRequest{CollectionID: uuid.NewString(), ClientID: clientID, Company: co.ForCollection(),
		LoginMethod: mock, APIVersion: "2026-04-01", UserUUID: consentUserUUID, PersonalNumber: pn, RequestHash: "h"}
	if k != "" {
		kc, err := e.consents().Load(ctx, k)
		if err != nil {
			e.t.Fatal(err)
		}
		req.Consent = &collection.UsedConsent{ConsentID: k, BankConsentID: kc.BankConsentID(), Scope: kc.Scope()}
	}
	meta := repository.Meta{Tenant: clientID, Actor: "client:" + clientID}
	if _, _, err := e.repo.Update(ctx, req.CollectionID, meta, func(c *collection.Collection) error { return c.Start(req, time.Now()) },
		repository.NewID()); err != nil {
		e.t.Fatal(err)
	}
	envs, err := e.store.ReadStream(ctx, collection.StreamName(req.CollectionID), 0, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	return req.CollectionID, envs[0]
}

// onLoad runs a function before a numbered load of the consent (1 is the first).
type onLoad struct {
	worker.ConsentLoader
	mu     sync.Mutex
	loads  int
	before map[int]func()
}

func (o *onLoad) Load(ctx context.Context, id string) (*consent.Consent, error) {
	o.mu.Lock()
	o.loads++
	f := o.before[o.loads]
	o.mu.Unlock()
	if f != nil {
		f()
	}
	return o.ConsentLoader.Load(ctx, id)
}

func TestRecordedConsents(t *testing.T) {
	e := newEnv(t, fastSandbox())
	ctx := context.Background()
	grants := worker.RecordedConsents{Consents: e.consents()}

	t.Run("a collection without a consent has no grant", func(t *testing.T) {
		id, _ := e.startUnder("")
		if _, ok, err := grants.PSD2Grant(ctx, e.load(id)); ok || err != nil {
			t.Fatalf("ok %v, err %v", ok, err)
		}
	})
	t.Run("the grant is the bank's consent and the scope the start recorded", func(t *testing.T) {
		k := e.samlaConsent("bank-1", time.Hour, consent.ScopeCreditCards)
		id, _ := e.startUnder(k)
		g, ok, err := grants.PSD2Grant(ctx, e.load(id))
		if err != nil || !ok || g.BankConsentID != "bank-1" || len(g.Scope) != 1 || g.Scope[0] != consent.ScopeCreditCards {
			t.Fatalf("grant %+v ok %v err %v", g, ok, err)
		}
	})
	t.Run("a consent revoked since the start is no longer usable", func(t *testing.T) {
		k := e.samlaConsent("bank-2", time.Hour, consent.ScopeCheckingAccounts)
		id, _ := e.startUnder(k)
		e.revokeConsent(k)
		g, _, err := grants.PSD2Grant(ctx, e.load(id))
		if !errors.Is(err, worker.ErrConsentNotUsable) || g.BankConsentID != "bank-2" {
			t.Fatalf("grant %+v, err %v", g, err)
		}
	})
	t.Run("a consent past its expiry is no longer usable, recorded or not", func(t *testing.T) {
		k := e.samlaConsent("bank-3", time.Hour)
		id, _ := e.startUnder(k)
		later := worker.RecordedConsents{Consents: e.consents(), Clock: func() time.Time { return time.Now().Add(time.Hour) }}
		if _, _, err := later.PSD2Grant(ctx, e.load(id)); !errors.Is(err, worker.ErrConsentNotUsable) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a consent that cannot be loaded is an error, not a refusal", func(t *testing.T) {
		k := e.samlaConsent("bank-4", time.Hour)
		id, _ := e.startUnder(k)
		c := e.load(id)
		failing := worker.RecordedConsents{Consents: &onLoad{ConsentLoader: failingLoader{}}}
		if _, _, err := failing.PSD2Grant(ctx, c); err == nil || errors.Is(err, worker.ErrConsentNotUsable) {
			t.Fatalf("err %v", err)
		}
	})
}

type failingLoader struct{}

func (failingLoader) Load(context.Context, string) (*consent.Consent, error) {
	return nil, errors.New("event store down")
}

func TestCollectionUnderSamlaConsent(t *testing.T) {
	e := newEnv(t, fastSandbox())
	loader := &onLoad{ConsentLoader: e.consents(), before: map[int]func(){}}
	cfg := e.config("w1")
	cfg.Consents, cfg.AccountInformation = worker.RecordedConsents{Consents: loader}, e.companies
	w := e.worker(cfg)
	run := func(k string) *collection.Collection {
		id, started := e.startUnder(k)
		e.handle(w, started)
		return e.waitFinal(id)
	}
	count := func(t *testing.T, c *collection.Collection) [5]int {
		t.Helper()
		if len(c.Wealth()) != 1 || c.Wealth()[0].Personal == nil {
			t.Fatalf("wealth %+v", c.Wealth())
		}
		r := c.Wealth()[0].Personal
		return [5]int{len(r.CheckingAccounts), len(r.SavingsAccounts), len(r.CreditCards), len(r.Loans), len(r.Savings)}
	}
	// reset makes the next collection's loads count from 1, with these hooks.
	reset := func(before map[int]func()) {
		loader.mu.Lock()
		defer loader.mu.Unlock()
		loader.loads, loader.before = 0, before
	}

	t.Run("the PSD2 products of the consent's scope, under its bank consent", func(t *testing.T) {
		scope := []consent.Scope{consent.ScopeCheckingAccounts, consent.ScopeCreditCards}
		bc := e.bankConsent(tolvan, "samla-scope", 0, scope...)
		reset(nil)
		c := run(e.samlaConsent(bc.ID, time.Hour, scope...))
		if got := count(t, c); c.Status() != collection.StatusCompleted || got != [5]int{1, 0, 2, 2, 2} {
			t.Fatalf("%s: checking, savings accounts, cards, loans, savings: %v", c.Status(), got)
		}
	})
	t.Run("revoked in Samla before the PSD2 part: partial, without PSD2, though the bank would serve", func(t *testing.T) {
		bc := e.bankConsent(tolvan, "samla-revoked", 0, allScopes...)
		k := e.samlaConsent(bc.ID, time.Hour, allScopes...)
		reset(map[int]func(){1: func() { e.revokeConsent(k) }})
		c := run(k)
		if got := count(t, c); c.Status() != collection.StatusCompletedPartial || got != [5]int{0, 0, 0, 2, 2} {
			t.Fatalf("%s %v", c.Status(), got)
		}
	})
	t.Run("revoked between the accounts and the cards: partial, with the accounts", func(t *testing.T) {
		bc := e.bankConsent(tolvan, "samla-midway", 0, allScopes...)
		k := e.samlaConsent(bc.ID, time.Hour, allScopes...)
		reset(map[int]func(){2: func() { e.revokeConsent(k) }})
		c := run(k)
		if got := count(t, c); c.Status() != collection.StatusCompletedPartial || got != [5]int{1, 2, 0, 2, 2} {
			t.Fatalf("%s %v", c.Status(), got)
		}
	})
	t.Run("expired in Samla before its expiry is recorded: partial, without PSD2", func(t *testing.T) {
		bc := e.bankConsent(tolvan, "samla-expiring", 0, allScopes...)
		k := e.samlaConsent(bc.ID, 300*time.Millisecond, allScopes...)
		id, started := e.startUnder(k)
		time.Sleep(300 * time.Millisecond)
		reset(nil)
		e.handle(w, started)
		c := e.waitFinal(id)
		if got := count(t, c); c.Status() != collection.StatusCompletedPartial || got != [5]int{0, 0, 0, 2, 2} {
			t.Fatalf("%s %v", c.Status(), got)
		}
	})
	noPersonalData(t, e, tolvan, "Tolvan", "TOLVANSSON")
}
