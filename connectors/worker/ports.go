package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/consent"
)

// Repository is the part of the command repository a worker needs;
// *repository.Repository[*collection.Collection] satisfies it. Every change goes through Update.
type Repository interface {
	Load(ctx context.Context, collectionID string) (*collection.Collection, error)
	// Refresh returns c when its stream has not moved since c was loaded or updated, else
	// the collection loaded anew.
	Refresh(ctx context.Context, collectionID string, c *collection.Collection) (*collection.Collection, error)
	Update(ctx context.Context, collectionID string, meta repository.Meta, decide func(*collection.Collection) error,
		opts ...repository.UpdateOption) (*collection.Collection, eventstore.AppendResult, error)
}

// Catalog tells which companies exist and which login methods they support; *company.Catalog
// (domain/company) satisfies it.
type Catalog interface {
	Get(companyID string) (company.Company, error)
}

// Erasures tells whether a data subject was erased: its key destroyed because its user was
// deleted (keystore.Erasures over the process's key cache satisfies it). A worker drives no
// collection of an erased subject: it would log in with a personal number it can no longer
// read, skip the check of who signed, and collect data for a person who asked to be forgotten.
type Erasures interface {
	Erased(ctx context.Context, subject string) (bool, error)
}

// ActiveCollections lists collections that have not reached a final status (the status read
// model), so that a sweep can re-drive sessions nobody runs any more; the sweep pages through
// them (sweepCursor).
type ActiveCollections interface {
	// ListNonFinal returns the ids of up to limit non-final collections (limit <= 0: all),
	// oldest first (by creation, then id), starting after the collection afterID created at
	// afterCreatedAt (afterID "": from the oldest), and the creation time of the last id it
	// returns, where with that id the next page starts.
	ListNonFinal(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) (ids []string, lastCreatedAt time.Time, err error)
}

// Companies is the port to the companies' login and data APIs. One adapter serves every
// company it knows how to reach; it translates the company's vocabulary into this one and
// retries what is worth retrying, so an error here means the company could not be used
// (ErrCompanyFailed) unless it is one of the more precise errors below.
//
// A login runs StartLogin, then PollLogin until the session is LoginAuthenticated or
// LoginFailed, answering what the session asks for on the way: the EID order to show
// (LoginAwaitingUser), instructions for the client (LoginAwaitingClient, answered with
// SubmitClientResponses), values from the user (LoginContactFormRequired, LoginInputRequired,
// answered with SubmitInputs). Deadlines for the user are Samla's: the company waits as long as
// its session lives. Once authenticated, every product in CompanySession.Products is read with
// FetchProduct.
type Companies interface {
	// StartLogin opens a login session at the company; for PDF_UPLOAD it also uploads
	// LoginRequest.Document, so the session it returns is already read (authenticated, or failed
	// with FAILED_PDF_PARSE or FAILED_PDF_USER_INPUT). ErrLoginMethodNotSupported means the
	// company refuses the method; ErrCompanyUnavailable that it is in maintenance.
	StartLogin(ctx context.Context, companyID string, req LoginRequest) (CompanySession, error)
	// PollLogin reads the session's current state.
	PollLogin(ctx context.Context, companyID string, session CompanySession) (CompanySession, error)
	// SubmitInputs sends the values the session asked for (RequiredInputTypes). An
	// *InputRejectedError (ErrInputRejected) changes nothing at the company; ErrNotAwaiting
	// means the session does not take input now.
	SubmitInputs(ctx context.Context, companyID string, session CompanySession, inputs []collection.Input) (CompanySession, error)
	// SubmitClientResponses forwards the client's ResponseObject for the session's
	// Instructions. Responses the company cannot use fail the login: the session comes back
	// LoginFailed with Outcome AUTHENTICATION_ERROR, and no error. ErrNotAwaiting means the
	// session takes no responses now.
	SubmitClientResponses(ctx context.Context, companyID string, session CompanySession, responses []collection.ClientResponse) (CompanySession, error)
	// FetchProduct reads one data product of an authenticated session. ErrProductTimeout means
	// this product could not be had in time while the others may still be read (the collection
	// ends COMPLETED_PARTIAL); it is not ErrCompanyFailed.
	FetchProduct(ctx context.Context, companyID string, session CompanySession, product DataProduct) (ProductData, error)
	// EndSession logs out; best effort, the company forgets sessions by itself.
	EndSession(ctx context.Context, companyID string, session CompanySession) error
}

// ConsentBank is the port to the PSD2 consents of a company that has them (the consent
// worker's): the bank opens an electronic-ID order for the person at once, the person signs
// (or not), and the consent is then used to read PSD2 products (AccountInformation) until it
// is revoked or expires. Like Companies, an adapter retries what is worth retrying, so an error
// means the bank could not be used (ErrCompanyFailed) unless it is one of the more precise
// errors named here.
type ConsentBank interface {
	// CreateConsent asks the bank for a consent. It comes back BankConsentPending with the EID
	// order to show, or already BankConsentFailed (a conflicting order). ErrConsentsNotSupported
	// means the company has no consents, ErrLoginMethodNotSupported that it does not authorize
	// consents with that method, ErrCompanyUnavailable that it is in maintenance.
	CreateConsent(ctx context.Context, companyID string, req BankConsentRequest) (BankConsent, error)
	// ConsentStatus reads a consent's current state at the bank. ErrBankConsentUnknown means
	// the bank does not know the id.
	ConsentStatus(ctx context.Context, companyID, bankConsentID string) (BankConsent, error)
	// RevokeConsent ends a consent at the bank, withdrawing its EID order if it is still
	// pending. A consent that already ended, or that the bank does not know, is no error, so
	// that a retried revocation succeeds.
	RevokeConsent(ctx context.Context, companyID, bankConsentID string) error
}

// BankConsentRequest asks a bank for a consent. PersonalNumber is personal data: adapters send
// it only in request bodies and never log it.
type BankConsentRequest struct {
	// PersonalNumber is the person who must sign (12 digits); the bank refuses anyone else.
	PersonalNumber string
	LoginMethod    string
	// Scope is what the consent lets Samla read; the bank serves nothing outside it.
	Scope []consent.Scope
	// Reference is Samla's consent id, for the bank's and the EID simulator's correlation:
	// POST /sandbox/eid/sign {"consentId"} finds the order by it.
	Reference string
	// IdempotencyKey makes retries of one request create one consent at the bank.
	IdempotencyKey string
	// Validity is how long the consent stays valid after its authorization; 0 leaves it to the
	// bank's longest, and the bank never grants more than that.
	Validity time.Duration
}

// BankConsentState is where a bank consent stands.
type BankConsentState string

const (
	// BankConsentPending: the EID order waits for the person's signature.
	BankConsentPending BankConsentState = "PENDING"
	// BankConsentAuthorized: signed by the person; PSD2 products can be read until ValidUntil.
	BankConsentAuthorized BankConsentState = "AUTHORIZED"
	// BankConsentFailed: never authorized; Failure says why.
	BankConsentFailed BankConsentState = "FAILED"
	// BankConsentRevoked: ended by Samla (RevokeConsent) or by the person at the bank.
	BankConsentRevoked BankConsentState = "REVOKED"
	// BankConsentExpired: authorized once, past ValidUntil.
	BankConsentExpired BankConsentState = "EXPIRED"
)

// BankConsent is a consent at a bank as the adapter understood it.
type BankConsent struct {
	// ID is the bank's own id of the consent: public, and what PSD2 reads go under.
	ID string
	// Reference is BankConsentRequest.Reference (Samla's consent id).
	Reference string
	State     BankConsentState
	Scope     []consent.Scope
	// Outcome is the failure code a BankConsentFailed consent ends in.
	Outcome consent.FailureCode
	// FailureReason is the bank's own reason of a failed consent, for logs.
	FailureReason string
	// EIDOrder is the authorization's electronic-ID order (its QRStartSecret is a secret, see
	// EIDOrder); nil when the bank refused to start one.
	EIDOrder *EIDOrder
	// Signer is who signed the EID order, as the EID provider says; nil until signed. The bank
	// authorizes only the person the consent was asked for (else BankConsentFailed with
	// AUTHENTICATION_MISMATCH); a consent worker may check it too. Personal data.
	Signer *EIDIdentity
	// AuthorizedAt and ValidUntil are set once the consent was authorized.
	AuthorizedAt time.Time
	ValidUntil   time.Time
}

// PSD2Grant is what a collection reads PSD2 products under: a bank consent and the scope
// Samla's consent was given for.
type PSD2Grant struct {
	BankConsentID string
	Scope         []consent.Scope
}

// AccountInformation reads PSD2 products (ProductAccounts, ProductCards) under a bank consent,
// without a login session, as a PSD2 bank serves them.
type AccountInformation interface {
	// FetchPSD2 reads one PSD2 product under the grant. Only records the grant's scope names
	// come back (checking and savings accounts each need their own scope). ErrConsentNotUsable
	// means the bank refuses the consent now (revoked, expired, not authorized, or outside its
	// scope): the collection's PSD2 part stops there. ErrProductTimeout is as for FetchProduct.
	FetchPSD2(ctx context.Context, companyID string, grant PSD2Grant, product DataProduct) (ProductData, error)
}

// CollectionConsents tells which bank consent a collection reads its PSD2 products under.
type CollectionConsents interface {
	// PSD2Grant is the collection's grant; false when it has none, and then the collection
	// reads no PSD2 product (they are unknown, not empty). An error wrapping
	// ErrConsentNotUsable means the collection's consent ended (revoked, expired) since it
	// started: the PSD2 part stops and the collection is partial; the grant returned with it
	// names what is left unread. Another error means the grant could not be read now.
	PSD2Grant(ctx context.Context, c *collection.Collection) (PSD2Grant, bool, error)
}

// PSD2Products are the PSD2 products a scope lets a collection read, in reading order: the
// accounts for checking or savings accounts, the cards for credit cards.
func PSD2Products(scope []consent.Scope) []DataProduct {
	var out []DataProduct
	if slices.Contains(scope, consent.ScopeCheckingAccounts) || slices.Contains(scope, consent.ScopeSavingsAccounts) {
		out = append(out, ProductAccounts)
	}
	if slices.Contains(scope, consent.ScopeCreditCards) {
		out = append(out, ProductCards)
	}
	return out
}

// LoginRequest starts a company login. PersonalNumber is personal data: adapters send it only
// in request bodies and never log it.
type LoginRequest struct {
	PersonalNumber string // 12 digits, or "" when the user identifies at the EID app
	LoginMethod    string
	// Reference is Samla's collection id (or consent id), for the company's and the EID
	// simulator's correlation: POST /sandbox/eid/sign {"collectionId"} finds the order by it.
	Reference string
	// IdempotencyKey makes retries of one login attempt start one session at the company.
	IdempotencyKey string
	// Document is the PDF of a PDF_UPLOAD login; personal data.
	Document *Document
}

// Document is a file exchanged with a company: an uploaded PDF or the French career statement.
// The content is personal data.
type Document struct {
	FileName    string
	ContentType string
	Content     []byte
}

// LoginState is where a company login stands.
type LoginState string

const (
	// LoginPending: the company is signing in by itself; nothing for the user (collection
	// status LOGIN).
	LoginPending LoginState = "PENDING"
	// LoginEnrollmentCheck: the company checks that the person is a customer
	// (CUSTOMER_ENROLLMENT_CHECK).
	LoginEnrollmentCheck LoginState = "ENROLLMENT_CHECK"
	// LoginAwaitingUser: the user must sign in the EID app; EIDOrder is set
	// (WAITING_FOR_USER_ACTION with the animated QR data and the autostart token).
	LoginAwaitingUser LoginState = "AWAITING_USER"
	// LoginAwaitingClient: the client must run Instructions on the user's device and post the
	// results (WAITING_FOR_USER_ACTION with INSTRUCTIONS).
	LoginAwaitingClient LoginState = "AWAITING_CLIENT"
	// LoginTwoFactorMethodSelection: the user must pick a two-factor method at the company
	// (LOGIN; Samla's deadline ends it TWO_FACTOR_METHOD_SELECTION_TIMEOUT).
	LoginTwoFactorMethodSelection LoginState = "TWO_FACTOR_METHOD_SELECTION"
	// LoginTwoFactorPending: the user must enter a code at the company (TWO_FACTOR_PENDING).
	LoginTwoFactorPending LoginState = "TWO_FACTOR_PENDING"
	// LoginContactFormRequired: the company asks for contact details, RequiredInputTypes
	// (CONTACT_FORM_PENDING; Samla's deadline ends it CONTACT_FORM).
	LoginContactFormRequired LoginState = "CONTACT_FORM_REQUIRED"
	// LoginInputRequired: the company asks for more input, RequiredInputTypes
	// (COLLECTION_INPUT_PENDING; Samla's deadline ends it COLLECTION_INPUT_TIMEOUT).
	LoginInputRequired LoginState = "INPUT_REQUIRED"
	// LoginAuthenticated: data can be read.
	LoginAuthenticated LoginState = "AUTHENTICATED"
	// LoginFailed: the login ended without authentication; Outcome says how.
	LoginFailed LoginState = "FAILED"
)

// CompanySession is a login session at a company as the adapter understood it.
type CompanySession struct {
	ID string
	// Reference is LoginRequest.Reference (the collection id), kept so that the adapter can
	// name the collection in its logs.
	Reference string
	State     LoginState
	// Outcome is the final collection status a failed login ends the collection in.
	Outcome collection.Status
	// FailureReason is the company's own reason of a failed login, for logs.
	FailureReason string
	// AuthenticatedPersonalNumber is who the company says signed in, when it says; compared
	// with the collection's personal number (AUTHENTICATION_MISMATCH, the spec's rule (b)).
	// Personal data.
	AuthenticatedPersonalNumber string
	// EIDOrder is the electronic-ID order of an EID login, while it runs and after.
	EIDOrder *EIDOrder
	// EIDCompletion is who signed the EID order, as the EID provider says (the spec's rule
	// (a)); nil until signed or when the flow does not show it. Personal data.
	EIDCompletion *EIDIdentity
	// Instructions are the requests the client runs on the user's device (LoginAwaitingClient).
	Instructions []collection.Instruction
	// RequiredInputTypes are what LoginContactFormRequired or LoginInputRequired ask for.
	RequiredInputTypes []string
	// TwoFactorMethods are what the user may choose from; TwoFactorMethod the one in use.
	TwoFactorMethods []string
	TwoFactorMethod  string
	// Message is the company's text for the user, when it has one.
	Message string
	// Products are the data products an authenticated session can read, in reading order.
	Products []DataProduct
	// AccessToken authorizes data requests; a secret, never logged or stored in events.
	AccessToken string
}

// EIDOrder is an electronic-ID order. QRStartSecret is a secret: it goes to the event's
// personal part only, and the QR data is computed from it at every poll
// (eid.QRData(QRStartToken, QRStartSecret, StartedAt, now)).
type EIDOrder struct {
	OrderRef       string
	AutoStartToken string
	QRStartToken   string
	QRStartSecret  string
	StartedAt      time.Time
	ExpiresAt      time.Time
	// Status and HintCode are the provider's (eid.StatusPending …, eid.HintUserSign …).
	Status   string
	HintCode string
}

// EIDIdentity is a person as the EID provider identified them. Personal data.
type EIDIdentity struct {
	PersonalNumber string
	Name           string
}

// DataProduct is one kind of data a company serves.
type DataProduct string

const (
	ProductInsurances          DataProduct = "insurances"
	ProductGroupInsurances     DataProduct = "group-insurances"
	ProductPensions            DataProduct = "pensions"
	ProductInvestments         DataProduct = "investments"
	ProductAccounts            DataProduct = "accounts" // PSD2 checking and savings accounts
	ProductCards               DataProduct = "cards"    // PSD2 credit cards
	ProductLoans               DataProduct = "loans"
	ProductSavings             DataProduct = "savings"
	ProductPersonalInformation DataProduct = "personal-information"
	ProductCareerStatement     DataProduct = "career-statement" // the French career statement PDF
)

// ProductData is what one data product returned; only the fields of that product are set.
// Names, personal information and documents are personal data; HolderNames (by insurance id)
// go to the event's personal field.
type ProductData struct {
	Product             DataProduct
	Insurances          []collection.Insurance
	HolderNames         map[string]string
	Pensions            []collection.CompanyPension
	Investments         []collection.Investment
	Loans               []collection.Loan
	Savings             []collection.Saving
	CheckingAccounts    []collection.PSD2Account
	SavingsAccounts     []collection.PSD2Account
	CreditCards         []collection.PSD2CreditCard
	PersonalInformation *collection.PersonalInformation
	CareerStatement     *Document
}

// Records counts the financial records (personal information not included), so that a
// collection that found none ends COMPLETED_EMPTY.
func (d ProductData) Records() int {
	n := len(d.Insurances) + len(d.Pensions) + len(d.Investments) + len(d.Loans) + len(d.Savings) +
		len(d.CheckingAccounts) + len(d.SavingsAccounts) + len(d.CreditCards)
	if d.CareerStatement != nil {
		n++
	}
	return n
}

// FieldError is one rejected input value.
type FieldError struct {
	Field   string
	Message string
}

// InputRejectedError is the company refusing SubmitInputs; it is ErrInputRejected.
type InputRejectedError struct{ Fields []FieldError }

func (e *InputRejectedError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "company rejected the input: " + strings.Join(parts, "; ")
}

func (e *InputRejectedError) Unwrap() error { return ErrInputRejected }

var (
	// ErrLoginMethodNotSupported: the company refuses the collection's login method.
	ErrLoginMethodNotSupported = errors.New("login method not supported by the company")
	// ErrCompanyFailed: the company failed or answered something unusable, after retries.
	ErrCompanyFailed = errors.New("company failed")
	// ErrCompanyUnavailable: the company is in maintenance; it is also ErrCompanyFailed.
	ErrCompanyUnavailable = fmt.Errorf("company unavailable: %w", ErrCompanyFailed)
	// ErrProductTimeout: one data product did not answer in time; the others may still be read.
	ErrProductTimeout = errors.New("company data product timed out")
	// ErrInputRejected: the company refused input values; nothing changed.
	ErrInputRejected = errors.New("input rejected by the company")
	// ErrNotAwaiting: the session does not take that input or those responses now.
	ErrNotAwaiting = errors.New("company session is not awaiting that")
	// ErrConsentsNotSupported: the company has no PSD2 consents; it is also ErrCompanyFailed.
	ErrConsentsNotSupported = fmt.Errorf("company has no consents: %w", ErrCompanyFailed)
	// ErrBankConsentUnknown: the bank does not know the consent id.
	ErrBankConsentUnknown = errors.New("bank consent unknown")
	// ErrConsentNotUsable: the bank refuses to serve data under the consent now.
	ErrConsentNotUsable = errors.New("bank refuses the consent")
)
