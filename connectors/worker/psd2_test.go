package worker_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
)

// grants are the collections' consents by collection id, as the consent step of a collection
// will record them; err makes every lookup fail (the event store down).
type grants struct {
	mu      sync.Mutex
	byID    map[string]worker.PSD2Grant
	err     error
	lookups int
}

func (g *grants) PSD2Grant(_ context.Context, c *collection.Collection) (worker.PSD2Grant, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lookups++
	if g.err != nil {
		return worker.PSD2Grant{}, false, g.err
	}
	gr, ok := g.byID[c.ID()]
	return gr, ok, nil
}

func (g *grants) set(collectionID string, gr worker.PSD2Grant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.byID[collectionID] = gr
}

func (g *grants) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.err = err
}

func (g *grants) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lookups
}

var allScopes = []consent.Scope{consent.ScopeCheckingAccounts, consent.ScopeCreditCards, consent.ScopeSavingsAccounts}

// bankConsent asks the sandbox bank for a consent through the adapter and waits until it is
// authorized (the MOCK EID signs by itself).
func (e *env) bankConsent(pn, ref string, validity time.Duration, scope ...consent.Scope) worker.BankConsent {
	e.t.Helper()
	ctx := context.Background()
	bc, err := e.companies.CreateConsent(ctx, bankCo, worker.BankConsentRequest{PersonalNumber: pn, LoginMethod: mock,
		Scope: scope, Reference: ref, Validity: validity})
	if err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for bc.State == worker.BankConsentPending && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if bc, err = e.companies.ConsentStatus(ctx, bankCo, bc.ID); err != nil {
			e.t.Fatal(err)
		}
	}
	if bc.State != worker.BankConsentAuthorized {
		e.t.Fatalf("bank consent %+v", bc)
	}
	return bc
}

func TestPSD2ProductsOnlyUnderAConsent(t *testing.T) {
	e := newEnv(t, fastSandbox())
	g := &grants{byID: map[string]worker.PSD2Grant{}}
	cfg := e.config("w1")
	cfg.Consents, cfg.AccountInformation = g, e.companies
	w := e.worker(cfg)
	// run starts a bank collection of the richest persona under grant (none when nil).
	run := func(company string, grant *worker.PSD2Grant) *collection.Collection {
		id, started := e.startWith(startOpts{company: company, loginMethod: mock, personalNumber: tolvan})
		if grant != nil {
			g.set(id, *grant)
		}
		e.handle(w, started)
		return e.waitFinal(id)
	}
	records := func(t *testing.T, c *collection.Collection) *collection.WealthRecords {
		t.Helper()
		if len(c.Wealth()) != 1 || c.Wealth()[0].Personal == nil {
			t.Fatalf("wealth %+v", c.Wealth())
		}
		return c.Wealth()[0].Personal
	}
	count := func(r *collection.WealthRecords) [5]int {
		return [5]int{len(r.CheckingAccounts), len(r.SavingsAccounts), len(r.CreditCards), len(r.Loans), len(r.Savings)}
	}
	// read checks the PSD2 products the wealth event says were read: recorded ([] for none),
	// sorted, those of the scope the bank served.
	read := func(t *testing.T, c *collection.Collection, want ...consent.Scope) {
		t.Helper()
		got := c.Wealth()[0].PSD2Read
		if got == nil || !slices.Equal(got, want) {
			t.Errorf("PSD2 products read %#v, want %v", got, want)
		}
	}

	t.Run("every PSD2 product of the scope", func(t *testing.T) {
		bc := e.bankConsent(tolvan, "consent-all", 0, allScopes...)
		c := run(bankCo, &worker.PSD2Grant{BankConsentID: bc.ID, Scope: allScopes})
		if c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
		if got := count(records(t, c)); got != [5]int{1, 2, 2, 2, 2} {
			t.Fatalf("checking, savings accounts, cards, loans, savings: %v", got)
		}
		read(t, c, allScopes...)
	})
	t.Run("only what the scope names", func(t *testing.T) {
		for _, tc := range []struct {
			scope []consent.Scope
			want  [5]int
		}{
			{[]consent.Scope{consent.ScopeCheckingAccounts}, [5]int{1, 0, 0, 2, 2}},
			{[]consent.Scope{consent.ScopeSavingsAccounts}, [5]int{0, 2, 0, 2, 2}},
			{[]consent.Scope{consent.ScopeCreditCards}, [5]int{0, 0, 2, 2, 2}},
		} {
			bc := e.bankConsent(tolvan, "consent-"+string(tc.scope[0]), 0, tc.scope...)
			c := run(bankCo, &worker.PSD2Grant{BankConsentID: bc.ID, Scope: tc.scope})
			if got := count(records(t, c)); c.Status() != collection.StatusCompleted || got != tc.want {
				t.Errorf("%v: %s %v, want %v", tc.scope, c.Status(), got, tc.want)
			}
			read(t, c, tc.scope...)
		}
	})
	t.Run("without a consent: loans and savings, no PSD2 product", func(t *testing.T) {
		c := run(bankCo, nil)
		if got := count(records(t, c)); c.Status() != collection.StatusCompleted || got != [5]int{0, 0, 0, 2, 2} {
			t.Fatalf("%s %v", c.Status(), got)
		}
		read(t, c)
	})
	t.Run("a consent the bank no longer honours: partial, with the rest", func(t *testing.T) {
		revoked := e.bankConsent(tolvan, "consent-revoked", 0, allScopes...)
		if err := e.companies.RevokeConsent(context.Background(), bankCo, revoked.ID); err != nil {
			t.Fatal(err)
		}
		expired := e.bankConsent(tolvan, "consent-expired", time.Second, allScopes...)
		time.Sleep(time.Until(expired.ValidUntil))
		for name, bc := range map[string]worker.BankConsent{"revoked": revoked, "expired": expired} {
			c := run(bankCo, &worker.PSD2Grant{BankConsentID: bc.ID, Scope: allScopes})
			if got := count(records(t, c)); c.Status() != collection.StatusCompletedPartial || got != [5]int{0, 0, 0, 2, 2} {
				t.Errorf("%s: %s %v", name, c.Status(), got)
			}
			read(t, c)
		}
	})
	t.Run("companies without consents are not asked", func(t *testing.T) {
		before := g.count()
		bc := e.bankConsent(tolvan, "consent-pension", 0, allScopes...)
		c := run(pensionCo, &worker.PSD2Grant{BankConsentID: bc.ID, Scope: allScopes})
		if r := records(t, c); c.Status() != collection.StatusCompleted || len(r.CheckingAccounts)+len(r.CreditCards) != 0 || g.count() != before {
			t.Fatalf("%s %+v, %d lookups", c.Status(), r, g.count()-before)
		}
		read(t, c)
	})
	t.Run("a grant that cannot be read now leaves the collection for later", func(t *testing.T) {
		bc := e.bankConsent(tolvan, "consent-later", 0, allScopes...)
		g.fail(errors.New("event store down"))
		id, started := e.startWith(startOpts{company: bankCo, loginMethod: mock, personalNumber: tolvan})
		g.set(id, worker.PSD2Grant{BankConsentID: bc.ID, Scope: allScopes})
		e.handle(w, started)
		e.waitFor(id, "COLLECTING", func(c *collection.Collection) bool { return c.Status() == collection.StatusCollecting })
		deadline := time.Now().Add(5 * time.Second)
		for w.Running() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if c := e.load(id); c.Status() != collection.StatusCollecting || len(c.Wealth()) != 0 {
			t.Fatalf("status %s, wealth %+v", c.Status(), c.Wealth())
		}
		g.fail(nil)
		if err := w.Resume(context.Background(), []string{id}); err != nil {
			t.Fatal(err)
		}
		c := e.waitFinal(id)
		if got := count(records(t, c)); c.Status() != collection.StatusCompleted || got != [5]int{1, 2, 2, 2, 2} {
			t.Fatalf("%s %v", c.Status(), got)
		}
		read(t, c, allScopes...)
	})
	noPersonalData(t, e, tolvan, "Tolvan", "TOLVANSSON")
}

func TestConsentsNeedAccountInformation(t *testing.T) {
	e := newEnv(t, fastSandbox())
	cfg := e.config("w1")
	cfg.Consents = &grants{byID: map[string]worker.PSD2Grant{}}
	defer func() {
		if recover() == nil {
			t.Fatal("a worker with consents and no way to read under them was built")
		}
	}()
	worker.New(cfg)
}
