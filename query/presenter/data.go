package presenter

import (
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/query"
)

// The data endpoints' bodies. A data point the company did not report is left out of its object
// (spec: "missing or null data points mean unknown", and otherInsuredPerson is "field absent"
// when no conclusion is possible), never rendered as 0 or "". Top-level lists are always present,
// [] when the company had none of that product. personalInformation is always present: null
// when unknown on 2026-04-01, an object without the unknown keys on 2025-01-01.

// Money is an amount in a currency (ISO 4217).
type Money struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// Insurance is one insurance (both versions).
type Insurance struct {
	ID               string   `json:"id"`
	InsuranceType    string   `json:"insuranceType"`
	InsuranceNumber  *string  `json:"insuranceNumber,omitempty"`
	DisplayName      *string  `json:"displayName,omitempty"`
	Premium          *float64 `json:"premium,omitempty"`
	PremiumFrequency *string  `json:"premiumFrequency,omitempty"`
	Currency         *string  `json:"currency,omitempty"`
	RenewalDate      *string  `json:"renewalDate,omitempty"`
	StartDate        *string  `json:"startDate,omitempty"`
	HolderName       *string  `json:"holderName,omitempty"`
}

// Pension is one pension (both versions). OtherInsuredPerson is absent when no conclusion was
// possible, as the spec says.
type Pension struct {
	ID                 string  `json:"id"`
	Name               *string `json:"name,omitempty"`
	PensionType        *string `json:"pensionType,omitempty"`
	PolicyNumber       *string `json:"policyNumber,omitempty"`
	Value              *Money  `json:"value,omitempty"`
	MonthlyPayout      *Money  `json:"monthlyPayout,omitempty"`
	PayoutStartDate    *string `json:"payoutStartDate,omitempty"`
	OtherInsuredPerson *bool   `json:"otherInsuredPerson,omitempty"`
	InsuredPersonName  *string `json:"insuredPersonName,omitempty"`
}

// Holding is one position of an investment.
type Holding struct {
	Name     string   `json:"name"`
	ISIN     *string  `json:"isin,omitempty"`
	Quantity *float64 `json:"quantity,omitempty"`
	Value    *Money   `json:"value,omitempty"`
}

// Investment is an investment account or product (both versions). Holdings are left out when
// none were reported: the company's data cannot tell "none" from "not reported".
type Investment struct {
	ID             string    `json:"id"`
	Name           *string   `json:"name,omitempty"`
	InvestmentType *string   `json:"investmentType,omitempty"`
	AccountNumber  *string   `json:"accountNumber,omitempty"`
	Value          *Money    `json:"value,omitempty"`
	Holdings       []Holding `json:"holdings,omitempty"`
}

// Loan is a loan (2026-04-01).
type Loan struct {
	ID             string   `json:"id"`
	Name           *string  `json:"name,omitempty"`
	LoanType       *string  `json:"loanType,omitempty"`
	Outstanding    *Money   `json:"outstanding,omitempty"`
	InterestRate   *float64 `json:"interestRate,omitempty"`
	MonthlyPayment *Money   `json:"monthlyPayment,omitempty"`
}

// Saving is a savings product that is not a PSD2 account (2026-04-01).
type Saving struct {
	ID           string   `json:"id"`
	Name         *string  `json:"name,omitempty"`
	Balance      *Money   `json:"balance,omitempty"`
	InterestRate *float64 `json:"interestRate,omitempty"`
}

// Psd2Account is a PSD2 checking or savings account (2026-04-01: Psd2CheckingAccount and
// Psd2SavingsAccount have the same fields).
type Psd2Account struct {
	ID               string  `json:"id"`
	Name             *string `json:"name,omitempty"`
	IBAN             *string `json:"iban,omitempty"`
	BBAN             *string `json:"bban,omitempty"`
	Currency         *string `json:"currency,omitempty"`
	Balance          *Money  `json:"balance,omitempty"`
	AvailableBalance *Money  `json:"availableBalance,omitempty"`
}

// Psd2CreditCard is a PSD2 credit card (2026-04-01).
type Psd2CreditCard struct {
	ID          string  `json:"id"`
	Name        *string `json:"name,omitempty"`
	MaskedPAN   *string `json:"maskedPan,omitempty"`
	Currency    *string `json:"currency,omitempty"`
	Balance     *Money  `json:"balance,omitempty"`
	CreditLimit *Money  `json:"creditLimit,omitempty"`
}

// PersonalInformation is the typed personalInformation of 2026-04-01.
type PersonalInformation struct {
	PersonalNumber *string  `json:"personalNumber,omitempty"`
	Name           *string  `json:"name,omitempty"`
	FirstName      *string  `json:"firstName,omitempty"`
	LastName       *string  `json:"lastName,omitempty"`
	Address        *Address `json:"address,omitempty"`
	Email          *string  `json:"email,omitempty"`
	PhoneNumber    *string  `json:"phoneNumber,omitempty"`
}

// Address is a postal address.
type Address struct {
	Street     *string `json:"street,omitempty"`
	PostalCode *string `json:"postalCode,omitempty"`
	City       *string `json:"city,omitempty"`
	Country    *string `json:"country,omitempty"`
}

// Keys of the 2025-01-01 personalInformation map. They follow that version's input map
// (UPPER_SNAKE keys such as SWEDISH_PERSONAL_NUMBER) and name exactly the typed object's fields,
// so both versions carry the same facts. A key is present only when its value is known.
const (
	PersonalKeyPersonalNumber    = "PERSONAL_NUMBER"
	PersonalKeyName              = "NAME"
	PersonalKeyFirstName         = "FIRST_NAME"
	PersonalKeyLastName          = "LAST_NAME"
	PersonalKeyEmail             = "EMAIL"
	PersonalKeyPhoneNumber       = "PHONE_NUMBER"
	PersonalKeyAddressStreet     = "ADDRESS_STREET"
	PersonalKeyAddressPostalCode = "ADDRESS_POSTAL_CODE"
	PersonalKeyAddressCity       = "ADDRESS_CITY"
	PersonalKeyAddressCountry    = "ADDRESS_COUNTRY"
)

// InsuranceDataResponse is the body of GET /collections/{collectionId}/insurance/data, the same
// in both versions.
type InsuranceDataResponse struct {
	CollectionID string      `json:"collectionId"`
	Company      string      `json:"company"`
	Insurances   []Insurance `json:"insurances"`
}

// WealthDataV20250101 is the body of GET /collections/{collectionId}/wealth/data on
// 2025-01-01: pensions and investments only, personal information as a key-value map.
type WealthDataV20250101 struct {
	CollectionID        string            `json:"collectionId"`
	Company             string            `json:"company"`
	PersonalInformation map[string]string `json:"personalInformation"`
	Pensions            []Pension         `json:"pensions"`
	Investments         []Investment      `json:"investments"`
}

// WealthDataV20260401 is the body of GET /collections/{collectionId}/wealth/data on
// 2026-04-01: every wealth product, personal information as a typed, nullable object.
type WealthDataV20260401 struct {
	CollectionID         string               `json:"collectionId"`
	Company              string               `json:"company"`
	PersonalInformation  *PersonalInformation `json:"personalInformation"`
	Pensions             []Pension            `json:"pensions"`
	Investments          []Investment         `json:"investments"`
	Loans                []Loan               `json:"loans"`
	Savings              []Saving             `json:"savings"`
	Psd2CheckingAccounts []Psd2Account        `json:"psd2CheckingAccounts"`
	Psd2SavingsAccounts  []Psd2Account        `json:"psd2SavingsAccounts"`
	Psd2CreditCards      []Psd2CreditCard     `json:"psd2CreditCards"`
}

// LegacyInsuranceData is the body of GET /data?collectionId=… (2025-01-01 only) for an
// insurance collection: the insurance data with the product it is.
type LegacyInsuranceData struct {
	CollectionID string      `json:"collectionId"`
	Company      string      `json:"company"`
	Product      string      `json:"product"`
	Insurances   []Insurance `json:"insurances"`
}

// LegacyWealthData is the body of GET /data?collectionId=… for a wealth collection: the
// 2025-01-01 wealth data with the product it is.
type LegacyWealthData struct {
	CollectionID        string            `json:"collectionId"`
	Company             string            `json:"company"`
	Product             string            `json:"product"`
	PersonalInformation map[string]string `json:"personalInformation"`
	Pensions            []Pension         `json:"pensions"`
	Investments         []Investment      `json:"investments"`
}

// InsuranceData presents an insurance collection's data.
func InsuranceData(v query.DataView) InsuranceDataResponse {
	return InsuranceDataResponse{CollectionID: v.CollectionID, Company: v.Company, Insurances: insurances(v.Insurances)}
}

// WealthData presents a wealth collection's data for a client speaking version: a
// WealthDataV20260401 from the preview on, a WealthDataV20250101 before it.
func WealthData(version string, v query.DataView) any {
	if version >= VersionPreview {
		return WealthDataPreview(v)
	}
	return WealthDataStable(v)
}

// WealthDataStable presents wealth data in the 2025-01-01 shape. Loans, savings and PSD2
// products do not exist in that version and are left out.
func WealthDataStable(v query.DataView) WealthDataV20250101 {
	return WealthDataV20250101{
		CollectionID: v.CollectionID, Company: v.Company,
		PersonalInformation: PersonalInformationMap(v.PersonalInformation),
		Pensions:            pensions(v.Pensions), Investments: investments(v.Investments),
	}
}

// WealthDataPreview presents wealth data in the 2026-04-01 shape.
func WealthDataPreview(v query.DataView) WealthDataV20260401 {
	out := WealthDataV20260401{
		CollectionID: v.CollectionID, Company: v.Company,
		PersonalInformation: personalInformation(v.PersonalInformation),
		Pensions:            pensions(v.Pensions), Investments: investments(v.Investments),
		Loans: make([]Loan, 0, len(v.Loans)), Savings: make([]Saving, 0, len(v.Savings)),
		Psd2CheckingAccounts: psd2Accounts(v.CheckingAccounts), Psd2SavingsAccounts: psd2Accounts(v.SavingsAccounts),
		Psd2CreditCards: make([]Psd2CreditCard, 0, len(v.CreditCards)),
	}
	for _, l := range v.Loans {
		out.Loans = append(out.Loans, Loan{ID: l.ID, Name: l.Name, LoanType: l.LoanType, Outstanding: money(l.Outstanding),
			InterestRate: l.InterestRate, MonthlyPayment: money(l.MonthlyPayment)})
	}
	for _, s := range v.Savings {
		out.Savings = append(out.Savings, Saving{ID: s.ID, Name: s.Name, Balance: money(s.Balance), InterestRate: s.InterestRate})
	}
	for _, c := range v.CreditCards {
		out.Psd2CreditCards = append(out.Psd2CreditCards, Psd2CreditCard{ID: c.ID, Name: c.Name, MaskedPAN: c.MaskedPAN,
			Currency: c.Currency, Balance: money(c.Balance), CreditLimit: money(c.CreditLimit)})
	}
	return out
}

// LegacyData presents a collection's data for GET /data (2025-01-01): a LegacyWealthData for a
// wealth collection, a LegacyInsuranceData otherwise.
func LegacyData(v query.DataView) any {
	if v.Product == string(collection.ProductWealth) {
		w := WealthDataStable(v)
		return LegacyWealthData{CollectionID: w.CollectionID, Company: w.Company, Product: v.Product,
			PersonalInformation: w.PersonalInformation, Pensions: w.Pensions, Investments: w.Investments}
	}
	return LegacyInsuranceData{CollectionID: v.CollectionID, Company: v.Company, Product: v.Product,
		Insurances: insurances(v.Insurances)}
}

// PersonalInformationMap is the 2025-01-01 key-value form of personal information: only the
// known values, under the PersonalKey… keys; an empty map when nothing is known.
func PersonalInformationMap(p *query.PersonalInformationView) map[string]string {
	out := map[string]string{}
	if p == nil {
		return out
	}
	put := func(key string, v *string) {
		if v != nil && *v != "" {
			out[key] = *v
		}
	}
	put(PersonalKeyPersonalNumber, p.PersonalNumber)
	put(PersonalKeyName, p.Name)
	put(PersonalKeyFirstName, p.FirstName)
	put(PersonalKeyLastName, p.LastName)
	put(PersonalKeyEmail, p.Email)
	put(PersonalKeyPhoneNumber, p.PhoneNumber)
	if a := p.Address; a != nil {
		put(PersonalKeyAddressStreet, a.Street)
		put(PersonalKeyAddressPostalCode, a.PostalCode)
		put(PersonalKeyAddressCity, a.City)
		put(PersonalKeyAddressCountry, a.Country)
	}
	return out
}

func personalInformation(p *query.PersonalInformationView) *PersonalInformation {
	if p == nil {
		return nil
	}
	out := &PersonalInformation{PersonalNumber: p.PersonalNumber, Name: p.Name, FirstName: p.FirstName,
		LastName: p.LastName, Email: p.Email, PhoneNumber: p.PhoneNumber}
	if a := p.Address; a != nil {
		out.Address = &Address{Street: a.Street, PostalCode: a.PostalCode, City: a.City, Country: a.Country}
	}
	return out
}

func insurances(in []query.InsuranceView) []Insurance {
	out := make([]Insurance, 0, len(in))
	for _, i := range in {
		out = append(out, Insurance{ID: i.ID, InsuranceType: i.InsuranceType, InsuranceNumber: i.InsuranceNumber,
			DisplayName: i.DisplayName, Premium: i.Premium, PremiumFrequency: i.PremiumFrequency, Currency: i.Currency,
			RenewalDate: i.RenewalDate, StartDate: i.StartDate, HolderName: i.HolderName})
	}
	return out
}

func pensions(in []query.PensionView) []Pension {
	out := make([]Pension, 0, len(in))
	for _, p := range in {
		out = append(out, Pension{ID: p.ID, Name: p.Name, PensionType: p.PensionType, PolicyNumber: p.PolicyNumber,
			Value: money(p.Value), MonthlyPayout: money(p.MonthlyPayout), PayoutStartDate: p.PayoutStartDate,
			OtherInsuredPerson: p.OtherInsuredPerson, InsuredPersonName: p.InsuredPersonName})
	}
	return out
}

func investments(in []query.InvestmentView) []Investment {
	out := make([]Investment, 0, len(in))
	for _, i := range in {
		inv := Investment{ID: i.ID, Name: i.Name, InvestmentType: i.InvestmentType, AccountNumber: i.AccountNumber,
			Value: money(i.Value)}
		for _, h := range i.Holdings {
			inv.Holdings = append(inv.Holdings, Holding{Name: h.Name, ISIN: h.ISIN, Quantity: h.Quantity, Value: money(h.Value)})
		}
		out = append(out, inv)
	}
	return out
}

func psd2Accounts(in []query.PSD2AccountView) []Psd2Account {
	out := make([]Psd2Account, 0, len(in))
	for _, a := range in {
		out = append(out, Psd2Account{ID: a.ID, Name: a.Name, IBAN: a.IBAN, BBAN: a.BBAN, Currency: a.Currency,
			Balance: money(a.Balance), AvailableBalance: money(a.AvailableBalance)})
	}
	return out
}

func money(m *query.MoneyView) *Money {
	if m == nil {
		return nil
	}
	return &Money{Amount: m.Amount, Currency: m.Currency}
}
