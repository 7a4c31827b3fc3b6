package collection_test

import (
	"testing"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
)

func TestRecordWealthDecidesOtherInsuredPerson(t *testing.T) {
	pension := func(id, name string, company *bool) collection.CompanyPension {
		return collection.CompanyPension{Pension: collection.Pension{ID: id}, InsuredPersonName: name, CompanyOtherInsuredPerson: company}
	}
	yes, no := true, false
	data := collection.WealthData{Pensions: []collection.CompanyPension{
		pension("P1", "Tolvan Tolvansson", nil), pension("P4", "Tolvan Tolvanson", nil), pension("P6", "Tolvan Tolvansson", &yes)}}
	wealthStarted := func(owner string) collection.Started {
		s := started()
		s.Company, s.Product = "se-demo-pension", collection.ProductWealth
		s.Personal = &collection.StartedPerson{PersonalNumber: "191212121212", AccountOwnerName: owner}
		return s
	}
	record := func(c *collection.Collection) error { return c.RecordWealth(data, t0) }
	names := map[string]string{"P1": "Tolvan Tolvansson", "P4": "Tolvan Tolvanson", "P6": "Tolvan Tolvansson"}
	t.Run("with the account owner's name", func(t *testing.T) {
		scenario(t).Given(wealthStarted("Tolvan Tolvansson"), changed(collection.StatusRunning, collection.StatusCollecting)).
			When(record).Then(collection.WealthCollected{Counts: collection.WealthCounts{Pensions: 3}, CollectedAt: t0,
			PSD2Read: []consent.Scope{}, Personal: &collection.WealthRecords{Pensions: []collection.Pension{
				{ID: "P1", OtherInsuredPerson: &no}, {ID: "P4", OtherInsuredPerson: &yes}, {ID: "P6", OtherInsuredPerson: &yes}},
				InsuredPersonNames: names}})
	})
	t.Run("without it only the company's conclusion stays", func(t *testing.T) {
		scenario(t).Given(wealthStarted(""), changed(collection.StatusRunning, collection.StatusCollecting)).
			When(record).Then(collection.WealthCollected{Counts: collection.WealthCounts{Pensions: 3}, CollectedAt: t0,
			PSD2Read: []consent.Scope{}, Personal: &collection.WealthRecords{Pensions: []collection.Pension{{ID: "P1"}, {ID: "P4"}, {ID: "P6", OtherInsuredPerson: &yes}},
				InsuredPersonNames: names}})
	})
	t.Run("not for an insurance collection", func(t *testing.T) {
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusCollecting)).
			When(record).ThenError(domain.ErrConflict)
	})
}

func TestDocuments(t *testing.T) {
	pdf := []byte("%PDF-1.4 letter")
	t.Run("a PDF upload is recorded with the start", func(t *testing.T) {
		c := collection.Kind.New()
		err := c.Start(collection.StartRequest{CollectionID: "c1", ClientID: "acme", Company: insurer,
			LoginMethod: "PDF_UPLOAD", RequestHash: "h", PDF: &collection.UploadedPDF{DocumentID: "d1", FileName: "l.pdf", Content: pdf}}, t0)
		events := c.Recorded()
		if err != nil || len(events) != 2 {
			t.Fatalf("%v %v", events, err)
		}
		up, ok := events[1].(collection.DocumentUploaded)
		if !ok || up.Size != len(pdf) || len(up.Personal.SHA256) != 64 || up.Personal.FileName != "l.pdf" ||
			string(up.Personal.Content) != string(pdf) {
			t.Fatalf("%#v", events[1])
		}
	})
	t.Run("an empty upload is invalid", func(t *testing.T) {
		scenario(t).When(func(c *collection.Collection) error {
			return c.Start(collection.StartRequest{CollectionID: "c1", ClientID: "acme", Company: insurer,
				LoginMethod: "PDF_UPLOAD", PDF: &collection.UploadedPDF{DocumentID: "d1"}}, t0)
		}).ThenError(domain.ErrInvalid)
	})
	t.Run("a collected document needs COLLECTING and a true digest", func(t *testing.T) {
		doc := collection.NewDocument("d2", collection.DocumentFrenchCareerStatement, "application/pdf", "r.pdf", pdf)
		scenario(t).Given(started()).When(func(c *collection.Collection) error {
			return c.RecordDocument(doc, t0)
		}).ThenError(domain.ErrConflict)
		doc.Personal.SHA256 = "0000000000000000000000000000000000000000000000000000000000000000"
		scenario(t).Given(started(), changed(collection.StatusRunning, collection.StatusCollecting)).
			When(func(c *collection.Collection) error { return c.RecordDocument(doc, t0) }).ThenError(domain.ErrInvalid)
	})
}

// TestRecordWealthKeepsRecordsPersonal: every record is personal data, only the counts are
// public; an event whose personal part was erased still folds, with no records.
func TestRecordWealthKeepsRecordsPersonal(t *testing.T) {
	name := "Bolån Tolvgatan 12"
	data := collection.WealthData{Loans: []collection.Loan{{ID: "L1", Name: &name}},
		CheckingAccounts: []collection.PSD2Account{{ID: "A1"}, {ID: "A2"}}}
	wealthStarted := started()
	wealthStarted.Company, wealthStarted.Product = "se-demo-bank", collection.ProductWealth
	collecting := []domain.Event{wealthStarted, changed(collection.StatusRunning, collection.StatusCollecting)}
	want := collection.WealthCollected{Counts: collection.WealthCounts{Loans: 1, CheckingAccounts: 2}, CollectedAt: t0,
		PSD2Read: []consent.Scope{consent.ScopeCheckingAccounts},
		Personal: &collection.WealthRecords{Loans: data.Loans, CheckingAccounts: data.CheckingAccounts}}
	scenario(t).Given(collecting...).When(func(c *collection.Collection) error { return c.RecordWealth(data, t0) }).Then(want)

	nothing := collection.WealthCollected{CollectedAt: t0, PSD2Read: []consent.Scope{}}
	scenario(t).Given(collecting...).
		When(func(c *collection.Collection) error { return c.RecordWealth(collection.WealthData{}, t0) }).Then(nothing)

	erased := want
	erased.Personal = nil
	if c := rehydrate(t, append(collecting, erased)...); len(c.Wealth()) != 1 || c.Wealth()[0].Personal != nil {
		t.Fatalf("erased wealth folds into %+v", c.Wealth())
	}
}

// TestRecordWealthRecordsThePSD2ProductsRead: the event names the PSD2 products read, sorted and
// once each, also those read and found empty, and always those of which records came; [] (not
// absent) when none was read, so that "read none" and "not recorded" stay apart; an unknown
// product is refused.
func TestRecordWealthRecordsThePSD2ProductsRead(t *testing.T) {
	wealthStarted := started()
	wealthStarted.Company, wealthStarted.Product = "se-demo-bank", collection.ProductWealth
	collecting := []domain.Event{wealthStarted, changed(collection.StatusRunning, collection.StatusCollecting)}
	record := func(d collection.WealthData) func(*collection.Collection) error {
		return func(c *collection.Collection) error { return c.RecordWealth(d, t0) }
	}
	cards := []collection.PSD2CreditCard{{ID: "C1"}}

	t.Run("read and found empty", func(t *testing.T) {
		scenario(t).Given(collecting...).When(record(collection.WealthData{
			PSD2Read: []consent.Scope{consent.ScopeSavingsAccounts, consent.ScopeCheckingAccounts, consent.ScopeSavingsAccounts}})).
			Then(collection.WealthCollected{CollectedAt: t0,
				PSD2Read: []consent.Scope{consent.ScopeCheckingAccounts, consent.ScopeSavingsAccounts}})
	})
	t.Run("records prove the read", func(t *testing.T) {
		scenario(t).Given(collecting...).When(record(collection.WealthData{CreditCards: cards,
			PSD2Read: []consent.Scope{consent.ScopeCheckingAccounts}})).
			Then(collection.WealthCollected{Counts: collection.WealthCounts{CreditCards: 1}, CollectedAt: t0,
				PSD2Read: []consent.Scope{consent.ScopeCheckingAccounts, consent.ScopeCreditCards},
				Personal: &collection.WealthRecords{CreditCards: cards}})
	})
	t.Run("an unknown product", func(t *testing.T) {
		scenario(t).Given(collecting...).When(record(collection.WealthData{PSD2Read: []consent.Scope{"MORTGAGES"}})).
			ThenFieldError("psd2Read[0]")
	})
}
