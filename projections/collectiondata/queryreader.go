package collectiondata

import (
	"context"
	"errors"
	"fmt"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/query"
)

// QueryReader serves the query side's port (query.DataReader) from a Store: it merges the
// personal columns back into the items they belong to and maps the domain types to the port's
// views. It lives with the read model because it is the one place that knows both shapes; the
// service wiring only constructs it.
type QueryReader struct {
	store Store
}

var _ query.DataReader = (*QueryReader)(nil)

// NewQueryReader returns the query.DataReader over store.
func NewQueryReader(store Store) *QueryReader { return &QueryReader{store: store} }

// GetData implements query.DataReader.
func (q *QueryReader) GetData(ctx context.Context, tenant, collectionID string) (query.DataView, error) {
	row, err := q.store.Get(ctx, tenant, collectionID)
	if errors.Is(err, ErrNotFound) {
		return query.DataView{}, fmt.Errorf("collection data %s: %w", collectionID, query.ErrNotFound)
	}
	if err != nil {
		return query.DataView{}, err
	}
	return View(row), nil
}

// GetDocument implements query.DataReader. The newest document of the kind wins (by time, then
// by the revision that recorded it): a company that returns the statement again returns a
// newer one.
func (q *QueryReader) GetDocument(ctx context.Context, tenant, collectionID, kind string) (query.DocumentView, error) {
	docs, err := q.store.Documents(ctx, tenant, collectionID)
	if err != nil {
		return query.DocumentView{}, err
	}
	var newest *Document
	for i := range docs {
		d := &docs[i]
		if d.Kind != kind {
			continue
		}
		if newest == nil || d.At.After(newest.At) || (d.At.Equal(newest.At) && d.Revision > newest.Revision) {
			newest = d
		}
	}
	if newest == nil {
		return query.DocumentView{}, fmt.Errorf("%s document of %s: %w", kind, collectionID, query.ErrNotFound)
	}
	doc, err := q.store.Document(ctx, tenant, collectionID, newest.DocumentID)
	if errors.Is(err, ErrNotFound) {
		return query.DocumentView{}, fmt.Errorf("%s document of %s: %w", kind, collectionID, query.ErrNotFound)
	}
	if err != nil {
		return query.DocumentView{}, err
	}
	if len(doc.Content) == 0 {
		// Erased, or never received: there is no file to serve.
		return query.DocumentView{}, fmt.Errorf("%s document of %s has no content: %w", kind, collectionID, query.ErrNotFound)
	}
	return query.DocumentView{
		DocumentID: doc.DocumentID, Kind: doc.Kind, ContentType: doc.ContentType, FileName: doc.FileName,
		Size: doc.Size, SHA256: doc.SHA256, At: doc.At, Content: doc.Content,
	}, nil
}

// View maps a row to the query side's view, putting each name back on its item.
func View(r Row) query.DataView {
	v := query.DataView{
		CollectionID: r.CollectionID, Tenant: r.Tenant, Company: r.Company, Product: r.Product, Status: r.Status,
		PersonalInformation: personalInformationView(r.Personal.PersonalInformation),
	}
	for _, i := range r.Content.Insurances {
		v.Insurances = append(v.Insurances, query.InsuranceView{
			ID: i.ID, InsuranceType: i.InsuranceType, InsuranceNumber: i.InsuranceNumber, DisplayName: i.DisplayName,
			Premium: i.Premium, PremiumFrequency: i.PremiumFrequency, Currency: i.Currency,
			RenewalDate: i.RenewalDate, StartDate: i.StartDate, HolderName: name(r.Personal.HolderNames, i.ID),
		})
	}
	for _, p := range r.Content.Pensions {
		v.Pensions = append(v.Pensions, query.PensionView{
			ID: p.ID, Name: p.Name, PensionType: p.PensionType, PolicyNumber: p.PolicyNumber,
			Value: money(p.Value), MonthlyPayout: money(p.MonthlyPayout), PayoutStartDate: p.PayoutStartDate,
			OtherInsuredPerson: p.OtherInsuredPerson, InsuredPersonName: name(r.Personal.InsuredPersonNames, p.ID),
		})
	}
	for _, i := range r.Content.Investments {
		inv := query.InvestmentView{ID: i.ID, Name: i.Name, InvestmentType: i.InvestmentType,
			AccountNumber: i.AccountNumber, Value: money(i.Value)}
		for _, h := range i.Holdings {
			inv.Holdings = append(inv.Holdings, query.HoldingView{Name: h.Name, ISIN: h.ISIN, Quantity: h.Quantity, Value: money(h.Value)})
		}
		v.Investments = append(v.Investments, inv)
	}
	for _, l := range r.Content.Loans {
		v.Loans = append(v.Loans, query.LoanView{ID: l.ID, Name: l.Name, LoanType: l.LoanType,
			Outstanding: money(l.Outstanding), InterestRate: l.InterestRate, MonthlyPayment: money(l.MonthlyPayment)})
	}
	for _, s := range r.Content.Savings {
		v.Savings = append(v.Savings, query.SavingView{ID: s.ID, Name: s.Name, Balance: money(s.Balance), InterestRate: s.InterestRate})
	}
	v.CheckingAccounts = accounts(r.Content.CheckingAccounts)
	v.SavingsAccounts = accounts(r.Content.SavingsAccounts)
	for _, c := range r.Content.CreditCards {
		v.CreditCards = append(v.CreditCards, query.PSD2CreditCardView{ID: c.ID, Name: c.Name, MaskedPAN: c.MaskedPAN,
			Currency: c.Currency, Balance: money(c.Balance), CreditLimit: money(c.CreditLimit)})
	}
	return v
}

func accounts(in []collection.PSD2Account) []query.PSD2AccountView {
	var out []query.PSD2AccountView
	for _, a := range in {
		out = append(out, query.PSD2AccountView{ID: a.ID, Name: a.Name, IBAN: a.IBAN, BBAN: a.BBAN,
			Currency: a.Currency, Balance: money(a.Balance), AvailableBalance: money(a.AvailableBalance)})
	}
	return out
}

// name is the personal name recorded for an item, nil when none was (unknown, not "").
func name(names map[string]string, id string) *string {
	if n, ok := names[id]; ok && n != "" {
		return &n
	}
	return nil
}

func money(m *collection.Money) *query.MoneyView {
	if m == nil {
		return nil
	}
	return &query.MoneyView{Amount: m.Amount, Currency: m.Currency}
}

func personalInformationView(p *collection.PersonalInformation) *query.PersonalInformationView {
	if p == nil {
		return nil
	}
	v := &query.PersonalInformationView{PersonalNumber: p.PersonalNumber, Name: p.Name, FirstName: p.FirstName,
		LastName: p.LastName, Email: p.Email, PhoneNumber: p.PhoneNumber}
	if a := p.Address; a != nil {
		v.Address = &query.AddressView{Street: a.Street, PostalCode: a.PostalCode, City: a.City, Country: a.Country}
	}
	return v
}
