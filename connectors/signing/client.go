// Package signing is the adapter of worker.SigningProvider: it speaks the e-signing provider's
// HTTP API (the sandbox's signingsim implements the same API, below /sandbox/signing) and
// verifies the provider's callbacks (VerifyCallback).
//
// The API, below {base}/api/v1/, every call with "Authorization: Bearer <the client's provider
// API key>", JSON bodies and {"code","message"} errors:
//
//	POST processes                   start (idempotent by reference: 201 new, 200 the same again)
//	GET  processes/{id}              read
//	GET  processes/{id}/document     the sealed PDF; 409 NOT_SEALED before
//	POST processes/{id}/cancel       withdraw (a final process stays as it is)
//
// Network errors, 429 and 5xx answers are retried (every call is safe to
// repeat: the start is idempotent by reference, the rest reads or cancels); after the last
// attempt the error wraps worker.ErrProviderUnavailable. Errors name the operation, the
// reference or process id and the provider's status and code, never the key, the document,
// names, e-mail addresses or phone numbers; the client logs nothing.
package signing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/platform/retry"
)

const (
	// Attempts is how often one call is tried before it fails with ErrProviderUnavailable.
	Attempts = 4
	// MaxResponseSize bounds a JSON answer of the provider.
	MaxResponseSize = 1 << 20
	// MaxSignedDocumentSize bounds a downloaded sealed PDF: the provider takes documents of
	// 10 MiB and adds a page and a signature.
	MaxSignedDocumentSize = 32 << 20
	// DefaultTimeout bounds one request of the default HTTP client (an upload or download of
	// tens of MiB included).
	DefaultTimeout = 60 * time.Second
)

// Client implements worker.SigningProvider over the provider's HTTP API.
type Client struct {
	base    string
	hc      *http.Client
	backoff retry.Backoff
}

var _ worker.SigningProvider = (*Client)(nil)

// NewClient is a client of the provider at baseURL (e.g. "https://provider.example" or, for the
// sandbox, "<sandbox url>/sandbox/signing"). hc nil uses a client with DefaultTimeout; backoff
// spaces the retries of one call (jitter helps many workers sharing one provider).
func NewClient(baseURL string, hc *http.Client, backoff retry.Backoff) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("signing: provider base URL %q is not an absolute http(s) URL without credentials or query", baseURL)
	}
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	return &Client{base: strings.TrimRight(baseURL, "/") + "/api/v1/processes", hc: hc, backoff: backoff}, nil
}

type wireDelivery struct {
	Method      string `json:"method"`
	Email       string `json:"email,omitempty"`
	PhoneNumber string `json:"phoneNumber,omitempty"`
}

type wireSigner struct {
	Name           string `json:"name,omitempty"`
	PersonalNumber string `json:"personalNumber,omitempty"`
}

type wireStart struct {
	Reference   string       `json:"reference"`
	Title       string       `json:"title"`
	Document    []byte       `json:"documentBase64"`
	Delivery    wireDelivery `json:"delivery"`
	Signer      wireSigner   `json:"signer"`
	ExpiresAt   time.Time    `json:"expiresAt,omitzero"`
	CallbackURL string       `json:"callbackUrl,omitempty"`
}

type wireProcess struct {
	ProcessID       string    `json:"processId"`
	Reference       string    `json:"reference"`
	State           string    `json:"state"`
	SentAt          time.Time `json:"sentAt"`
	SignedAt        time.Time `json:"signedAt"`
	Sealed          bool      `json:"sealed"`
	SignatureMethod string    `json:"signatureMethod"`
	Error           *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// StartSigning implements worker.SigningProvider.
func (c *Client) StartSigning(ctx context.Context, apiKey string, req worker.SigningRequest) (worker.SigningProcess, error) {
	op := "start signing (reference " + req.Reference + ")"
	body, err := json.Marshal(wireStart{
		Reference: req.Reference, Title: req.Title, Document: req.Document,
		Delivery:  wireDelivery{Method: string(req.DeliveryMethod), Email: req.Email, PhoneNumber: req.PhoneNumber},
		Signer:    wireSigner{Name: req.SignerName, PersonalNumber: req.SignerPersonalNumber},
		ExpiresAt: req.ExpiresAt.UTC(), CallbackURL: req.CallbackURL,
	})
	if err != nil {
		return worker.SigningProcess{}, fmt.Errorf("signing: %s: encode: %w", op, worker.ErrDocumentRefused)
	}
	res, err := c.do(ctx, op, http.MethodPost, c.base, apiKey, body, MaxResponseSize)
	if err != nil {
		return worker.SigningProcess{}, err
	}
	switch res.status {
	case http.StatusOK, http.StatusCreated:
		return decodeProcess(op, res)
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		// The port has no sentinel for a request the provider calls invalid (a delivery
		// address it will not use); like a refused document it will not pass on a retry, so
		// the cancellation ends DOCUMENT_ERROR rather than waiting for ever.
		return worker.SigningProcess{}, res.fail(op, worker.ErrDocumentRefused)
	}
	return worker.SigningProcess{}, res.common(op)
}

// SigningStatus implements worker.SigningProvider.
func (c *Client) SigningStatus(ctx context.Context, apiKey, processID string) (worker.SigningProcess, error) {
	op := "read signing process " + processID
	if processID == "" {
		return worker.SigningProcess{}, fmt.Errorf("signing: %s: empty id: %w", op, worker.ErrProcessNotFound)
	}
	res, err := c.do(ctx, op, http.MethodGet, c.base+"/"+url.PathEscape(processID), apiKey, nil, MaxResponseSize)
	if err != nil {
		return worker.SigningProcess{}, err
	}
	if res.status == http.StatusOK {
		return decodeProcess(op, res)
	}
	return worker.SigningProcess{}, res.common(op)
}

// SignedDocument implements worker.SigningProvider.
func (c *Client) SignedDocument(ctx context.Context, apiKey, processID string) ([]byte, error) {
	op := "download signed document of " + processID
	if processID == "" {
		return nil, fmt.Errorf("signing: %s: empty id: %w", op, worker.ErrProcessNotFound)
	}
	res, err := c.do(ctx, op, http.MethodGet, c.base+"/"+url.PathEscape(processID)+"/document", apiKey, nil, MaxSignedDocumentSize)
	if err != nil {
		return nil, err
	}
	switch res.status {
	case http.StatusOK:
		// A proxy's HTML error page with status 200 must not be stored as the signed PDF.
		if !bytes.HasPrefix(res.body, []byte("%PDF-")) {
			return nil, fmt.Errorf("signing: %s: %w: the answer is not a PDF (%s)", op, worker.ErrProviderUnavailable,
				res.header.Get("Content-Type"))
		}
		return res.body, nil
	case http.StatusConflict:
		return nil, res.fail(op, worker.ErrNotSealed)
	}
	return nil, res.common(op)
}

// CancelSigning implements worker.SigningProvider.
func (c *Client) CancelSigning(ctx context.Context, apiKey, processID string) error {
	op := "cancel signing process " + processID
	if processID == "" {
		return fmt.Errorf("signing: %s: empty id: %w", op, worker.ErrProcessNotFound)
	}
	res, err := c.do(ctx, op, http.MethodPost, c.base+"/"+url.PathEscape(processID)+"/cancel", apiKey, nil, MaxResponseSize)
	if err != nil {
		return err
	}
	switch res.status {
	case http.StatusOK, http.StatusNoContent, http.StatusConflict:
		// 409: a provider that calls cancelling a final process a conflict; the port says it
		// is not an error.
		return nil
	}
	return res.common(op)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// errPermanent marks a failure that a retry will not cure.
type errPermanent struct{ err error }

func (e errPermanent) Error() string { return e.err.Error() }
func (e errPermanent) Unwrap() error { return e.err }

// do sends one call, retrying network errors, 429 and 5xx with the backoff (at least what a
// Retry-After asks, never beyond the backoff's Max). Any other answer is returned to the caller
// to map.
func (c *Client) do(ctx context.Context, op, method, target, apiKey string, body []byte, maxBody int64) (response, error) {
	if apiKey == "" {
		return response{}, fmt.Errorf("signing: %s: no provider API key: %w", op, worker.ErrProviderUnauthorized)
	}
	var last error
	for attempt := 1; ; attempt++ {
		res, err := c.once(ctx, method, target, apiKey, body, maxBody)
		var floor time.Duration
		switch {
		case err == nil && !retryable(res.status):
			return res, nil
		case err == nil:
			last = errors.New(res.describe())
			floor = retryAfter(res.header)
		case errors.As(err, new(errPermanent)):
			return response{}, fmt.Errorf("signing: %s: %w: %w", op, worker.ErrProviderUnavailable, err)
		case ctx.Err() != nil:
			return response{}, fmt.Errorf("signing: %s: %w: %w", op, worker.ErrProviderUnavailable, ctx.Err())
		default:
			last = err
		}
		if attempt >= Attempts {
			return response{}, fmt.Errorf("signing: %s: %w after %d attempts: %w", op, worker.ErrProviderUnavailable, attempt, last)
		}
		if err := retry.Sleep(ctx, c.backoff.DelayAtLeast(attempt, floor)); err != nil {
			return response{}, fmt.Errorf("signing: %s: %w: %w (last attempt: %v)", op, worker.ErrProviderUnavailable, err, last)
		}
	}
}

func (c *Client) once(ctx context.Context, method, target, apiKey string, body []byte, maxBody int64) (response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return response{}, errPermanent{fmt.Errorf("build request: %w", err)}
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Accept", "application/json, application/pdf")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return response{}, fmt.Errorf("read the answer: %w", err)
	}
	if int64(len(b)) > maxBody {
		return response{}, errPermanent{fmt.Errorf("the answer (HTTP %d) is larger than %d bytes", resp.StatusCode, maxBody)}
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500
}

// retryAfter reads a Retry-After of delay-seconds (the form providers send; an HTTP date is
// ignored and the backoff decides).
func retryAfter(h http.Header) time.Duration {
	s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || s <= 0 {
		return 0
	}
	return time.Duration(min(s, 3600)) * time.Second
}

var codePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// code is the provider's error code, when it is a plain token: only that goes into errors,
// never the provider's message, which may echo what was sent.
func (r response) code() string {
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(r.body, &e) != nil || !codePattern.MatchString(e.Code) {
		return ""
	}
	return e.Code
}

func (r response) describe() string {
	if code := r.code(); code != "" {
		return "HTTP " + strconv.Itoa(r.status) + " " + code
	}
	return "HTTP " + strconv.Itoa(r.status)
}

func (r response) fail(op string, sentinel error) error {
	return fmt.Errorf("signing: %s: %w (%s)", op, sentinel, r.describe())
}

// common maps the answers every call shares; anything unexpected is the provider failing.
func (r response) common(op string) error {
	switch r.status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return r.fail(op, worker.ErrProviderUnauthorized)
	case http.StatusNotFound:
		return r.fail(op, worker.ErrProcessNotFound)
	}
	return fmt.Errorf("signing: %s: %w: unexpected answer %s", op, worker.ErrProviderUnavailable, r.describe())
}

func decodeProcess(op string, r response) (worker.SigningProcess, error) {
	var w wireProcess
	if err := json.Unmarshal(r.body, &w); err != nil {
		return worker.SigningProcess{}, fmt.Errorf("signing: %s: %w: undecodable process: %w", op, worker.ErrProviderUnavailable, err)
	}
	state, ok := mapState(w.State)
	if !ok || w.ProcessID == "" {
		return worker.SigningProcess{}, fmt.Errorf("signing: %s: %w: process without id or with unknown state %q",
			op, worker.ErrProviderUnavailable, truncate(w.State, 32))
	}
	p := worker.SigningProcess{
		ID: w.ProcessID, Reference: w.Reference, State: state, SentAt: w.SentAt, SignedAt: w.SignedAt,
		Sealed: w.Sealed, SignatureMethod: w.SignatureMethod,
	}
	if w.Error != nil {
		p.ErrorCode, p.ErrorMessage = w.Error.Code, w.Error.Message
	}
	return p, nil
}

func mapState(s string) (worker.SigningState, bool) {
	switch st := worker.SigningState(s); st {
	case worker.SigningPending, worker.SigningSigned, worker.SigningRejected, worker.SigningCanceled,
		worker.SigningExpired, worker.SigningFailed:
		return st, true
	}
	return "", false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
