package company

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
)

// productReaders turn a product's answer into the port's data. A product missing here is one
// this adapter cannot read.
var productReaders = map[worker.DataProduct]func(companyID string, w wireProduct, d *worker.ProductData) error{
	worker.ProductInsurances:      readInsurances,
	worker.ProductGroupInsurances: readInsurances,
	worker.ProductPensions: func(_ string, w wireProduct, d *worker.ProductData) error {
		d.Pensions = mapPensions(w.Pensions)
		return uniqueIDs(len(w.Pensions), func(i int) string { return w.Pensions[i].ID })
	},
	worker.ProductInvestments: func(_ string, w wireProduct, d *worker.ProductData) error {
		d.Investments = mapInvestments(w.Investments)
		return uniqueIDs(len(w.Investments), func(i int) string { return w.Investments[i].ID })
	},
	worker.ProductAccounts: func(_ string, w wireProduct, d *worker.ProductData) error {
		var err error
		d.CheckingAccounts, d.SavingsAccounts, err = mapAccounts(w.Accounts)
		if err != nil {
			return err
		}
		return uniqueIDs(len(w.Accounts), func(i int) string { return w.Accounts[i].ResourceID })
	},
	worker.ProductCards: func(_ string, w wireProduct, d *worker.ProductData) error {
		var err error
		if d.CreditCards, err = mapCards(w.CardAccounts); err != nil {
			return err
		}
		return uniqueIDs(len(w.CardAccounts), func(i int) string { return w.CardAccounts[i].ResourceID })
	},
	worker.ProductLoans: func(_ string, w wireProduct, d *worker.ProductData) error {
		d.Loans = mapLoans(w.Loans)
		return uniqueIDs(len(w.Loans), func(i int) string { return w.Loans[i].ID })
	},
	worker.ProductSavings: func(_ string, w wireProduct, d *worker.ProductData) error {
		d.Savings = mapSavings(w.Savings)
		return uniqueIDs(len(w.Savings), func(i int) string { return w.Savings[i].ID })
	},
	worker.ProductPersonalInformation: func(_ string, w wireProduct, d *worker.ProductData) error {
		d.PersonalInformation = mapPersonalInformation(w.PersonalInformation)
		return nil
	},
	// The career statement is a PDF, read by FetchProduct itself.
	worker.ProductCareerStatement: nil,
}

func readInsurances(_ string, w wireProduct, d *worker.ProductData) error {
	d.Insurances, d.HolderNames = mapInsurances(w.Insurances)
	return uniqueIDs(len(w.Insurances), func(i int) string { return w.Insurances[i].ID })
}

// FetchProduct reads one data product of an authenticated session.
func (c *Client) FetchProduct(ctx context.Context, companyID string, s worker.CompanySession, product worker.DataProduct) (worker.ProductData, error) {
	read, known := productReaders[product]
	if !known {
		return worker.ProductData{}, fmt.Errorf("data product %q is unknown to this adapter: %w", product, worker.ErrCompanyFailed)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+s.AccessToken)
	if product == worker.ProductCareerStatement {
		h.Set("Accept", "application/pdf")
	}
	op := "product_" + string(product)
	resp, err := c.send(ctx, companyID, s.Reference, op, http.MethodGet, c.sessionPath(s)+"/"+string(product), nil, h)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// Every attempt ran into the request timeout: this product is too slow today.
			return worker.ProductData{}, fmt.Errorf("read %s at %s: %w", product, companyID, worker.ErrProductTimeout)
		}
		return worker.ProductData{}, err
	}
	d := worker.ProductData{Product: product}
	switch {
	case resp.status == http.StatusGatewayTimeout:
		return worker.ProductData{}, fmt.Errorf("read %s at %s (%s): %w", product, companyID, resp.code(), worker.ErrProductTimeout)
	case product == worker.ProductCareerStatement && resp.status == http.StatusNotFound && resp.code() == "NO_CAREER_STATEMENT":
		return d, nil
	case resp.status != http.StatusOK:
		return worker.ProductData{}, resp.failure(companyID, "read "+string(product))
	case product == worker.ProductCareerStatement:
		if !collection.LooksLikePDF(resp.body) {
			return worker.ProductData{}, fmt.Errorf("career statement of %s is not a PDF: %w", companyID, worker.ErrCompanyFailed)
		}
		d.CareerStatement = &worker.Document{FileName: "releve-de-carriere.pdf", ContentType: "application/pdf", Content: resp.body}
		return d, nil
	}
	var w wireProduct
	if err := json.Unmarshal(resp.body, &w); err != nil {
		return worker.ProductData{}, fmt.Errorf("%s of %s are not JSON: %v: %w", product, companyID, err, worker.ErrCompanyFailed)
	}
	if err := read(companyID, w, &d); err != nil {
		return worker.ProductData{}, fmt.Errorf("%s of %s: %w: %w", product, companyID, err, worker.ErrCompanyFailed)
	}
	return d, nil
}

func uniqueIDs(n int, id func(int) string) error {
	seen := make(map[string]bool, n)
	for i := range n {
		if id(i) == "" || seen[id(i)] {
			return errors.New("a missing or repeated id")
		}
		seen[id(i)] = true
	}
	return nil
}

func money(m *wireMoney) *collection.Money {
	if m == nil || m.Amount == nil || m.Currency == "" {
		return nil
	}
	return &collection.Money{Amount: *m.Amount, Currency: m.Currency}
}

// psd2Money reads the Berlin Group's string amounts.
func psd2Money(a *wirePSD2Amount) (*collection.Money, error) {
	if a == nil || a.Amount == "" {
		return nil, nil
	}
	v, err := strconv.ParseFloat(a.Amount, 64)
	if err != nil || a.Currency == "" {
		return nil, fmt.Errorf("amount %q %q is not an amount", a.Amount, a.Currency)
	}
	return &collection.Money{Amount: v, Currency: a.Currency}, nil
}

func mapPensions(in []wirePension) []collection.CompanyPension {
	out := make([]collection.CompanyPension, 0, len(in))
	for _, w := range in {
		p := collection.CompanyPension{Pension: collection.Pension{
			ID: w.ID, Name: collection.Known(w.Name), PensionType: collection.Known(w.PensionType), PolicyNumber: collection.Known(w.PolicyNumber),
			Value: money(w.Value), MonthlyPayout: money(w.MonthlyPayout), PayoutStartDate: collection.Known(w.PayoutStartDate),
		}}
		// The company's own conclusion wins (the spec's rule 1); the domain decides the rest.
		if w.OtherInsuredPerson != nil {
			v := *w.OtherInsuredPerson
			p.CompanyOtherInsuredPerson = &v
		}
		if w.InsuredPersonName != nil {
			p.InsuredPersonName = *w.InsuredPersonName
		}
		out = append(out, p)
	}
	return out
}

func mapInvestments(in []wireInvestment) []collection.Investment {
	out := make([]collection.Investment, 0, len(in))
	for _, w := range in {
		inv := collection.Investment{ID: w.ID, Name: collection.Known(w.Name), InvestmentType: collection.Known(w.AccountType),
			AccountNumber: collection.Known(w.AccountNumber), Value: money(w.Value)}
		for _, h := range w.Holdings {
			inv.Holdings = append(inv.Holdings, collection.Holding{Name: h.Name, ISIN: collection.Known(h.ISIN), Quantity: copyFloat(h.Quantity), Value: money(h.Value)})
		}
		out = append(out, inv)
	}
	return out
}

// balance picks a booked balance (closing, else interim) and an available one.
func balance(bs []wirePSD2Balance, kinds ...string) (*collection.Money, error) {
	for _, kind := range kinds {
		for _, b := range bs {
			if b.BalanceType == kind {
				return psd2Money(&b.BalanceAmount)
			}
		}
	}
	return nil, nil
}

// mapAccounts splits PSD2 accounts by their ISO 20022 cash account type: SVGS is a savings
// account, everything else (CACC, TRAN, SLRY …) a checking account.
func mapAccounts(in []wireAccount) (checking, savings []collection.PSD2Account, err error) {
	checking, savings = []collection.PSD2Account{}, []collection.PSD2Account{}
	for _, w := range in {
		a := collection.PSD2Account{ID: w.ResourceID, Name: collection.Known(w.Name), IBAN: collection.Known(w.IBAN), BBAN: collection.Known(w.BBAN),
			Currency: collection.Known(&w.Currency)}
		if a.Name == nil {
			a.Name = collection.Known(w.Product)
		}
		if a.Balance, err = balance(w.Balances, "closingBooked", "interimBooked"); err != nil {
			return nil, nil, err
		}
		if a.AvailableBalance, err = balance(w.Balances, "interimAvailable", "closingAvailable"); err != nil {
			return nil, nil, err
		}
		if w.CashAccountType == "SVGS" {
			savings = append(savings, a)
		} else {
			checking = append(checking, a)
		}
	}
	return checking, savings, nil
}

func mapCards(in []wireCard) ([]collection.PSD2CreditCard, error) {
	out := make([]collection.PSD2CreditCard, 0, len(in))
	for _, w := range in {
		c := collection.PSD2CreditCard{ID: w.ResourceID, Name: collection.Known(w.Name), MaskedPAN: collection.Known(w.MaskedPan),
			Currency: collection.Known(&w.Currency)}
		if c.Name == nil {
			c.Name = collection.Known(w.Product)
		}
		var err error
		if c.Balance, err = balance(w.Balances, "interimBooked", "closingBooked"); err != nil {
			return nil, err
		}
		if c.CreditLimit, err = psd2Money(w.CreditLimit); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func mapLoans(in []wireLoan) []collection.Loan {
	out := make([]collection.Loan, 0, len(in))
	for _, w := range in {
		out = append(out, collection.Loan{ID: w.ID, Name: collection.Known(w.Name), LoanType: collection.Known(w.LoanType),
			Outstanding: money(w.Outstanding), InterestRate: copyFloat(w.InterestRate), MonthlyPayment: money(w.MonthlyPayment)})
	}
	return out
}

func mapSavings(in []wireSaving) []collection.Saving {
	out := make([]collection.Saving, 0, len(in))
	for _, w := range in {
		out = append(out, collection.Saving{ID: w.ID, Name: collection.Known(w.Name), Balance: money(w.Balance), InterestRate: copyFloat(w.InterestRate)})
	}
	return out
}

func mapPersonalInformation(w *wirePersonalInformation) *collection.PersonalInformation {
	if w == nil {
		return nil
	}
	p := &collection.PersonalInformation{PersonalNumber: w.PersonalNumber, Name: w.Name,
		FirstName: w.FirstName, LastName: w.LastName, Email: w.Email, PhoneNumber: w.PhoneNumber}
	if a := w.Address; a != nil {
		p.Address = &collection.Address{Street: a.Street, PostalCode: a.PostalCode, City: a.City, Country: a.Country}
	}
	return p.Known()
}

func copyFloat(f *float64) *float64 {
	if f == nil {
		return nil
	}
	v := *f
	return &v
}
