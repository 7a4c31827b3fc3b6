package worker

import (
	"context"
	"errors"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
)

// Repository is the part of the command repository a worker needs; *repository.Repository
// satisfies it.
type Repository interface {
	LoadCollection(ctx context.Context, collectionID string) (*collection.Collection, error)
	Save(ctx context.Context, stream string, version int, meta repository.Meta, events []domain.Event) (eventstore.AppendResult, error)
}

// Catalog tells which companies exist and which login methods they support; *catalog.Catalog
// satisfies it.
type Catalog interface {
	Get(companyID string) (company.Company, error)
}

// ActiveCollections lists collections that have not reached a final status (the status read
// model), so that a sweep can re-drive sessions nobody runs any more.
type ActiveCollections interface {
	ListNonFinal(ctx context.Context, limit int) ([]string, error)
}

// ActiveCollectionsFunc adapts a function (e.g. a closure over a read model whose rows carry
// more than ids) to ActiveCollections.
type ActiveCollectionsFunc func(ctx context.Context, limit int) ([]string, error)

// ListNonFinal calls f.
func (f ActiveCollectionsFunc) ListNonFinal(ctx context.Context, limit int) ([]string, error) {
	return f(ctx, limit)
}

// Companies is the port to the companies' login and data APIs. One adapter serves every
// company it knows how to reach; it translates the company's vocabulary into this one and
// retries what is worth retrying, so an error here means the company could not be used.
type Companies interface {
	// StartLogin opens a login session at the company. ErrLoginMethodNotSupported means the
	// company refuses the method; other errors are the company's failure.
	StartLogin(ctx context.Context, companyID string, req LoginRequest) (CompanySession, error)
	// PollLogin reads the session's current state.
	PollLogin(ctx context.Context, companyID string, session CompanySession) (CompanySession, error)
	// Insurances reads an authenticated session's insurances.
	Insurances(ctx context.Context, companyID string, session CompanySession) (InsuranceData, error)
	// EndSession logs out; best effort, the company forgets sessions by itself.
	EndSession(ctx context.Context, companyID string, session CompanySession) error
}

// LoginRequest starts a company login. PersonalNumber is personal data: adapters send it only
// in request bodies and never log it.
type LoginRequest struct {
	PersonalNumber string // 12 digits, or "" when the user identifies at the EID app
	LoginMethod    string
	// Reference is Samla's collection id, for the company's (and the sandbox EID simulator's)
	// correlation.
	Reference string
	// IdempotencyKey makes retries of one login attempt start one session at the company.
	IdempotencyKey string
}

// LoginState is where a company login stands.
type LoginState string

const (
	// LoginPending: the company is still setting the login up.
	LoginPending LoginState = "PENDING"
	// LoginAwaitingUser: the user must act (sign in the EID app).
	LoginAwaitingUser LoginState = "AWAITING_USER"
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
	// AuthenticatedPersonalNumber is who the company says signed in, when it says; compared
	// with the collection's personal number (AUTHENTICATION_MISMATCH). Personal data.
	AuthenticatedPersonalNumber string
	// ExtraInformation is shown to the client while the user must act (e.g. QR data).
	ExtraInformation map[string]any
	// AccessToken authorizes data requests; a secret, never logged or stored in events.
	AccessToken string
}

// InsuranceData is what an insurance company returned. HolderNames (by insurance id) are
// personal data and go to the event's personal field.
type InsuranceData struct {
	Insurances  []collection.Insurance
	HolderNames map[string]string
}

var (
	// ErrLoginMethodNotSupported: the company refuses the collection's login method.
	ErrLoginMethodNotSupported = errors.New("login method not supported by the company")
	// ErrCompanyFailed: the company failed or answered something unusable, after retries.
	ErrCompanyFailed = errors.New("company failed")
)
