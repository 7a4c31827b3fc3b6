// Package sandbox runs Samla's demo companies as a real HTTP server, so that connector workers
// talk to them exactly as they would to real companies: over TCP, with latency and with
// failures. Only the company adapters know the wire format; nothing in Samla reaches into the
// sandbox's memory. Beside the companies it runs the electronic-ID simulator (eidsim) that the
// companies use for their EID logins and that testers drive, and the e-signing provider
// simulator (signingsim) with its e-mail/SMS outbox, through which cancellations are signed.
//
// All routes live under /sandbox/ so that the same handler can be mounted beside Samla's own
// API on one listener (Handler serves absolute paths).
//
// The demo companies' API, below BaseURL(companyID) = <url>/sandbox/companies/{companyId}:
//
//	GET    /sandbox/companies                  → {"companies":[{id, displayName, market, products,
//	                                              loginMethods, dataProducts, consents, status}]}
//	GET    …/{companyId}                       → one company; status OPERATIONAL or MAINTENANCE
//	POST   …/{companyId}/sessions              {personalNumber?, loginMethod, reference?}, header Idempotency-Key?
//	                                           → 201 session (200 and the same session for a repeated key)
//	GET    …/{companyId}/sessions/{id}         → session
//	DELETE …/{companyId}/sessions/{id}         → 204 (logout; withdraws a pending EID order)
//	POST   …/sessions/{id}/inputs              {"inputs":[{type, value}]} in CONTACT_FORM_REQUIRED
//	                                           (EMAIL, MOBILE_PHONE_NUMBER) or INPUT_REQUIRED (EMAIL)
//	                                           → 200 session; 400 INVALID_INPUT {errors:[{field,message}]};
//	                                           409 NOT_AWAITING_INPUT
//	POST   …/sessions/{id}/two-factor-method   {"method":"SMS"|"EMAIL"} in TWO_FACTOR_METHOD_SELECTION
//	POST   …/sessions/{id}/client-responses    {"responses":[{requestId, status, headers, body}]} in
//	                                           CLIENT_ACTION_REQUIRED → 200 session; 422
//	                                           CLIENT_RESPONSE_INVALID (the session is FAILED);
//	                                           409 NOT_AWAITING_CLIENT_RESPONSES
//	POST   …/sessions/{id}/document            the PDF (application/pdf, multipart "file" or JSON
//	                                           {contentBase64}) in DOCUMENT_REQUIRED → 200 session
//	GET    …/sessions/{id}/{product}           Authorization: Bearer <accessToken>; see getProduct
//	POST   …/client/{id}/eid-order             } requests the user's device runs (INSTRUCTIONS of
//	GET    …/client/{id}/login-result          } the client-side login), with the device token
//	…/{companyId}/v1/consents, …/v1/accounts,  the PSD2 account-information API of a company with
//	…/v1/card-accounts                         consents (se-demo-bank): see consent.go
//
// A session is {sessionId, reference, loginMethod, state, stateSince, failureReason?, message?,
// eidOrder?{orderRef, autoStartToken, qrStartToken, qrStartSecret, startedAt, expiresAt, status,
// hintCode?, completionData?}, instructions?[{requestId, method, url, headers, body?}],
// twoFactor?{methods, method?}, requiredInputs?, document?{status, message?, insurances?,
// pensions?}, customer?{personalNumber}, accessToken?, products?, createdAt, expiresAt?}; its
// states are listed in session.go. A company with consents serves accounts and cards only under
// a PSD2 consent, never under a login session (403 CONSENT_REQUIRED there). Errors are {code, message}: 400 INVALID_REQUEST |
// INVALID_PERSONAL_NUMBER | INVALID_INPUT, 401 INVALID_TOKEN, 404 UNKNOWN_COMPANY |
// SESSION_NOT_FOUND | UNKNOWN_PRODUCT | NO_CAREER_STATEMENT, 409 NOT_AUTHENTICATED |
// NOT_AWAITING_…, 413 DOCUMENT_TOO_LARGE, 422 LOGIN_METHOD_NOT_SUPPORTED (with
// supportedLoginMethods) | IDEMPOTENCY_KEY_REUSED | CLIENT_RESPONSE_INVALID, 500 INTERNAL_ERROR,
// 503 MAINTENANCE | TEMPORARILY_UNAVAILABLE (injected), 504 UPSTREAM_TIMEOUT.
//
// The EID simulator, below /sandbox/eid (see eidsim.Simulator.Handler): the relying-party API
// (rp/v6.0/auth, collect, cancel) and the tester's POST /sandbox/eid/sign and
// /sandbox/eid/cancel with {"collectionId"} or {"consentId"}.
//
// The signing provider, below /sandbox/signing (see signingsim.Provider.Handler; its base URL for
// an adapter is <url>/sandbox/signing):
//
//	POST /sandbox/signing/api/v1/processes               Authorization: Bearer <provider key>;
//	GET  /sandbox/signing/api/v1/processes/{id}          start, read, download the sealed PDF,
//	GET  /sandbox/signing/api/v1/processes/{id}/document cancel a signing process
//	POST /sandbox/signing/api/v1/processes/{id}/cancel
//	POST /sandbox/signing/{reference}/sign               the simulated holder signs or rejects
//	POST /sandbox/signing/{reference}/reject             (no auth)
//	GET  /sandbox/outbox?reference=&to=                  the e-mails and SMS the provider sent
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samla/samla/connectors/sandbox/eidsim"
	"github.com/samla/samla/connectors/sandbox/signingsim"
	"github.com/samla/samla/platform/shrink"
)

// Defaults of SANDBOX.md.
const (
	DefaultLatencyMin      = 5 * time.Millisecond
	DefaultLatencyMax      = 30 * time.Millisecond
	DefaultMockSignDelay   = time.Second
	DefaultEIDOrderTimeout = 30 * time.Second
	// DefaultSessionTTL is how long the company remembers a login session; long enough for the
	// slowest persona (contact form and input timeouts of a couple of minutes each).
	DefaultSessionTTL = 30 * time.Minute
	// minEIDOrderKeep is how long the provider answers for an order at least (and twice its
	// timeout if that is longer), counted from the order's start: a login collects its order's
	// result within seconds of its end, and a load run's orders must not stay in memory for the
	// sessions' half hour. It is not shorter: a login polled late (a backlog of thousands of
	// sessions, a restarted connector) must still find its signed order, which a minute did
	// not leave time for.
	minEIDOrderKeep = 2 * time.Minute
	// DefaultUserDelay is how long the simulated user takes to enter a two-factor code.
	DefaultUserDelay = 2 * time.Second
	// DefaultStepDelay is how long a company's own step takes (enrollment check, sign-in).
	DefaultStepDelay = 300 * time.Millisecond
	// DefaultProductTimeout is how long a slow data product keeps the caller before its
	// gateway answers 504.
	DefaultProductTimeout = 3 * time.Second
	// DefaultClientWait bounds how long the device's login-result request waits for the
	// signature.
	DefaultClientWait = 25 * time.Second
)

// Option configures a sandbox.
type Option func(*options)

type options struct {
	addr            string
	wrapListener    func(net.Listener) net.Listener
	latencyMin      time.Duration
	latencyMax      time.Duration
	failureRate     float64
	mockSignDelay   time.Duration
	eidOrderTimeout time.Duration
	sessionTTL      time.Duration
	userDelay       time.Duration
	stepDelay       time.Duration
	productTimeout  time.Duration
	clientWait      time.Duration
	consentValidity time.Duration
	publicURL       string
	signingOpts     []signingsim.Option
	logger          *slog.Logger
	now             func() time.Time
	janitorInterval time.Duration
	readTimeout     time.Duration // the least the listener's ReadTimeout may be; see serverTimeouts
	idleTimeout     time.Duration
	seed            uint64
	seeded          bool
}

// WithAddr sets the listen address; the default 127.0.0.1:0 picks a free port.
func WithAddr(addr string) Option { return func(o *options) { o.addr = addr } }

// WithListener has Start serve on wrap(listener): a bound on the connections it holds (the
// service's connection budget).
func WithListener(wrap func(net.Listener) net.Listener) Option {
	return func(o *options) { o.wrapListener = wrap }
}

// WithLatency sets the range each company request is delayed by (uniformly); 0, 0 turns
// latency off, which tests want.
func WithLatency(min, max time.Duration) Option {
	return func(o *options) { o.latencyMin, o.latencyMax = min, max }
}

// WithFailureRate answers that fraction (0..1) of company requests with 503 before handling
// them, to prove that connectors retry. 1 makes every company permanently unavailable.
func WithFailureRate(rate float64) Option { return func(o *options) { o.failureRate = rate } }

// WithMockSignDelay sets how long the simulated user of SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK
// takes to sign (SANDBOX.md: about one second).
func WithMockSignDelay(d time.Duration) Option { return func(o *options) { o.mockSignDelay = d } }

// WithEIDOrderTimeout sets when an unsigned EID order expires (SAMLA_EID_ORDER_TIMEOUT).
func WithEIDOrderTimeout(d time.Duration) Option {
	return func(o *options) { o.eidOrderTimeout = d }
}

// WithSessionTTL sets how long a company remembers a login session.
func WithSessionTTL(d time.Duration) Option { return func(o *options) { o.sessionTTL = d } }

// WithUserDelay sets how long the simulated user takes to act at the company (entering a
// two-factor code).
func WithUserDelay(d time.Duration) Option { return func(o *options) { o.userDelay = d } }

// WithStepDelay sets how long the company's own steps take (enrollment check, a sign-in before
// two-factor or a form).
func WithStepDelay(d time.Duration) Option { return func(o *options) { o.stepDelay = d } }

// WithProductTimeout sets how long the partial persona's slow product keeps the caller before
// answering 504.
func WithProductTimeout(d time.Duration) Option { return func(o *options) { o.productTimeout = d } }

// WithClientWait bounds how long the device's login-result request waits for the signature.
func WithClientWait(d time.Duration) Option { return func(o *options) { o.clientWait = d } }

// WithPublicURL is the root under which clients outside reach the sandbox (e.g. Samla's own
// listener when the handler is mounted there): it is used for the URLs of client-side
// instructions and for BaseURL of a sandbox built with New.
func WithPublicURL(u string) Option { return func(o *options) { o.publicURL = u } }

// WithSigningSealDelay sets how long after the holder signs the signing provider makes the
// sealed PDF available (signingsim.DefaultSealDelay; 0 seals within the signing request).
func WithSigningSealDelay(d time.Duration) Option {
	return WithSigningOptions(signingsim.WithSealDelay(d))
}

// WithSigningOptions passes options to the signing provider simulator (callback retries,
// limits, …); they apply after the sandbox's own clock and logger.
func WithSigningOptions(opts ...signingsim.Option) Option {
	return func(o *options) { o.signingOpts = append(o.signingOpts, opts...) }
}

// WithLogger sets the logger; it never receives personal numbers or names.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock replaces time.Now for every time-driven decision (signing, expiry, renewal dates).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithSeed makes latency and failure injection reproducible.
func WithSeed(seed uint64) Option { return func(o *options) { o.seed, o.seeded = seed, true } }

// Stats counts what the sandbox did; tests use it to prove that failures were injected.
type Stats struct {
	Requests         int64 // company API requests received
	InjectedFailures int64 // of which answered 503 on purpose
}

// Sandbox is a running set of demo companies.
type Sandbox struct {
	opts      options
	companies map[string]*demoCompany
	personas  personaTable
	eid       *eidsim.Simulator
	signing   *signingsim.Provider
	handler   http.Handler

	srv       *http.Server
	ln        net.Listener
	url       string
	serveDone chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu          sync.Mutex
	sessions    map[string]*loginSession // by session id
	idempotency map[string]string        // company id + "\x00" + key → session id
	lastPurge   time.Time                // when purgeLocked last looked
	// sessionsPeak is the most sessions held since the maps were last copied: a purge that
	// finds a burst's sessions mostly ended copies sessions and idempotency into new maps,
	// which let go of the buckets (Go maps keep them after deletes).
	sessionsPeak shrink.Peak
	consents     map[string]*bankConsent // PSD2 consents by consent id (consent.go)
	consentKeys  map[string]string       // company id + "\x00" + key → consent id

	rngMu sync.Mutex
	rng   *rand.Rand

	failureRate      atomic.Uint64 // math.Float64bits of the current rate
	requests         atomic.Int64
	injectedFailures atomic.Int64
}

// New builds a sandbox without listening, for mounting its Handler elsewhere. Start is the
// usual entry point.
func New(opts ...Option) (*Sandbox, error) {
	o := options{
		addr: "127.0.0.1:0", latencyMin: DefaultLatencyMin, latencyMax: DefaultLatencyMax,
		mockSignDelay: DefaultMockSignDelay, eidOrderTimeout: DefaultEIDOrderTimeout,
		sessionTTL: DefaultSessionTTL, userDelay: DefaultUserDelay, stepDelay: DefaultStepDelay,
		productTimeout: DefaultProductTimeout, clientWait: DefaultClientWait, consentValidity: DefaultConsentValidity,
		now: time.Now, janitorInterval: defaultJanitorInterval,
		readTimeout: defaultReadTimeout, idleTimeout: defaultIdleTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.latencyMin < 0 || o.latencyMax < o.latencyMin:
		return nil, fmt.Errorf("sandbox latency range %v..%v is invalid", o.latencyMin, o.latencyMax)
	case o.failureRate < 0 || o.failureRate > 1:
		return nil, fmt.Errorf("sandbox failure rate %v is not within 0..1", o.failureRate)
	case o.mockSignDelay < 0 || o.userDelay < 0 || o.stepDelay < 0 || o.productTimeout < 0 || o.clientWait < 0:
		return nil, errors.New("sandbox delays must not be negative")
	case o.eidOrderTimeout <= 0 || o.sessionTTL <= 0 || o.consentValidity <= 0:
		return nil, errors.New("sandbox timeouts must be positive")
	case o.now == nil:
		return nil, errors.New("sandbox clock is nil")
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if !o.seeded {
		o.seed = rand.Uint64()
	}
	signing, err := signingsim.New(append([]signingsim.Option{signingsim.WithClock(o.now), signingsim.WithLogger(o.logger)},
		o.signingOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("sandbox signing provider: %w", err)
	}
	personas := newPersonaTable()
	s := &Sandbox{
		opts:        o,
		companies:   demoCompanies(),
		personas:    personas,
		eid:         eidsim.New(o.eidOrderTimeout, eidOrderKeep(o.eidOrderTimeout), personas.eidUser),
		signing:     signing,
		sessions:    map[string]*loginSession{},
		idempotency: map[string]string{},
		consents:    map[string]*bankConsent{},
		consentKeys: map[string]string{},
		rng:         rand.New(rand.NewPCG(o.seed, o.seed^0x5a4d4c41)),
	}
	s.SetFailureRate(o.failureRate)
	s.handler = s.routes()
	return s, nil
}

// Start builds a sandbox and serves it until ctx ends or Close is called.
func Start(ctx context.Context, opts ...Option) (*Sandbox, error) {
	s, err := New(opts...)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", s.opts.addr)
	if err != nil {
		return nil, fmt.Errorf("sandbox listen on %s: %w", s.opts.addr, err)
	}
	if s.opts.wrapListener != nil {
		ln = s.opts.wrapListener(ln)
	}
	s.ln, s.url = ln, "http://"+ln.Addr().String()
	readTimeout, idleTimeout := s.serverTimeouts()
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.opts.logger.Handler(), slog.LevelWarn),
	}
	s.serveDone = make(chan struct{})
	go func() {
		defer close(s.serveDone)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.logger.Error("sandbox server stopped", "error", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.serveDone:
		}
	}()
	go s.janitor()
	s.opts.logger.Info("sandbox listening", "url", s.url)
	return s, nil
}

// Bounds of the sandbox's listener. Without them a connection that had sent one request, or
// the header of a request whose body never came, was held forever: 19,950 such connections
// took every file descriptor of the process (samla run), and /livez, the API and the embedded
// Kafka broker could accept nothing until they were closed.
const (
	// defaultReadTimeout bounds reading a whole request, body included. A request that waits
	// for the user (the device's login-result, up to clientWait) keeps its connection past
	// it: see serverTimeouts.
	defaultReadTimeout = 60 * time.Second
	// defaultIdleTimeout closes a keep-alive connection that starts no next request, as the
	// API's listener does.
	defaultIdleTimeout = 120 * time.Second
	// maxHeaderBytes bounds a request's header; the connectors send a few hundred bytes, and
	// net/http's 1 MiB default let each slow connection hold about 2 MB.
	maxHeaderBytes = 64 << 10
)

// serverTimeouts are the listener's ReadTimeout and IdleTimeout. net/http cancels a request's
// context once the connection's read deadline passes, so the ReadTimeout outlasts the longest
// a handler waits on purpose (clientWait, after the simulated latency).
func (s *Sandbox) serverTimeouts() (read, idle time.Duration) {
	read = max(s.opts.readTimeout, s.opts.clientWait+s.opts.latencyMax+s.opts.productTimeout+10*time.Second)
	return read, s.opts.idleTimeout
}

// defaultJanitorInterval is how often an idle sandbox forgets its expired sessions and EID
// orders (options.janitorInterval; tests shorten it). A look is a pass over the maps under their
// locks, ~1 ms for a load run's 20,000 orders; at 30 s a burst's orders stayed up to half a
// minute past their keep, and with them the heap spans they are scattered over (three minutes
// after a 30 s POST load the heap in use was 66 MB or 21 MB by when the last look fell).
const defaultJanitorInterval = 5 * time.Second

// janitor forgets expired sessions and orders while the server runs: otherwise only a new
// login does, and a burst's state would stay in memory until the next one.
func (s *Sandbox) janitor() {
	t := time.NewTicker(s.opts.janitorInterval)
	defer t.Stop()
	for {
		select {
		case <-s.serveDone:
			return
		case <-t.C:
			now := s.opts.now()
			s.eid.Purge(now)
			s.mu.Lock()
			s.lastPurge = time.Time{}
			s.purgeLocked(now)
			s.mu.Unlock()
		}
	}
}

// Handler serves every sandbox route under /sandbox/.
func (s *Sandbox) Handler() http.Handler { return s.handler }

// URL is the root of the running server ("" when built with New).
func (s *Sandbox) URL() string { return s.url }

// EID is the electronic-ID simulator the demo companies use.
func (s *Sandbox) EID() *eidsim.Simulator { return s.eid }

// Signing is the signing provider simulator (tests switch its callbacks off or read its
// outbox and certificates directly).
func (s *Sandbox) Signing() *signingsim.Provider { return s.signing }

// BaseURL is where a company's API lives; "" for a company the sandbox does not run, so that
// a misconfigured connector fails loudly instead of calling the wrong host.
func (s *Sandbox) BaseURL(companyID string) string {
	root := s.url
	if root == "" {
		root = strings.TrimRight(s.opts.publicURL, "/")
	}
	if _, ok := s.companies[companyID]; !ok || root == "" {
		return ""
	}
	return root + "/sandbox/companies/" + companyID
}

// SetFailureRate changes the injected failure rate while running (tests take a company down
// and bring it back).
func (s *Sandbox) SetFailureRate(rate float64) {
	rate = min(max(rate, 0), 1)
	s.failureRate.Store(math.Float64bits(rate))
}

// Stats reports request counters.
func (s *Sandbox) Stats() Stats {
	return Stats{Requests: s.requests.Load(), InjectedFailures: s.injectedFailures.Load()}
}

// Close stops the server, letting requests in flight finish for a moment, and then the signing
// provider's background work (also for a sandbox built with New).
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		defer func() { s.closeErr = errors.Join(s.closeErr, s.signing.Close()) }()
		if s.srv == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		// Connections a client dialled but never used hold Shutdown for up to five seconds; a
		// simulator has nothing to drain, so after the grace period they are simply closed.
		if err := s.srv.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
			s.closeErr = s.srv.Close()
		} else if err != nil {
			s.closeErr = errors.Join(fmt.Errorf("sandbox shutdown: %w", err), s.srv.Close())
		}
		<-s.serveDone
	})
	return s.closeErr
}

func (s *Sandbox) now() time.Time { return s.opts.now() }

// chaos makes the company API behave like a remote one: every request waits a random latency
// and a fraction is refused with 503 before any state changes, so a retry is always safe.
func (s *Sandbox) chaos(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if d := s.latency(); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		if rate := math.Float64frombits(s.failureRate.Load()); rate > 0 && s.draw() < rate {
			s.injectedFailures.Add(1)
			writeError(w, http.StatusServiceUnavailable, "TEMPORARILY_UNAVAILABLE", "The service is temporarily unavailable.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Sandbox) latency() time.Duration {
	lo, hi := s.opts.latencyMin, s.opts.latencyMax
	if hi <= 0 {
		return 0
	}
	if hi == lo {
		return lo
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

func (s *Sandbox) draw() float64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64()
}

func (s *Sandbox) routes() http.Handler {
	api := http.NewServeMux()
	api.HandleFunc("GET /sandbox/companies", s.listCompanies)
	api.HandleFunc("GET /sandbox/companies/{companyId}", s.getCompany)
	api.HandleFunc("POST /sandbox/companies/{companyId}/sessions", s.createSession)
	api.HandleFunc("GET /sandbox/companies/{companyId}/sessions/{sessionId}", s.getSession)
	api.HandleFunc("DELETE /sandbox/companies/{companyId}/sessions/{sessionId}", s.deleteSession)
	api.HandleFunc("POST /sandbox/companies/{companyId}/sessions/{sessionId}/inputs", s.submitInputs)
	api.HandleFunc("POST /sandbox/companies/{companyId}/sessions/{sessionId}/two-factor-method", s.selectTwoFactorMethod)
	api.HandleFunc("POST /sandbox/companies/{companyId}/sessions/{sessionId}/client-responses", s.submitClientResponses)
	api.HandleFunc("POST /sandbox/companies/{companyId}/sessions/{sessionId}/document", s.uploadDocument)
	api.HandleFunc("GET /sandbox/companies/{companyId}/sessions/{sessionId}/{product}", s.getProduct)
	api.HandleFunc("POST /sandbox/companies/{companyId}/client/{sessionId}/eid-order", s.deviceStartOrder)
	api.HandleFunc("GET /sandbox/companies/{companyId}/client/{sessionId}/login-result", s.deviceLoginResult)
	api.HandleFunc("POST /sandbox/companies/{companyId}/v1/consents", s.createConsent)
	api.HandleFunc("GET /sandbox/companies/{companyId}/v1/consents/{consentId}", s.getConsent)
	api.HandleFunc("GET /sandbox/companies/{companyId}/v1/consents/{consentId}/status", s.getConsentStatus)
	api.HandleFunc("DELETE /sandbox/companies/{companyId}/v1/consents/{consentId}", s.deleteConsent)
	api.HandleFunc("GET /sandbox/companies/{companyId}/v1/accounts", s.psd2Accounts)
	api.HandleFunc("GET /sandbox/companies/{companyId}/v1/card-accounts", s.psd2Cards)
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "No such resource.")
	})

	root := http.NewServeMux()
	companies := s.chaos(api)
	root.Handle("/sandbox/companies", companies)
	root.Handle("/sandbox/companies/", companies)
	root.Handle("/sandbox/eid/", s.eid.Handler("/sandbox/eid", s.now))
	root.Handle("/sandbox/signing/", s.signing.Handler("/sandbox/signing"))
	root.Handle("/sandbox/outbox", s.signing.OutboxHandler())
	root.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "No such resource.")
	})
	return root
}

// eidOrderKeep is how long the simulated provider keeps an order of the given timeout.
func eidOrderKeep(timeout time.Duration) time.Duration { return max(minEIDOrderKeep, 2*timeout) }
