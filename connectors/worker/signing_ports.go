package worker

import (
	"context"
	"errors"
	"time"
)

// SigningProvider is the port to the e-signing service through which a cancellation's power of
// attorney reaches its holder. One adapter speaks the provider's HTTP API; every call carries the
// client's own provider API key (a secret from the client's signing configuration), since the
// provider bills and authorizes each client apart. An error that is none of the sentinels below
// means the provider could not be used now (ErrProviderUnavailable wraps it): the caller retries
// later.
type SigningProvider interface {
	// StartSigning uploads the document and starts its signing process; the provider sends the
	// signer a signing link by e-mail or SMS. It is idempotent by SigningRequest.Reference
	// (Samla's document id): a retry returns the process the first call started. A document the
	// provider will not sign is ErrDocumentRefused; a key it does not know is
	// ErrProviderUnauthorized.
	StartSigning(ctx context.Context, apiKey string, req SigningRequest) (SigningProcess, error)
	// SigningStatus reads a process; ErrProcessNotFound when the provider has no such process.
	SigningStatus(ctx context.Context, apiKey, processID string) (SigningProcess, error)
	// SignedDocument downloads the signed, sealed PDF of a process whose State is
	// SigningSigned and Sealed; ErrNotSealed before that.
	SignedDocument(ctx context.Context, apiKey, processID string) ([]byte, error)
	// CancelSigning withdraws a pending process (the link stops working). Cancelling a process
	// that is already final is not an error.
	CancelSigning(ctx context.Context, apiKey, processID string) error
}

// DeliveryMethod is how the provider sends the signing link.
type DeliveryMethod string

const (
	DeliveryEmail DeliveryMethod = "EMAIL"
	DeliverySMS   DeliveryMethod = "SMS"
)

// SigningRequest is one document to sign. The signer's name, personal number, e-mail and phone
// number and the document are personal data: adapters send them only in request bodies and never
// log them.
type SigningRequest struct {
	// Reference is Samla's document id; the provider keeps it with the process, echoes it in its
	// callbacks, and the sandbox's tester finds the process by it (POST
	// /sandbox/signing/{documentId}/sign).
	Reference string
	// Title names the document for the signer ("Fullmakt – uppsägning av försäkring").
	Title string
	// Document is the unsigned PDF.
	Document []byte
	// DeliveryMethod, with Email for DeliveryEmail or PhoneNumber (digits with the country
	// prefix) for DeliverySMS.
	DeliveryMethod DeliveryMethod
	Email          string
	PhoneNumber    string
	// SignerName and SignerPersonalNumber name who is asked to sign ("" when unknown).
	SignerName           string
	SignerPersonalNumber string
	// ExpiresAt is when the provider may stop offering the signature; Samla's own deadline
	// (SAMLA_SIGNING_TIMEOUT) decides TIMED_OUT, so this is a courtesy to the provider.
	ExpiresAt time.Time
	// CallbackURL is where the provider reports changes of the process ("" for none): a POST
	// whose body the provider signs with the client's API key (see the adapter).
	CallbackURL string
}

// SigningState is where a provider's signing process stands.
type SigningState string

const (
	// SigningPending: the link was sent; the signer has not acted.
	SigningPending SigningState = "PENDING"
	// SigningSigned: the signer signed; SigningProcess.Sealed tells whether the provider has
	// sealed the signed PDF yet.
	SigningSigned SigningState = "SIGNED"
	// SigningRejected: the signer declined.
	SigningRejected SigningState = "REJECTED"
	// SigningCanceled: withdrawn (CancelSigning).
	SigningCanceled SigningState = "CANCELED"
	// SigningExpired: the provider's own expiry passed.
	SigningExpired SigningState = "EXPIRED"
	// SigningFailed: the provider could not process the document after accepting it.
	SigningFailed SigningState = "FAILED"
)

// SigningProcess is the provider's view of one document's signature.
type SigningProcess struct {
	ID        string
	Reference string
	State     SigningState
	// SentAt is when the link went out.
	SentAt time.Time
	// SignedAt is when the signer signed (SigningSigned), zero before.
	SignedAt time.Time
	// Sealed tells that the signed PDF carries the provider's seal and can be downloaded.
	Sealed bool
	// SignatureMethod is how the signer identified ("SWEDISH_BANKID", "SMS_OTP", …); "" before.
	SignatureMethod string
	// ErrorCode and ErrorMessage explain SigningFailed.
	ErrorCode    string
	ErrorMessage string
}

var (
	// ErrDocumentRefused: the provider will not take the document (not a PDF it accepts, too
	// large, unreadable): the cancellation ends DOCUMENT_ERROR.
	ErrDocumentRefused = errors.New("signing provider refused the document")
	// ErrProviderUnauthorized: the provider does not accept the client's API key: the
	// cancellation waits (the operator may fix the key) and the failure is logged and counted.
	ErrProviderUnauthorized = errors.New("signing provider refused the API key")
	// ErrProcessNotFound: the provider has no such process.
	ErrProcessNotFound = errors.New("signing process not found")
	// ErrNotSealed: the signed PDF cannot be downloaded yet.
	ErrNotSealed = errors.New("signed document not sealed yet")
	// ErrProviderUnavailable: the provider could not be reached or failed; try again later.
	ErrProviderUnavailable = errors.New("signing provider unavailable")
)
