package worker_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/samla/samla/connectors/pdfletter"
	"github.com/samla/samla/connectors/sandbox"
	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	dcompany "github.com/samla/samla/domain/company"
)

const (
	pensionCo = "se-demo-pension"
	bankCo    = "se-demo-bank"
	frenchCo  = "fr-demo-pension-info"
)

func TestAuthenticationMismatch(t *testing.T) {
	noData := func(t *testing.T, e *env, id string) {
		t.Helper()
		for _, typ := range e.types(id) {
			if typ == collection.EventInsurancesCollected || typ == collection.EventWealthCollected {
				t.Fatalf("data recorded for the wrong person: %v", e.types(id))
			}
		}
	}
	t.Run("rule a: the EID flow says who signed", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		w := e.worker(e.config("w1"))
		id, started := e.start(insurer, mock, pnMismatch)
		e.handle(w, started)
		e.waitFinal(id)
		want := []collection.Status{S.Login, S.Waiting, collection.StatusAuthenticationMismatch}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		noData(t, e, id)
		noPersonalData(t, e, pnMismatch, "199001010017")
		if got := value(t, e.metrics.ConnectorOutcomes.WithLabelValues(insurer, "AUTHENTICATION_MISMATCH")); got != 1 {
			t.Errorf("outcome counter %v", got)
		}
	})
	t.Run("rule b: the company says who signed in (client-side flow)", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		w := e.worker(e.config("w1"))
		id, started := e.start(insurer, dcompany.LoginEIDSameDeviceClientSide, pnMismatch)
		e.handle(w, started)
		c := e.waitFor(id, "instructions", func(c *collection.Collection) bool { return len(c.Current().Instructions) > 0 })
		e.supplyResponses(id, device(t, c.Current().Instructions)...)
		e.waitFinal(id)
		want := []collection.Status{S.Login, S.Waiting, collection.StatusAuthenticationMismatch}
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		noData(t, e, id)
	})
	t.Run("rule b: only the personal information says who it is", func(t *testing.T) {
		e, h, w := identityHidden(t)
		wrong, started1 := e.start(pensionCo, mock, pnMismatch)
		right, started2 := e.start(pensionCo, mock, tolvan)
		e.handle(w, started1, started2)
		if c := e.waitFinal(wrong); c.Status() != collection.StatusAuthenticationMismatch {
			t.Fatalf("another person's data: %s (%v)", c.Status(), e.statuses(wrong))
		}
		noData(t, e, wrong)
		c := e.waitFinal(right)
		if c.Status() != collection.StatusCompleted {
			t.Fatalf("the right person: %s (%v)", c.Status(), e.statuses(right))
		}
		// The personal information read for the check is the one recorded: read once.
		if pi := c.Wealth()[0].Personal.PersonalInformation; pi == nil || pi.PersonalNumber == nil || *pi.PersonalNumber != tolvan {
			t.Fatalf("personal information %+v", pi)
		}
		if got := h.fetched(worker.ProductPersonalInformation); got != 2 {
			t.Errorf("personal information read %d times for two collections, want 2", got)
		}
	})
	t.Run("rule b at an insurer: personal information read for the check only", func(t *testing.T) {
		e, h, w := identityHidden(t)
		wrong, started1 := e.start(insurer, mock, pnMismatch)
		right, started2 := e.start(insurer, mock, tolvan)
		e.handle(w, started1, started2)
		if c := e.waitFinal(wrong); c.Status() != collection.StatusAuthenticationMismatch {
			t.Fatalf("status %s", c.Status())
		}
		if c := e.waitFinal(right); c.Status() != collection.StatusCompleted || len(c.Insurances()) != 6 {
			t.Fatalf("status %s, %d insurances", c.Status(), len(c.Insurances()))
		}
		if got := h.fetched(worker.ProductPersonalInformation); got != 2 {
			t.Errorf("personal information read %d times, want once per collection", got)
		}
	})
	t.Run("rule d: nothing to compare", func(t *testing.T) {
		e, h, w := identityHidden(t)
		// No personal number in the request: whoever signs in is the user.
		id, started := e.start(insurer, mock, "")
		e.handle(w, started)
		if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
		if got := h.fetched(worker.ProductPersonalInformation); got != 0 {
			t.Errorf("personal information read %d times for nothing", got)
		}
	})
}

// identityHidden is a worker whose company sessions never say who authenticated, so that
// only the personal information can.
func identityHidden(t *testing.T) (*env, *hooked, *worker.Worker) {
	e := newEnv(t, envOptions{})
	h := &hooked{Companies: e.companies, hideIdentity: true}
	cfg := e.config("w1")
	cfg.Companies = h
	return e, h, e.worker(cfg)
}

func letter(t *testing.T, opts pdfletter.SampleOptions) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := pdfletter.WriteSample(&b, opts); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPDFUpload(t *testing.T) {
	e := newEnv(t, envOptions{})
	w := e.worker(e.config("w1"))
	start := func(company string, pdf []byte, owner string) string {
		id, started := e.startWith(startOpts{company: company, loginMethod: dcompany.LoginPDFUpload, pdf: pdf, accountOwnerName: owner})
		e.handle(w, started)
		e.waitFinal(id)
		return id
	}
	path := func(t *testing.T, id string, want ...collection.Status) {
		t.Helper()
		if got := e.statuses(id); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	}

	t.Run("an insurance letter", func(t *testing.T) {
		id := start(insurer, letter(t, pdfletter.SampleOptions{}), "")
		path(t, id, S.Collecting, S.Completed)
		c := e.load(id)
		ins := c.Insurances()
		if len(ins) != 1 || ins[0].InsuranceType != "HOME" || ins[0].Premium == nil || *ins[0].Premium != 289 ||
			ins[0].PremiumFrequency == nil || *ins[0].PremiumFrequency != "MONTHLY" || ins[0].InsuranceNumber == nil || ins[0].RenewalDate == nil {
			t.Fatalf("insurances %+v", ins)
		}
		noPersonalData(t, e, "Tolvan")
	})
	t.Run("at the Estonian insurer, whose only method it is", func(t *testing.T) {
		id := start("ee-demo-insurer", letter(t, pdfletter.SampleOptions{InsuranceType: pdfletter.TypeCar}), "")
		path(t, id, S.Collecting, S.Completed)
	})
	t.Run("a letter with an unreadable field", func(t *testing.T) {
		id := start(insurer, letter(t, pdfletter.SampleOptions{Broken: pdfletter.FieldPremium}), "")
		path(t, id, S.Collecting, collection.StatusFailedPDFParse)
	})
	t.Run("a PDF that is not a letter", func(t *testing.T) {
		id := start(insurer, letter(t, pdfletter.SampleOptions{NotALetter: true}), "")
		path(t, id, S.Collecting, collection.StatusFailedPDFUserInput)
	})
	t.Run("not a PDF at all", func(t *testing.T) {
		id := start(insurer, []byte("just some text"), "")
		path(t, id, S.Collecting, collection.StatusFailedPDFUserInput)
	})
	t.Run("a pension letter at an insurer", func(t *testing.T) {
		id := start(insurer, letter(t, pdfletter.SampleOptions{InsuranceType: pdfletter.TypePension}), "")
		path(t, id, S.Collecting, collection.StatusFailedPDFUserInput)
	})
	t.Run("a pension letter at the French pension service", func(t *testing.T) {
		id := start(frenchCo, letter(t, pdfletter.SampleOptions{InsuranceType: pdfletter.TypePension}), "Tolvan Tolvansson")
		path(t, id, S.Collecting, S.Completed)
		w := e.load(id).Wealth()
		if len(w) != 1 || w[0].Personal == nil || len(w[0].Personal.Pensions) != 1 || w[0].Personal.Pensions[0].OtherInsuredPerson == nil ||
			*w[0].Personal.Pensions[0].OtherInsuredPerson {
			t.Fatalf("wealth %+v", w)
		}
	})
	t.Run("no PDF", func(t *testing.T) {
		// The sessions above log out at their company after their final status.
		waitUntil(t, "earlier sessions to end", func() bool { return w.Running() == 0 })
		requests := e.sb.Stats().Requests
		id := start(insurer, nil, "")
		path(t, id, collection.StatusFailedPDFUserInput)
		if n := e.sb.Stats().Requests - requests; n != 0 {
			t.Errorf("the company was called %d times", n)
		}
	})
}

func ptrBool(b bool) *bool { return &b }

func TestWealth(t *testing.T) {
	e := newEnv(t, fastSandbox())
	w := e.worker(e.config("w1"))
	run := func(company, pn, owner string) *collection.Collection {
		id, started := e.startWith(startOpts{company: company, loginMethod: mock, personalNumber: pn, accountOwnerName: owner})
		e.handle(w, started)
		return e.waitFinal(id)
	}
	other := func(t *testing.T, c *collection.Collection) map[string]*bool {
		t.Helper()
		if c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
		out := map[string]*bool{}
		for _, wc := range c.Wealth() {
			for _, p := range wc.Personal.Pensions {
				out[p.ID] = p.OtherInsuredPerson
			}
		}
		return out
	}

	t.Run("pensions P1-P7 against the account owner's name", func(t *testing.T) {
		c := run(pensionCo, tolvan, "Tolvan Tolvansson")
		got := other(t, c)
		want := map[string]*bool{"P1": ptrBool(false), "P2": ptrBool(false), "P3": ptrBool(false),
			"P4": ptrBool(true), "P5": ptrBool(true), "P6": ptrBool(true), "P7": ptrBool(false)}
		for id, v := range want {
			if got[id] == nil || *got[id] != *v {
				t.Errorf("%s otherInsuredPerson %v, want %v", id, got[id], *v)
			}
		}
		wc := c.Wealth()[0]
		if wc.Personal == nil || len(wc.Personal.Investments) != 3 || wc.Personal.PersonalInformation == nil ||
			wc.Personal.InsuredPersonNames["P2"] != "TOLVANSSON, TOLVAN" {
			t.Fatalf("wealth %+v", wc)
		}
		if len(c.Wealth()) != 1 {
			t.Errorf("%d wealth events, want one with everything", len(c.Wealth()))
		}
	})
	t.Run("pensions P1-P7 without a name", func(t *testing.T) {
		got := other(t, run(pensionCo, tolvan, ""))
		for _, id := range []string{"P1", "P2", "P3", "P4", "P5", "P7"} {
			if got[id] != nil {
				t.Errorf("%s otherInsuredPerson %v, want absent", id, *got[id])
			}
		}
		if got["P6"] == nil || !*got["P6"] {
			t.Errorf("P6 keeps the company's true, got %v", got["P6"])
		}
	})
	t.Run("loans and savings at the bank; no PSD2 product without a consent", func(t *testing.T) {
		c := run(bankCo, tolvan, "")
		if c.Status() != collection.StatusCompleted || len(c.Wealth()) != 1 {
			t.Fatalf("status %s, %d wealth events", c.Status(), len(c.Wealth()))
		}
		wc := c.Wealth()[0]
		if r := wc.Personal; r == nil || len(r.CheckingAccounts) != 0 || len(r.SavingsAccounts) != 0 || len(r.CreditCards) != 0 ||
			len(r.Loans) != 2 || len(r.Savings) != 2 {
			t.Fatalf("bank data %+v", wc)
		}
		if pi := wc.Personal.PersonalInformation; pi == nil || pi.Email == nil {
			t.Fatalf("personal information %+v", pi)
		}
	})
	t.Run("the French pension service: enrollment check and career statement", func(t *testing.T) {
		c := run(frenchCo, tolvan, "Tolvan Tolvansson")
		if c.Status() != collection.StatusCompleted {
			t.Fatalf("status %s", c.Status())
		}
		st := e.statuses(c.ID())
		if !slices.Contains(st, sOther.EnrollmentCheck) || last(st) != S.Completed {
			t.Fatalf("statuses %v", st)
		}
		docs := c.Documents()
		if len(docs) != 1 || docs[0].Kind != collection.DocumentFrenchCareerStatement || docs[0].ContentType != "application/pdf" ||
			docs[0].Personal == nil || !collection.LooksLikePDF(docs[0].Personal.Content) {
			t.Fatalf("documents %+v", docs)
		}
		if len(c.Wealth()) != 1 || c.Wealth()[0].Personal == nil || len(c.Wealth()[0].Personal.Pensions) != 2 {
			t.Fatalf("wealth %+v", c.Wealth())
		}
	})
	t.Run("a product times out: the rest is recorded, partial", func(t *testing.T) {
		for _, co := range []string{pensionCo, bankCo, frenchCo} {
			c := run(co, pnPartial, "")
			if c.Status() != collection.StatusCompletedPartial || len(c.Wealth()) != 1 ||
				(c.Wealth()[0].Counts == collection.WealthCounts{} && c.Wealth()[0].Personal.PersonalInformation == nil) {
				t.Errorf("%s: status %s, wealth %+v", co, c.Status(), c.Wealth())
			}
		}
	})
	t.Run("no products: empty", func(t *testing.T) {
		for _, co := range []string{pensionCo, bankCo, frenchCo} {
			c := run(co, pnEmpty, "")
			// One wealth event says what was read and that it held nothing.
			if c.Status() != collection.StatusCompletedEmpty || len(c.Wealth()) != 1 || c.Wealth()[0].Counts != (collection.WealthCounts{}) ||
				c.Wealth()[0].Personal != nil || c.Wealth()[0].PSD2Read == nil || len(c.Documents()) != 0 {
				t.Errorf("%s: status %s, wealth %+v", co, c.Status(), c.Wealth())
			}
		}
	})
	t.Run("the company fails while collecting", func(t *testing.T) {
		c := run(pensionCo, pnThirdParty, "")
		want := []collection.Status{S.Login, S.Waiting, S.Collecting, collection.StatusThirdPartyError}
		if got := e.statuses(c.ID()); !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	})
	noPersonalData(t, e, tolvan, "Tolvan", "TOLVANSSON", "Elin", "tolvan.tolvansson@example.se")
}

func TestEveryLoginMethodAtEveryCompany(t *testing.T) {
	// Every company of the catalog with every login method SANDBOX.md lists, for the default
	// persona; the other-device method is signed by the test, the client-side one run by it.
	e := newEnv(t, fastSandbox(sandbox.WithEIDOrderTimeout(5*time.Second)))
	w := e.worker(e.config("w1"))
	pdf := map[string][]byte{
		insurer: letter(t, pdfletter.SampleOptions{}), "ee-demo-insurer": letter(t, pdfletter.SampleOptions{}),
		frenchCo: letter(t, pdfletter.SampleOptions{InsuranceType: pdfletter.TypePension}),
	}
	n := 0
	for _, co := range []string{insurer, pensionCo, bankCo, frenchCo, "ee-demo-insurer"} {
		company, err := e.catalog.Get(co)
		if err != nil {
			t.Fatal(err)
		}
		for _, method := range company.LoginMethods {
			n++
			pn := []string{"198409091231", "198510101234", "198601011235", "198005051233", "198106061230", "198207071237", "198308081234"}[n%7]
			var doc []byte
			if method == dcompany.LoginPDFUpload {
				doc = pdf[co]
			}
			id, started := e.startWith(startOpts{company: co, loginMethod: method, personalNumber: pn, pdf: doc})
			e.handle(w, started)
			switch method {
			case dcompany.LoginEIDOtherDevice:
				e.waitFor(id, "the EID order", func(c *collection.Collection) bool { return c.Current().EIDOrder != nil })
				if _, err := e.sb.EID().SignByReference(id, time.Now()); err != nil {
					t.Fatal(err)
				}
			case dcompany.LoginEIDSameDeviceClientSide:
				c := e.waitFor(id, "instructions", func(c *collection.Collection) bool { return len(c.Current().Instructions) > 0 })
				e.supplyResponses(id, device(t, c.Current().Instructions)...)
			}
			if c := e.waitFinal(id); c.Status() != collection.StatusCompleted {
				t.Errorf("%s with %s: %s (%v)", co, method, c.Status(), e.statuses(id))
			}
		}
	}
}
