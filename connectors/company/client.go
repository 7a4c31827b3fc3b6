// Package company holds the adapters through which connector workers reach companies. Client
// speaks the demo companies' login-and-data HTTP API (connectors/sandbox); a real company gets
// its own adapter behind the same worker port.
package company

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/platform/metrics"
)

// Config configures a Client. Zero values take the defaults noted.
type Config struct {
	// BaseURL returns the root of a company's API, "" for a company this client cannot reach.
	// (*sandbox.Sandbox).BaseURL fits.
	BaseURL func(companyID string) string
	// HTTPClient sends the requests; nil builds one with connection and header timeouts.
	HTTPClient *http.Client
	// RequestTimeout bounds one attempt (default 10 s).
	RequestTimeout time.Duration
	// MaxAttempts bounds the tries of one request, the first included (default 4).
	MaxAttempts int
	// BackoffBase and BackoffMax shape the exponential, jittered wait between attempts
	// (defaults 200 ms and 3 s).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Metrics records CompanyRequestTime per attempt; nil records nothing.
	Metrics *metrics.Metrics
	// Logger gets retries and failures, never personal numbers, names or tokens.
	Logger *slog.Logger
}

// Client is the HTTP adapter for the demo companies' API. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	log  *slog.Logger
}

var _ worker.Companies = (*Client)(nil)

// maxBody bounds what is read of a company's answer; insurance lists are small.
const maxBody = 4 << 20

// New builds a client.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == nil {
		return nil, errors.New("company client: BaseURL is required")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = 200 * time.Millisecond
	}
	if cfg.BackoffMax < cfg.BackoffBase {
		cfg.BackoffMax = max(3*time.Second, cfg.BackoffBase)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 32
		hc = &http.Client{Transport: t}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, http: hc, log: log}, nil
}

// Wire format of the demo companies' API.
type (
	wireLoginRequest struct {
		PersonalNumber string `json:"personalNumber,omitempty"`
		LoginMethod    string `json:"loginMethod"`
		Reference      string `json:"reference,omitempty"`
	}
	wireSession struct {
		SessionID     string `json:"sessionId"`
		State         string `json:"state"`
		FailureReason string `json:"failureReason"`
		Customer      *struct {
			PersonalNumber string `json:"personalNumber"`
		} `json:"customer"`
		AccessToken string `json:"accessToken"`
	}
	wireError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	wireInsurances struct {
		Insurances []wireInsurance `json:"insurances"`
	}
	wireInsurance struct {
		ID           string  `json:"id"`
		Product      string  `json:"product"`
		Name         *string `json:"name"`
		PolicyNumber *string `json:"policyNumber"`
		Premium      *struct {
			Amount    *float64 `json:"amount"`
			Currency  string   `json:"currency"`
			Frequency *string  `json:"frequency"`
		} `json:"premium"`
		RenewalDate  *string `json:"renewalDate"`
		StartDate    *string `json:"startDate"`
		PolicyHolder *struct {
			Name string `json:"name"`
		} `json:"policyHolder"`
	}
)

// StartLogin opens a login session. The Idempotency-Key makes a retried POST (whose first
// answer was lost) return the session the first one opened instead of a second EID order.
func (c *Client) StartLogin(ctx context.Context, companyID string, req worker.LoginRequest) (worker.CompanySession, error) {
	body, err := json.Marshal(wireLoginRequest{PersonalNumber: req.PersonalNumber, LoginMethod: req.LoginMethod, Reference: req.Reference})
	if err != nil {
		return worker.CompanySession{}, fmt.Errorf("encode login request: %w", err)
	}
	h := http.Header{}
	if req.IdempotencyKey != "" {
		h.Set("Idempotency-Key", req.IdempotencyKey)
	}
	resp, err := c.send(ctx, companyID, req.Reference, "start_login", http.MethodPost, "/sessions", body, h)
	if err != nil {
		return worker.CompanySession{}, err
	}
	switch {
	case resp.status == http.StatusOK || resp.status == http.StatusCreated:
		return c.session(companyID, req.Reference, resp)
	case resp.status == http.StatusUnprocessableEntity && resp.code() == "LOGIN_METHOD_NOT_SUPPORTED":
		return worker.CompanySession{}, fmt.Errorf("start login at %s with %s: %w", companyID, req.LoginMethod, worker.ErrLoginMethodNotSupported)
	default:
		return worker.CompanySession{}, resp.failure(companyID, "start login")
	}
}

// PollLogin reads a session's state.
func (c *Client) PollLogin(ctx context.Context, companyID string, s worker.CompanySession) (worker.CompanySession, error) {
	resp, err := c.send(ctx, companyID, s.Reference, "poll_login", http.MethodGet, "/sessions/"+url.PathEscape(s.ID), nil, nil)
	if err != nil {
		return worker.CompanySession{}, err
	}
	if resp.status != http.StatusOK {
		return worker.CompanySession{}, resp.failure(companyID, "poll login")
	}
	return c.session(companyID, s.Reference, resp)
}

// Insurances reads an authenticated session's insurances.
func (c *Client) Insurances(ctx context.Context, companyID string, s worker.CompanySession) (worker.InsuranceData, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+s.AccessToken)
	resp, err := c.send(ctx, companyID, s.Reference, "insurances", http.MethodGet, "/sessions/"+url.PathEscape(s.ID)+"/insurances", nil, h)
	if err != nil {
		return worker.InsuranceData{}, err
	}
	if resp.status != http.StatusOK {
		return worker.InsuranceData{}, resp.failure(companyID, "read insurances")
	}
	var w wireInsurances
	if err := json.Unmarshal(resp.body, &w); err != nil {
		return worker.InsuranceData{}, fmt.Errorf("insurances of %s are not JSON: %v: %w", companyID, err, worker.ErrCompanyFailed)
	}
	return mapInsurances(companyID, w.Insurances)
}

// EndSession logs out. A session the company already forgot is fine.
func (c *Client) EndSession(ctx context.Context, companyID string, s worker.CompanySession) error {
	resp, err := c.send(ctx, companyID, s.Reference, "end_session", http.MethodDelete, "/sessions/"+url.PathEscape(s.ID), nil, nil)
	if err != nil {
		return err
	}
	if resp.status/100 != 2 && resp.status != http.StatusNotFound {
		return resp.failure(companyID, "end session")
	}
	return nil
}

func (c *Client) session(companyID, reference string, resp response) (worker.CompanySession, error) {
	var w wireSession
	if err := json.Unmarshal(resp.body, &w); err != nil || w.SessionID == "" {
		return worker.CompanySession{}, fmt.Errorf("login session of %s is unreadable: %w", companyID, worker.ErrCompanyFailed)
	}
	s := worker.CompanySession{ID: w.SessionID, Reference: reference}
	switch w.State {
	case "AWAITING_SIGNATURE":
		s.State = worker.LoginAwaitingUser
	case "AUTHENTICATED":
		if w.AccessToken == "" {
			return worker.CompanySession{}, fmt.Errorf("authenticated session of %s has no access token: %w", companyID, worker.ErrCompanyFailed)
		}
		s.State, s.AccessToken = worker.LoginAuthenticated, w.AccessToken
		if w.Customer != nil {
			s.AuthenticatedPersonalNumber = w.Customer.PersonalNumber
		}
	case "FAILED":
		s.State, s.Outcome = worker.LoginFailed, outcomeOf(w.FailureReason)
	default:
		// States this adapter does not know yet are steps before the user is involved: keep
		// polling rather than failing a collection on a harmless API addition.
		s.State = worker.LoginPending
	}
	return s, nil
}

type response struct {
	status int
	body   []byte
}

func (r response) code() string {
	var e wireError
	_ = json.Unmarshal(r.body, &e)
	return e.Code
}

// failure is an answer the client cannot use: the company failed this collection.
func (r response) failure(companyID, op string) error {
	code := r.code()
	if code == "" {
		code = "no error code"
	}
	return fmt.Errorf("%s at %s: HTTP %d (%s): %w", op, companyID, r.status, code, worker.ErrCompanyFailed)
}

// send performs one logical request with retries on transport errors and on answers that say
// "try again" (408, 429, 5xx except 501). Any other answer is returned for the caller to read.
func (c *Client) send(ctx context.Context, companyID, reference, op, method, path string, body []byte, h http.Header) (response, error) {
	base := c.cfg.BaseURL(companyID)
	if base == "" {
		return response{}, fmt.Errorf("no API address for company %s: %w", companyID, worker.ErrCompanyFailed)
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		resp, retryAfter, err := c.attempt(ctx, companyID, method, base+path, body, h)
		if err == nil && !retryable(resp.status) {
			return resp, nil
		}
		if ctx.Err() != nil {
			// Shutting down: not the company's fault, so not ErrCompanyFailed.
			return response{}, fmt.Errorf("%s at %s: %w", op, companyID, ctx.Err())
		}
		lastErr = err
		if err == nil {
			lastErr = fmt.Errorf("HTTP %d (%s)", resp.status, resp.code())
		}
		if attempt >= c.cfg.MaxAttempts {
			c.log.Warn("company request failed", "company", companyID, "collection", reference, "op", op, "attempts", attempt, "err", lastErr)
			return response{}, fmt.Errorf("%s at %s failed after %d attempts: %w: %w", op, companyID, attempt, worker.ErrCompanyFailed, lastErr)
		}
		wait := c.backoff(attempt, retryAfter)
		c.log.Debug("company request retried", "company", companyID, "collection", reference, "op", op, "attempt", attempt, "wait", wait, "err", lastErr)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return response{}, fmt.Errorf("%s at %s: %w", op, companyID, ctx.Err())
		case <-t.C:
		}
	}
}

func (c *Client) attempt(ctx context.Context, companyID, method, u string, body []byte, h http.Header) (response, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return response{}, 0, fmt.Errorf("build request: %w", err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "samla-connector/1")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	res, err := c.http.Do(req)
	if err != nil {
		c.observe(companyID, outcomeOfErr(ctx, err), start)
		return response{}, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	if err != nil {
		c.observe(companyID, outcomeOfErr(ctx, err), start)
		return response{}, 0, fmt.Errorf("read answer: %w", err)
	}
	c.observe(companyID, outcomeOfStatus(res.StatusCode), start)
	return response{status: res.StatusCode, body: b}, retryAfterOf(res), nil
}

func (c *Client) observe(companyID, outcome string, start time.Time) {
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.CompanyRequestTime.WithLabelValues(companyID, outcome).Observe(time.Since(start).Seconds())
	}
}

// backoff is exponential with jitter in [d/2, d], so that workers retrying the same company do
// not hit it in lockstep; a Retry-After the company sends is honoured up to BackoffMax.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := c.cfg.BackoffBase << min(attempt-1, 20)
	if d <= 0 || d > c.cfg.BackoffMax {
		d = c.cfg.BackoffMax
	}
	d = d/2 + rand.N(d/2+1)
	if retryAfter > d {
		d = min(retryAfter, c.cfg.BackoffMax)
	}
	return d
}

func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests ||
		(status >= 500 && status != http.StatusNotImplemented)
}

func retryAfterOf(res *http.Response) time.Duration {
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

func outcomeOfStatus(status int) string {
	switch status / 100 {
	case 2:
		return "ok"
	case 4:
		return "client_error"
	case 5:
		return "server_error"
	}
	return "other"
}

// outcomeOfErr labels a request that got no answer; ctx is the attempt's own context.
func outcomeOfErr(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case ctx.Err() != nil:
		return "canceled"
	}
	return "transport_error"
}
