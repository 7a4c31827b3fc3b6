// Package signingsim simulates the e-signing provider through which Samla sends a
// cancellation's power of attorney to the insurance holder. It speaks HTTP like a real
// e-signing service (see Handler): a client uploads a PDF with its provider API key, the
// provider sends the signer a signing link by e-mail or SMS (recorded in an outbox that testers
// read), the simulated holder signs or rejects (the tester's endpoints), and the provider seals
// the signed PDF (the original pages, a signature page and a real PDF digital signature by the
// provider's own sealing certificate) and reports every change to the client's callback URL.
//
// Testers provoke the provider's refusals through what they upload:
//
//   - a document that is not a readable PDF (or is encrypted, or has more than MaxPages pages)
//     is refused at upload: 422 DOCUMENT_REFUSED;
//   - a PDF whose text contains RefuseMarker ("SANDBOX:REFUSE") is refused the same way, so a
//     client's power-of-attorney template can carry the marker to test DOCUMENT_ERROR;
//   - a PDF whose text contains FailSealMarker ("SANDBOX:FAIL_SEAL") is accepted and can be
//     signed, but sealing then fails: the process ends FAILED with error SEAL_FAILED;
//   - an API key starting with "invalid" (or none) is refused: 401 UNAUTHORIZED.
//
// Any other non-empty key is accepted, and the key partitions the data: a process is visible
// only with the key that created it (404 with another), as a real provider keeps its customers
// apart.
//
// Everything lives in memory, bounded: a document of at most MaxDocumentSize bytes, at most
// WithLimits processes and stored bytes (503 CAPACITY_EXCEEDED beyond), finished processes
// purged after WithRetention, the outbox keeping its newest MaxOutboxMessages. The outbox and
// the documents hold personal data (names, e-mail addresses, phone numbers): the provider never
// logs them. Background work (sealing, callbacks, expiry sweeps) runs on a fixed number of
// goroutines, started with the first process and stopped by Close.
package signingsim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/samla/samla/platform/retry"
)

// Limits and defaults.
const (
	// MaxDocumentSize bounds an uploaded document (decoded): larger is 413.
	MaxDocumentSize = 10 << 20
	// MaxPages bounds the pages of a document the provider accepts.
	MaxPages = 500
	// DefaultSealDelay is how long after the signature the sealed PDF becomes available.
	DefaultSealDelay = 200 * time.Millisecond
	// DefaultRetention is how long a finished process (and its sealed PDF) stays readable.
	DefaultRetention = 24 * time.Hour
	// DefaultMaxProcesses and DefaultMaxStoredBytes bound what the provider keeps in memory.
	DefaultMaxProcesses   = 10_000
	DefaultMaxStoredBytes = 512 << 20
	// MaxOutboxMessages is how many outbox messages are kept (the oldest go first).
	MaxOutboxMessages = 1000
	// DefaultSweepInterval is how often expiries are noticed and finished processes purged
	// without anyone reading them.
	DefaultSweepInterval = time.Second
	// DefaultCallbackAttempts is how often one callback is tried before it is given up.
	DefaultCallbackAttempts = 4
	// DefaultCallbackTimeout bounds one callback request.
	DefaultCallbackTimeout = 5 * time.Second
	// DefaultLinkBase is where the signing links of the messages point.
	DefaultLinkBase = "https://signing.sandbox.samla.example"

	// SignatureMethod is how the simulated holder identifies when signing.
	SignatureMethod = "SANDBOX_EID"
	// RefuseMarker in a document's text makes the provider refuse it (422 DOCUMENT_REFUSED).
	RefuseMarker = "SANDBOX:REFUSE"
	// FailSealMarker in a document's text makes its sealing fail (state FAILED, SEAL_FAILED).
	FailSealMarker = "SANDBOX:FAIL_SEAL"
	// SignatureHeader carries a callback's signature: "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" keyed with the client's provider API key>".
	SignatureHeader = "Signing-Signature"

	callbackWorkers = 4
	callbackQueue   = 1024
	sealWorkers     = 2
	sealQueue       = 256
)

// DefaultCallbackBackoff spaces the attempts of one callback.
var DefaultCallbackBackoff = retry.Backoff{Base: 200 * time.Millisecond, Max: 2 * time.Second}

// State is where a signing process stands.
type State string

const (
	StatePending  State = "PENDING"
	StateSigned   State = "SIGNED"
	StateRejected State = "REJECTED"
	StateCanceled State = "CANCELED"
	StateExpired  State = "EXPIRED"
	StateFailed   State = "FAILED"
)

// Errors of the Go API; the handler maps them to HTTP statuses.
var (
	ErrUnauthorized     = errors.New("API key refused")
	ErrInvalidRequest   = errors.New("invalid request")
	ErrDocumentTooLarge = errors.New("document too large")
	ErrDocumentRefused  = errors.New("document refused")
	ErrNotFound         = errors.New("signing process not found")
	ErrNotPending       = errors.New("signing process is not pending")
	ErrNotSealed        = errors.New("signed document not sealed")
	ErrCapacity         = errors.New("signing provider storage full")
	ErrClosed           = errors.New("signing provider closed")
)

// Option configures a Provider.
type Option func(*options)

type options struct {
	sealDelay        time.Duration
	now              func() time.Time
	retention        time.Duration
	maxProcesses     int
	maxStoredBytes   int64
	sweepInterval    time.Duration
	callbackAttempts int
	callbackBackoff  retry.Backoff
	callbackClient   *http.Client
	linkBase         string
	logger           *slog.Logger
}

// WithSealDelay sets how long after the signature the sealed PDF becomes available; 0 seals
// within the signing request.
func WithSealDelay(d time.Duration) Option { return func(o *options) { o.sealDelay = d } }

// WithClock replaces time.Now for the times the provider reports and decides on (sentAt,
// signedAt, expiry, callback timestamps). Delays (sealing, retries) run on the real clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithRetention sets how long a finished process stays readable before it is purged.
func WithRetention(d time.Duration) Option { return func(o *options) { o.retention = d } }

// WithLimits bounds the number of processes and the bytes of documents kept in memory.
func WithLimits(maxProcesses int, maxStoredBytes int64) Option {
	return func(o *options) { o.maxProcesses, o.maxStoredBytes = maxProcesses, maxStoredBytes }
}

// WithSweepInterval sets how often expiries are noticed and finished processes purged.
func WithSweepInterval(d time.Duration) Option { return func(o *options) { o.sweepInterval = d } }

// WithCallbackRetry sets how often a callback is tried and how the attempts are spaced.
func WithCallbackRetry(attempts int, backoff retry.Backoff) Option {
	return func(o *options) { o.callbackAttempts, o.callbackBackoff = attempts, backoff }
}

// WithLinkBase sets the root of the signing links in the messages.
func WithLinkBase(u string) Option { return func(o *options) { o.linkBase = u } }

// WithLogger sets the logger; it never receives keys, documents, names or addresses.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Delivery is how the signing link reaches the signer.
type Delivery struct {
	Method      string `json:"method"` // "EMAIL" or "SMS"
	Email       string `json:"email,omitempty"`
	PhoneNumber string `json:"phoneNumber,omitempty"`
}

// Signer names who is asked to sign; both fields are optional.
type Signer struct {
	Name           string `json:"name,omitempty"`
	PersonalNumber string `json:"personalNumber,omitempty"`
}

// StartRequest is the body of POST …/api/v1/processes.
type StartRequest struct {
	Reference   string    `json:"reference"`
	Title       string    `json:"title"`
	Document    []byte    `json:"documentBase64"`
	Delivery    Delivery  `json:"delivery"`
	Signer      Signer    `json:"signer"`
	ExpiresAt   time.Time `json:"expiresAt,omitzero"`
	CallbackURL string    `json:"callbackUrl,omitempty"`
}

// ProcessError explains a FAILED process.
type ProcessError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Process is the provider's view of a signing process, as its API returns it.
type Process struct {
	ID              string        `json:"processId"`
	Reference       string        `json:"reference"`
	State           State         `json:"state"`
	SentAt          time.Time     `json:"sentAt"`
	SignedAt        time.Time     `json:"signedAt,omitzero"`
	ExpiresAt       time.Time     `json:"expiresAt,omitzero"`
	Sealed          bool          `json:"sealed"`
	SignatureMethod string        `json:"signatureMethod,omitempty"`
	Error           *ProcessError `json:"error,omitempty"`
}

// Message is one e-mail or SMS the provider sent.
type Message struct {
	ID        string    `json:"id"`
	Channel   string    `json:"channel"` // "EMAIL" or "SMS"
	To        string    `json:"to"`
	Subject   string    `json:"subject,omitempty"`
	Body      string    `json:"body"`
	Reference string    `json:"reference"`
	SentAt    time.Time `json:"sentAt"`
}

// Stats counts what the provider did; tests read it.
type Stats struct {
	Processes        int
	StoredBytes      int64
	Seals            int64
	SealFailures     int64
	CallbacksSent    int64 // delivered (2xx)
	CallbacksFailed  int64 // given up after every attempt
	CallbacksDropped int64 // never attempted: the drop switch, or a full queue
}

type process struct {
	id, reference string
	apiKey        string // the creator's key: partitions the data and keys the callbacks
	keyID         string // hash of apiKey, for the idempotency index
	title         string
	signer        Signer
	document      []byte // the original, until sealed or the process ends unsigned
	sealedDoc     []byte
	expiresAt     time.Time
	callbackURL   string
	failSeal      bool

	state      State
	sentAt     time.Time
	signedAt   time.Time
	finishedAt time.Time // when it reached a state that will not change
	sealed     bool
	sealQueued bool      // a seal job for it is queued or running
	sealDue    time.Time // real (monotonic) time the sealed PDF becomes available
	errCode    string
	errMessage string
}

type keyRef struct{ keyID, reference string }

type event struct {
	id, processID string
	url, apiKey   string
	body          []byte
}

// Provider is the simulated e-signing service.
type Provider struct {
	opts   options
	sealer *sealer

	mu          sync.Mutex
	procs       map[string]*process
	byKeyRef    map[keyRef]string
	byRef       map[string][]string // reference → process ids, oldest first
	storedBytes int64
	outbox      []Message
	timers      map[string]*time.Timer // pending "sealed" moments by process id
	closed      bool

	startOnce sync.Once
	ctx       context.Context // ends at Close: stops the goroutines and cuts callbacks off
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	sealJobs  chan string
	events    chan event

	dropCallbacks    atomic.Bool
	seals            atomic.Int64
	sealFailures     atomic.Int64
	callbacksSent    atomic.Int64
	callbacksFailed  atomic.Int64
	callbacksDropped atomic.Int64
}

// New builds a provider with a fresh sealing CA and certificate. No goroutine runs until the
// first process is started.
func New(opts ...Option) (*Provider, error) {
	o := options{
		sealDelay: DefaultSealDelay, now: time.Now, retention: DefaultRetention,
		maxProcesses: DefaultMaxProcesses, maxStoredBytes: DefaultMaxStoredBytes,
		sweepInterval: DefaultSweepInterval, callbackAttempts: DefaultCallbackAttempts,
		callbackBackoff: DefaultCallbackBackoff, linkBase: DefaultLinkBase,
	}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.sealDelay < 0:
		return nil, errors.New("signing simulator seal delay must not be negative")
	case o.now == nil:
		return nil, errors.New("signing simulator clock is nil")
	case o.retention <= 0 || o.sweepInterval <= 0:
		return nil, errors.New("signing simulator retention and sweep interval must be positive")
	case o.maxProcesses <= 0 || o.maxStoredBytes < MaxDocumentSize:
		return nil, fmt.Errorf("signing simulator limits must allow at least one process of %d bytes", MaxDocumentSize)
	case o.callbackAttempts <= 0:
		return nil, errors.New("signing simulator callback attempts must be positive")
	}
	if u, err := url.Parse(o.linkBase); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("signing simulator link base %q is not an absolute URL", o.linkBase)
	}
	o.linkBase = strings.TrimRight(o.linkBase, "/")
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	// A callback's redirects are never followed: it goes where the client said, or nowhere.
	o.callbackClient = &http.Client{Timeout: DefaultCallbackTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	s, err := newSealer(o.now())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{
		opts: o, sealer: s,
		procs: map[string]*process{}, byKeyRef: map[keyRef]string{}, byRef: map[string][]string{},
		timers: map[string]*time.Timer{}, ctx: ctx, cancel: cancel,
		sealJobs: make(chan string, sealQueue), events: make(chan event, callbackQueue),
	}, nil
}

// CACertificate is the self-signed root that issued the seal certificate (what a relying party
// would add to its trust store).
func (p *Provider) CACertificate() *x509.Certificate { return p.sealer.ca }

// SealCertificate is the certificate whose key seals the signed PDFs.
func (p *Provider) SealCertificate() *x509.Certificate { return p.sealer.cert }

// SetDropCallbacks makes the provider drop (true) or deliver (false) callbacks from now on, so
// that a client's polling can be tested without them.
func (p *Provider) SetDropCallbacks(drop bool) { p.dropCallbacks.Store(drop) }

// Stats reports counters.
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	n, bytes := len(p.procs), p.storedBytes
	p.mu.Unlock()
	return Stats{
		Processes: n, StoredBytes: bytes, Seals: p.seals.Load(), SealFailures: p.sealFailures.Load(),
		CallbacksSent: p.callbacksSent.Load(), CallbacksFailed: p.callbacksFailed.Load(),
		CallbacksDropped: p.callbacksDropped.Load(),
	}
}

// Close stops the background work: queued seals and callbacks are abandoned, a callback in
// flight is cut off. Reads still work; new processes and signatures are refused (ErrClosed).
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for id, t := range p.timers {
		t.Stop()
		delete(p.timers, id)
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

func (p *Provider) now() time.Time { return p.opts.now() }

// start launches the fixed set of background goroutines once.
func (p *Provider) start() {
	p.startOnce.Do(func() {
		p.wg.Add(1 + sealWorkers + callbackWorkers)
		go p.sweeper()
		for range sealWorkers {
			go p.sealWorker()
		}
		for range callbackWorkers {
			go p.callbackWorker()
		}
	})
}

// Authorized tells whether the provider accepts a key: any non-empty key except those starting
// with "invalid", which tests use to provoke 401.
func Authorized(apiKey string) bool {
	return apiKey != "" && len(apiKey) <= 512 && !strings.HasPrefix(apiKey, "invalid")
}

func keyID(apiKey string) string {
	h := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(h[:])
}

var (
	referencePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	phonePattern     = regexp.MustCompile(`^\+?[0-9]{8,15}$`)
	pnrPattern       = regexp.MustCompile(`^[0-9]{10}$|^[0-9]{12}$`)
)

// InvalidError names the field of a request that is malformed; it never repeats the value
// (which may be personal data).
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }
func (e *InvalidError) Unwrap() error { return ErrInvalidRequest }

func invalid(field, reason string) error { return &InvalidError{Field: field, Reason: reason} }

func plainText(s string, maxLen int) bool {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxLen {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

func (req *StartRequest) validate(now time.Time) error {
	switch {
	case !referencePattern.MatchString(req.Reference):
		return invalid("reference", "1 to 128 of A-Z a-z 0-9 . _ : - are required")
	case strings.TrimSpace(req.Title) == "" || !plainText(req.Title, 200):
		return invalid("title", "1 to 200 characters of text are required")
	case len(req.Document) == 0:
		return invalid("documentBase64", "a base64 PDF is required")
	case len(req.Document) > MaxDocumentSize:
		return fmt.Errorf("%w: larger than %d bytes", ErrDocumentTooLarge, MaxDocumentSize)
	case !plainText(req.Signer.Name, 200):
		return invalid("signer.name", "at most 200 characters of text")
	case req.Signer.PersonalNumber != "" && !pnrPattern.MatchString(req.Signer.PersonalNumber):
		return invalid("signer.personalNumber", "10 or 12 digits")
	case !req.ExpiresAt.IsZero() && !req.ExpiresAt.After(now):
		return invalid("expiresAt", "must be in the future")
	}
	switch req.Delivery.Method {
	case "EMAIL":
		a, err := mail.ParseAddress(req.Delivery.Email)
		if err != nil || a.Name != "" || a.Address != req.Delivery.Email || len(a.Address) > 254 {
			return invalid("delivery.email", "a plain e-mail address is required for EMAIL")
		}
		if req.Delivery.PhoneNumber != "" {
			return invalid("delivery.phoneNumber", "not allowed for EMAIL")
		}
	case "SMS":
		if !phonePattern.MatchString(req.Delivery.PhoneNumber) {
			return invalid("delivery.phoneNumber", "8 to 15 digits with the country prefix are required for SMS")
		}
		if req.Delivery.Email != "" {
			return invalid("delivery.email", "not allowed for SMS")
		}
	default:
		return invalid("delivery.method", "EMAIL or SMS")
	}
	if req.CallbackURL != "" {
		u, err := url.Parse(req.CallbackURL)
		if err != nil || len(req.CallbackURL) > 2048 || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid("callbackUrl", "an absolute http(s) URL of at most 2048 characters")
		}
	}
	return nil
}

// Start starts a signing process and sends the signer the link. It is idempotent by (key,
// reference): a repeat returns the first process and created false, whatever its document (a
// client re-rendering its PDF on a retry must not start a second signature).
func (p *Provider) Start(apiKey string, req StartRequest) (proc Process, created bool, err error) {
	if !Authorized(apiKey) {
		return Process{}, false, ErrUnauthorized
	}
	now := p.now()
	if err := req.validate(now); err != nil {
		return Process{}, false, err
	}
	kr := keyRef{keyID(apiKey), req.Reference}
	if v, ok := p.existing(kr, now); ok {
		return v, false, nil
	}
	// The intake check parses the whole document: outside the lock.
	text, err := checkPDF(req.Document)
	if err != nil {
		return Process{}, false, fmt.Errorf("%w: %w", ErrDocumentRefused, err)
	}
	if strings.Contains(text, RefuseMarker) {
		return Process{}, false, fmt.Errorf("%w: the document carries %s", ErrDocumentRefused, RefuseMarker)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Process{}, false, ErrClosed
	}
	if id, ok := p.byKeyRef[kr]; ok { // started by a concurrent retry meanwhile
		pr := p.procs[id]
		p.settle(pr, now)
		return pr.view(), false, nil
	}
	if len(p.procs) >= p.opts.maxProcesses || p.storedBytes+int64(len(req.Document)) > p.opts.maxStoredBytes {
		p.purge(now)
		if len(p.procs) >= p.opts.maxProcesses || p.storedBytes+int64(len(req.Document)) > p.opts.maxStoredBytes {
			return Process{}, false, ErrCapacity
		}
	}
	pr := &process{
		id: uuid.NewString(), reference: req.Reference, apiKey: apiKey, keyID: kr.keyID,
		title: req.Title, signer: req.Signer, document: req.Document, expiresAt: req.ExpiresAt,
		callbackURL: req.CallbackURL, failSeal: strings.Contains(text, FailSealMarker),
		state: StatePending, sentAt: now,
	}
	p.procs[pr.id] = pr
	p.byKeyRef[kr] = pr.id
	p.byRef[pr.reference] = append(p.byRef[pr.reference], pr.id)
	p.storedBytes += int64(len(pr.document))
	p.send(pr, req.Delivery, now)
	p.start()
	return pr.view(), true, nil
}

func (p *Provider) existing(kr keyRef, now time.Time) (Process, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.byKeyRef[kr]
	if !ok {
		return Process{}, false
	}
	pr := p.procs[id]
	p.settle(pr, now)
	return pr.view(), true
}

// Get reads a process of the key.
func (p *Provider) Get(apiKey, processID string) (Process, error) {
	if !Authorized(apiKey) {
		return Process{}, ErrUnauthorized
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, err := p.lookup(apiKey, processID)
	if err != nil {
		return Process{}, err
	}
	return pr.view(), nil
}

// Document returns the sealed PDF of a signed process (ErrNotSealed before).
func (p *Provider) Document(apiKey, processID string) ([]byte, error) {
	if !Authorized(apiKey) {
		return nil, ErrUnauthorized
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, err := p.lookup(apiKey, processID)
	if err != nil {
		return nil, err
	}
	if pr.state != StateSigned || !pr.sealed {
		return nil, ErrNotSealed
	}
	// Never modified once set: the caller may keep the slice.
	return pr.sealedDoc, nil
}

// Cancel withdraws a pending process; a process already final is returned unchanged.
func (p *Provider) Cancel(apiKey, processID string) (Process, error) {
	if !Authorized(apiKey) {
		return Process{}, ErrUnauthorized
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, err := p.lookup(apiKey, processID)
	if err != nil {
		return Process{}, err
	}
	if pr.state == StatePending {
		p.finish(pr, StateCanceled, p.now())
	}
	return pr.view(), nil
}

// Sign is the simulated holder signing the newest pending process of the reference.
func (p *Provider) Sign(reference string) (Process, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return Process{}, ErrClosed
	}
	now := p.now()
	pr, err := p.pendingByReference(reference, now)
	if err != nil {
		p.mu.Unlock()
		return Process{}, err
	}
	pr.state, pr.signedAt = StateSigned, now
	pr.sealDue = time.Now().Add(p.opts.sealDelay)
	p.emit(pr, now)
	id := pr.id
	if p.opts.sealDelay > 0 {
		p.queueSeal(pr)
		v := pr.view()
		p.mu.Unlock()
		return v, nil
	}
	p.mu.Unlock()
	// No delay: seal within the request, so the answer already says sealed.
	p.sealOne(id)
	p.mu.Lock()
	defer p.mu.Unlock()
	return pr.view(), nil
}

// Reject is the simulated holder declining the newest pending process of the reference.
func (p *Provider) Reject(reference string) (Process, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Process{}, ErrClosed
	}
	now := p.now()
	pr, err := p.pendingByReference(reference, now)
	if err != nil {
		return Process{}, err
	}
	p.finish(pr, StateRejected, now)
	return pr.view(), nil
}

// Outbox lists the messages sent, oldest first, optionally only those of a reference and/or to
// an address ("" matches any).
func (p *Provider) Outbox(reference, to string) []Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []Message{}
	for _, m := range p.outbox {
		if (reference == "" || m.Reference == reference) && (to == "" || m.To == to) {
			out = append(out, m)
		}
	}
	return out
}

// lookup finds a process of the key, settled at now; another key's process is ErrNotFound, as
// if it did not exist. Called with mu held.
func (p *Provider) lookup(apiKey, processID string) (*process, error) {
	pr, ok := p.procs[processID]
	if !ok || pr.keyID != keyID(apiKey) {
		return nil, ErrNotFound
	}
	p.settle(pr, p.now())
	return pr, nil
}

// pendingByReference finds the newest pending process of a reference (several clients may use
// one reference; the tester acts as the one holder of the newest). Called with mu held.
func (p *Provider) pendingByReference(reference string, now time.Time) (*process, error) {
	ids := p.byRef[reference]
	if len(ids) == 0 {
		return nil, ErrNotFound
	}
	for _, id := range slices.Backward(ids) {
		pr := p.procs[id]
		p.settle(pr, now)
		if pr.state == StatePending {
			return pr, nil
		}
	}
	return nil, ErrNotPending
}

// settle moves a pending process past its expiry to EXPIRED: state is decided by the clock
// when read, so an expiry is exact even between sweeps. Called with mu held.
func (p *Provider) settle(pr *process, now time.Time) {
	if pr.state == StatePending && !pr.expiresAt.IsZero() && !now.Before(pr.expiresAt) {
		p.finish(pr, StateExpired, now)
	}
}

// finish ends a process unsigned (or FAILED): its document is no longer needed. Called with
// mu held.
func (p *Provider) finish(pr *process, state State, now time.Time) {
	pr.state, pr.finishedAt = state, now
	p.storedBytes -= int64(len(pr.document))
	pr.document = nil
	p.emit(pr, now)
}

func (pr *process) finished() bool {
	switch pr.state {
	case StatePending:
		return false
	case StateSigned:
		return pr.sealed
	}
	return true
}

func (pr *process) view() Process {
	v := Process{
		ID: pr.id, Reference: pr.reference, State: pr.state, SentAt: pr.sentAt.UTC(),
		ExpiresAt: pr.expiresAt.UTC(), Sealed: pr.sealed,
	}
	if !pr.signedAt.IsZero() {
		v.SignedAt, v.SignatureMethod = pr.signedAt.UTC(), SignatureMethod
	}
	if pr.errCode != "" {
		v.Error = &ProcessError{Code: pr.errCode, Message: pr.errMessage}
	}
	return v
}

// purge forgets finished processes older than the retention. Called with mu held.
func (p *Provider) purge(now time.Time) {
	for id, pr := range p.procs {
		if !pr.finished() || now.Sub(pr.finishedAt) < p.opts.retention {
			continue
		}
		delete(p.procs, id)
		delete(p.byKeyRef, keyRef{pr.keyID, pr.reference})
		ids := slices.DeleteFunc(p.byRef[pr.reference], func(s string) bool { return s == id })
		if len(ids) == 0 {
			delete(p.byRef, pr.reference)
		} else {
			p.byRef[pr.reference] = ids
		}
		p.storedBytes -= int64(len(pr.document) + len(pr.sealedDoc))
	}
}

// sweeper notices expiries nobody read, purges, and re-queues seals whose job could not be
// queued when the holder signed.
func (p *Provider) sweeper() {
	defer p.wg.Done()
	t := time.NewTicker(p.opts.sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		now := p.now()
		for _, pr := range p.procs {
			p.settle(pr, now)
			if pr.state == StateSigned && !pr.sealed && pr.sealedDoc == nil && !pr.sealQueued {
				p.queueSeal(pr)
			}
		}
		p.purge(now)
		p.mu.Unlock()
	}
}

// send records the signing link message in the outbox. Called with mu held.
func (p *Provider) send(pr *process, d Delivery, now time.Time) {
	link := p.opts.linkBase + "/s/" + url.PathEscape(pr.reference) + "?t=" + randomHex(8)
	m := Message{ID: uuid.NewString(), Channel: d.Method, Reference: pr.reference, SentAt: now.UTC()}
	switch d.Method {
	case "EMAIL":
		greeting := "Hej!"
		if pr.signer.Name != "" {
			greeting = "Hej " + pr.signer.Name + "!"
		}
		m.To = d.Email
		m.Subject = "Signera: " + pr.title
		m.Body = greeting + "\n\nDu har fått dokumentet \"" + pr.title + "\" att signera. Öppna länken för att " +
			"läsa och signera det med e-legitimation:\n\n" + link + "\n\n"
		if !pr.expiresAt.IsZero() {
			m.Body += "Länken gäller till " + pr.expiresAt.UTC().Format("2006-01-02 15:04") + " UTC.\n\n"
		}
		m.Body += "Hälsningar\n" + SealerName
	default:
		m.To = d.PhoneNumber
		title := pr.title
		if r := []rune(title); len(r) > 60 {
			title = string(r[:59]) + "…"
		}
		m.Body = SealerName + ": signera \"" + title + "\": " + link
	}
	if len(p.outbox) >= MaxOutboxMessages {
		p.outbox = slices.Delete(p.outbox, 0, len(p.outbox)-MaxOutboxMessages+1)
	}
	p.outbox = append(p.outbox, m)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
