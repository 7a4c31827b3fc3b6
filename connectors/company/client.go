// Package company holds the adapters through which connector workers reach companies. Client
// speaks the demo companies' login-and-data HTTP API (connectors/sandbox, whose package comment
// lists the routes); a real company gets its own adapter behind the same worker port.
//
// Personal data (personal numbers, names, input values, documents) travels only in request and
// response bodies; logs and metrics carry the company, the collection id and the operation.
package company

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/samla/samla/connectors/worker"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/metrics"
	"github.com/samla/samla/platform/retry"
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

// maxBody bounds what is read of a company's answer: JSON lists are small, a career statement
// PDF is at most the spec's 10 MiB (with room to spare).
const maxBody = collection.MaxPDFBytes + 1<<20

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
// "try again" (408, 429, 5xx except 501 and the final 5xx answers of finalServerError). Any
// other answer is returned for the caller to read. A JSON body is sent as application/json
// unless h sets another Content-Type.
func (c *Client) send(ctx context.Context, companyID, reference, op, method, path string, body []byte, h http.Header) (response, error) {
	base := c.cfg.BaseURL(companyID)
	if base == "" {
		return response{}, fmt.Errorf("no API address for company %s: %w", companyID, worker.ErrCompanyFailed)
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		resp, retryAfter, err := c.attempt(ctx, companyID, method, base+path, body, h)
		if err == nil && (!retryable(resp.status) || finalServerError(resp)) {
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
			c.log.Warn("company request failed", "company", companyID, "collection", reference, "op", op, "attempts", attempt, "error", lastErr)
			return response{}, fmt.Errorf("%s at %s failed after %d attempts: %w: %w", op, companyID, attempt, worker.ErrCompanyFailed, lastErr)
		}
		wait := c.backoff().DelayAtLeast(attempt, retryAfter)
		c.log.Debug("company request retried", "company", companyID, "collection", reference, "op", op, "attempt", attempt, "retry_in", wait, "error", lastErr)
		if err := retry.Sleep(ctx, wait); err != nil {
			return response{}, fmt.Errorf("%s at %s: %w", op, companyID, err)
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
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", "samla-connector/1")
	if body != nil && req.Header.Get("Content-Type") == "" {
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

// backoff is exponential with jitter, so that workers retrying the same company do not hit it
// in lockstep; send raises a wait to the company's Retry-After, up to BackoffMax.
func (c *Client) backoff() retry.Backoff {
	return retry.Backoff{Base: c.cfg.BackoffBase, Max: c.cfg.BackoffMax, Jitter: true}
}

// finalServerError are 5xx answers that say trying again will not help: planned maintenance
// and a product whose backend already gave up.
func finalServerError(r response) bool {
	switch r.status {
	case http.StatusServiceUnavailable:
		return r.code() == "MAINTENANCE"
	case http.StatusGatewayTimeout:
		return r.code() == "UPSTREAM_TIMEOUT"
	}
	return false
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
