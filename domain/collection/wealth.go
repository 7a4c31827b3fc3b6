package collection

import (
	"fmt"
	"slices"
	"time"

	"github.com/samla/samla/domain"

	"github.com/samla/samla/domain/consent"
)

// Money is an amount in a currency (ISO 4217).
type Money struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// Pension is one pension. OtherInsuredPerson is the conclusion of the spec's rule, decided when
// the data was recorded; nil means no conclusion was possible.
type Pension struct {
	ID                 string  `json:"id"`
	Name               *string `json:"name,omitempty"`
	PensionType        *string `json:"pensionType,omitempty"`
	PolicyNumber       *string `json:"policyNumber,omitempty"`
	Value              *Money  `json:"value,omitempty"`
	MonthlyPayout      *Money  `json:"monthlyPayout,omitempty"`
	PayoutStartDate    *string `json:"payoutStartDate,omitempty"`
	OtherInsuredPerson *bool   `json:"otherInsuredPerson,omitempty"`
}

// Holding is one position of an investment.
type Holding struct {
	Name     string   `json:"name"`
	ISIN     *string  `json:"isin,omitempty"`
	Quantity *float64 `json:"quantity,omitempty"`
	Value    *Money   `json:"value,omitempty"`
}

// Investment is an investment account or product.
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

// PSD2Account is a checking or savings account read over PSD2 (2026-04-01).
type PSD2Account struct {
	ID               string  `json:"id"`
	Name             *string `json:"name,omitempty"`
	IBAN             *string `json:"iban,omitempty"`
	BBAN             *string `json:"bban,omitempty"`
	Currency         *string `json:"currency,omitempty"`
	Balance          *Money  `json:"balance,omitempty"`
	AvailableBalance *Money  `json:"availableBalance,omitempty"`
}

// PSD2CreditCard is a credit card read over PSD2 (2026-04-01).
type PSD2CreditCard struct {
	ID          string  `json:"id"`
	Name        *string `json:"name,omitempty"`
	MaskedPAN   *string `json:"maskedPan,omitempty"`
	Currency    *string `json:"currency,omitempty"`
	Balance     *Money  `json:"balance,omitempty"`
	CreditLimit *Money  `json:"creditLimit,omitempty"`
}

// PersonalInformation is what the company knows of the person. Every field is unknown when nil.
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

// WealthCollected records the wealth data a company returned. Every record is personal data
// (schema v2): account numbers, IBANs, masked card numbers, policy numbers, balances and the
// names a person gives a product ("Bolån Tolvgatan 12" is an address) describe one person, so
// they sit in Personal with the personal information and the insured persons' names, and only
// how many records of each kind there were is public.
//
// PSD2Read (schema v3) names the PSD2 products the connector read, by the consent scope value
// that covers each; a PSD2 product it does not name was not read (no consent, outside the
// consent's scope, or the consent ended first), so its list is unknown rather than empty. Which
// products were read names no one and is public, so the audit keeps it after an erasure. nil
// means not recorded (an event written before v3): readers treat such data as they did before;
// every writer since records a list, [] when it read none.
type WealthCollected struct {
	Counts      WealthCounts    `json:"counts"`
	CollectedAt time.Time       `json:"collectedAt"`
	PSD2Read    []consent.Scope `json:"psd2Read,omitzero"`
	Personal    *WealthRecords  `json:"personal,omitempty"`
}

// WealthCounts is how many records of each kind a WealthCollected holds, under the data
// endpoints' list names: what the audit history shows, also after an erasure.
type WealthCounts struct {
	Pensions         int `json:"pensions"`
	Investments      int `json:"investments"`
	Loans            int `json:"loans"`
	Savings          int `json:"savings"`
	CheckingAccounts int `json:"psd2CheckingAccounts"`
	SavingsAccounts  int `json:"psd2SavingsAccounts"`
	CreditCards      int `json:"psd2CreditCards"`
}

// WealthRecords is the personal part of WealthCollected: the records, what the company knows of
// the person, and the insured persons' names by pension id.
type WealthRecords struct {
	Pensions            []Pension            `json:"pensions,omitempty"`
	Investments         []Investment         `json:"investments,omitempty"`
	Loans               []Loan               `json:"loans,omitempty"`
	Savings             []Saving             `json:"savings,omitempty"`
	CheckingAccounts    []PSD2Account        `json:"psd2CheckingAccounts,omitempty"`
	SavingsAccounts     []PSD2Account        `json:"psd2SavingsAccounts,omitempty"`
	CreditCards         []PSD2CreditCard     `json:"psd2CreditCards,omitempty"`
	PersonalInformation *PersonalInformation `json:"personalInformation,omitempty"`
	InsuredPersonNames  map[string]string    `json:"insuredPersonNames,omitempty"`
}

// counts is how many records of each kind r holds.
func (r *WealthRecords) counts() WealthCounts {
	return WealthCounts{Pensions: len(r.Pensions), Investments: len(r.Investments), Loans: len(r.Loans),
		Savings: len(r.Savings), CheckingAccounts: len(r.CheckingAccounts), SavingsAccounts: len(r.SavingsAccounts),
		CreditCards: len(r.CreditCards)}
}

// isZero reports whether r records nothing at all.
func (r *WealthRecords) isZero() bool {
	return r.counts() == WealthCounts{} && r.PersonalInformation == nil && len(r.InsuredPersonNames) == 0
}

// WealthData is what a connector read from a company, before the domain's rules ran on it.
type WealthData struct {
	Pensions            []CompanyPension
	Investments         []Investment
	Loans               []Loan
	Savings             []Saving
	CheckingAccounts    []PSD2Account
	SavingsAccounts     []PSD2Account
	CreditCards         []PSD2CreditCard
	PersonalInformation *PersonalInformation
	// PSD2Read names the PSD2 products the connector read (whether or not it found any), by
	// their consent scope values; those it leaves out stay unknown.
	PSD2Read []consent.Scope
}

// psd2Read is the recorded form of the PSD2 products read: sorted, without repeats, never nil,
// and including every product of which records came (records prove the read). An unknown value
// is a *domain.FieldError.
func (d WealthData) psd2Read() ([]consent.Scope, error) {
	out := make([]consent.Scope, 0, 3)
	add := func(s consent.Scope) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for i, s := range d.PSD2Read {
		if !slices.Contains(consent.AllScopes(), s) {
			return nil, &domain.FieldError{Field: fmt.Sprintf("psd2Read[%d]", i),
				Reason: "must name CHECKING_ACCOUNTS, SAVINGS_ACCOUNTS or CREDIT_CARDS"}
		}
		add(s)
	}
	if len(d.CheckingAccounts) > 0 {
		add(consent.ScopeCheckingAccounts)
	}
	if len(d.SavingsAccounts) > 0 {
		add(consent.ScopeSavingsAccounts)
	}
	if len(d.CreditCards) > 0 {
		add(consent.ScopeCreditCards)
	}
	slices.Sort(out)
	return out, nil
}

// CompanyPension is a pension as the company reported it: its own otherInsuredPerson
// conclusion, when it has one, and the insured person's name.
type CompanyPension struct {
	Pension
	CompanyOtherInsuredPerson *bool
	InsuredPersonName         string
}

// Document kinds.
const (
	DocumentUploadedPDF           = "UPLOADED_PDF"
	DocumentFrenchCareerStatement = "FRENCH_CAREER_STATEMENT"
)

// Document describes a file kept with a collection. Its file name (which may name the person)
// and digest (which confirms a guessed file) are personal data with the content (schema v2);
// its kind, type, size and time are public.
type Document struct {
	DocumentID  string           `json:"documentId"`
	Kind        string           `json:"kind"`
	ContentType string           `json:"contentType"`
	Size        int              `json:"size"`
	At          time.Time        `json:"at"`
	Personal    *DocumentContent `json:"personal,omitempty"`
}

// DocumentContent is the personal part of a Document: the file (base64 in JSON), its name, ""
// when it has none, and its SHA-256 in hex.
type DocumentContent struct {
	FileName string `json:"fileName,omitempty"`
	SHA256   string `json:"sha256"`
	Content  []byte `json:"content"`
}

// DocumentUploaded records a PDF the client uploaded with PDF_UPLOAD.
type DocumentUploaded struct{ Document }

// DocumentCollected records a document a company returned (the French career statement).
type DocumentCollected struct{ Document }
