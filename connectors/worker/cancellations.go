package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/connectors/poapdf"
	"github.com/samla/samla/domain/cancellation"
	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/domain/poa"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/metrics"
	"github.com/samla/samla/platform/retry"
)

// The cancellation process manager: for each cancellation a client requested, a
// CancellationWorker renders the power of attorney from the client's template (the version the
// request recorded) and the holder's data the request recorded, claims the cancellation
// (cancellation.claimed, so that two workers do not both send it) and hands the PDF to the
// client's signing provider, which sends the holder the signing link (cancellation.sent: PENDING,
// with the signature deadline SAMLA_SIGNING_TIMEOUT on). It then follows the signature at the
// provider: signed (cancellation.signed: CLOSED), then the provider's sealed PDF
// (cancellation.sealed), or rejected; past the deadline unsigned, it is TIMED_OUT and withdrawn
// at the provider, as is one the client withdrew (CANCELED).
//
// Following a signature takes days, so no goroutine waits on one: a session is one pass over a
// cancellation (send it, or read its process once and record what changed), and passes come
// from the Kafka feed (a request; a verified provider callback, cancellation.provider-notified,
// which makes a lost callback cost one round of the sweep at most), from the sweep of the
// cancellations that still need the provider (a page of them every SweepInterval, the polling
// the issue asks for, every page at Run's start), and from a timer per pending cancellation at
// its deadline, armed by any pass that sees it. Deadlines and claims are in the events, so any
// worker enforces them and a restarted one resumes at once.

// DefaultSigningTimeout is how long the holder has to sign (SAMLA_SIGNING_TIMEOUT).
const DefaultSigningTimeout = 30 * 24 * time.Hour

// DefaultSigningPollInterval is how often the sweep reads a page of the open cancellations at
// their provider when no callback came: a lost callback delays a signature by a round of pages
// at most (ceil(open/SweepLimit)+1 intervals; one interval without a SweepLimit).
const DefaultSigningPollInterval = 30 * time.Second

// CancellationRepository is the part of the command repository the cancellation worker needs;
// *repository.Repository[*cancellation.Cancellation] satisfies it.
type CancellationRepository interface {
	Load(ctx context.Context, documentID string) (*cancellation.Cancellation, error)
	Update(ctx context.Context, documentID string, meta repository.Meta, decide func(*cancellation.Cancellation) error,
		opts ...repository.UpdateOption) (*cancellation.Cancellation, eventstore.AppendResult, error)
}

// ClientLoader loads clients (their names, templates and provider keys) from the event store.
type ClientLoader interface {
	Load(ctx context.Context, clientID string) (*client.Client, error)
}

// OpenCancellations lists the cancellations that still need their provider (sending, a pending
// signature, a sealed PDF to fetch): the cancellations read model's Reader satisfies it. The
// sweep pages through them (sweepCursor).
type OpenCancellations interface {
	// ListNeedingProvider returns the ids of up to limit such cancellations (limit <= 0: all),
	// oldest first (by request, then id), starting after the cancellation afterID requested at
	// afterRequestedAt (afterID "": from the oldest), and the request time of the last id it
	// returns, where with that id the next page starts.
	ListNeedingProvider(ctx context.Context, afterRequestedAt time.Time, afterID string, limit int) (ids []string, lastRequestedAt time.Time, err error)
}

// CancellationConfig configures a CancellationWorker. Zero durations and limits take defaults.
type CancellationConfig struct {
	// WorkerID names this worker in claims; unique among live workers, stable across restarts.
	WorkerID string
	Repo     CancellationRepository
	Clients  ClientLoader
	// Catalog names the companies in the documents.
	Catalog  Catalog
	Provider SigningProvider
	// Open, when set, is swept at Run's start and every SweepInterval.
	Open OpenCancellations
	// Erasures tells the cancellations of deleted users, which are withdrawn, never sent; nil
	// treats no subject as erased.
	Erasures Erasures
	// CallbackURL gives the URL the provider reports a client's processes to ("" for none: the
	// sweep alone follows them).
	CallbackURL func(clientID string) string
	Metrics     *metrics.Metrics
	Logger      *slog.Logger
	// Clock is used for every decision; nil is time.Now.
	Clock func() time.Time

	StaleClaimAfter time.Duration
	MaxSessions     int
	// SweepInterval is how often the sweep runs (DefaultSigningPollInterval).
	SweepInterval time.Duration
	// SweepLimit caps the cancellations one sweep lists; 0 lists them all at every sweep, each
	// read at the provider every SweepInterval. Capped, a sweep lists a page, after the page of
	// the sweep before, so that the pending ones, open for weeks and listed oldest first, do not
	// hide a newer one behind them; each is then read within ceil(open/SweepLimit)+1 sweeps (Run's
	// first sweep reads every page).
	SweepLimit int
	// SigningTimeout is how long the holder has to sign (DefaultSigningTimeout).
	SigningTimeout time.Duration
}

// CancellationWorker drives cancellations through their signing provider. It is safe for
// concurrent use.
type CancellationWorker struct {
	cfg CancellationConfig
	log *slog.Logger

	// mu guards pool's state and lost.
	mu sync.Mutex
	// pool reruns: a pass asked for while one runs is followed by another. Its timers are the
	// pending cancellations' deadlines.
	pool *pool
	lost map[string]bool // cancellations whose lost process was logged
	// sweeper pages the sweep through Open; nil without Open.
	sweeper *sweepCursor
}

// NewCancellationWorker builds a cancellation worker. It panics when WorkerID, Repo, Clients,
// Catalog or Provider is missing: a wiring mistake, not a runtime condition.
func NewCancellationWorker(cfg CancellationConfig) *CancellationWorker {
	if cfg.WorkerID == "" || cfg.Repo == nil || cfg.Clients == nil || cfg.Catalog == nil || cfg.Provider == nil {
		panic("worker.NewCancellationWorker: WorkerID, Repo, Clients, Catalog and Provider are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.StaleClaimAfter <= 0 {
		cfg.StaleClaimAfter = DefaultStaleClaimAfter
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSigningPollInterval
	}
	if cfg.SigningTimeout <= 0 {
		cfg.SigningTimeout = DefaultSigningTimeout
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	w := &CancellationWorker{cfg: cfg, log: cfg.Logger.With("worker", cfg.WorkerID),
		lost: map[string]bool{}}
	w.pool = newPool(&w.mu, cfg.MaxSessions, true)
	if cfg.Open != nil {
		w.sweeper = &sweepCursor{list: cfg.Open.ListNeedingProvider, limit: cfg.SweepLimit, offer: w.offerSwept,
			log: w.log, what: "cancellations"}
	}
	return w
}

// HandleBatch starts a pass for every cancellation an event says needs one: a request (send
// it), a provider callback (read its process now), a withdrawal (withdraw it at the provider).
// It fails only when ctx ends or the worker stopped.
func (w *CancellationWorker) HandleBatch(ctx context.Context, batch []eventschema.Envelope) error {
	for _, env := range batch {
		id, ok := strings.CutPrefix(env.Stream, cancellation.StreamPrefix)
		if !ok || id == "" {
			continue
		}
		switch env.Type {
		case cancellation.EventRequested, cancellation.EventProviderNotified, cancellation.EventCanceled:
			if err := w.start(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// Resume starts a pass for each cancellation, e.g. the open ones after a restart.
func (w *CancellationWorker) Resume(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := w.start(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// Run sweeps the open cancellations (when Open is set), all of them at start and a page of
// SweepLimit every SweepInterval, and blocks until ctx ends; then it stops every pass and timer
// and waits for them.
func (w *CancellationWorker) Run(ctx context.Context) error {
	w.pool.run(ctx, w.cfg.SweepInterval, w.sweeper.sweepFunc(), w.Stop)
	return nil
}

// Stop cancels every pass and timer and waits until they have returned. It is idempotent.
func (w *CancellationWorker) Stop() {
	w.pool.stop()
}

// Running reports how many passes run now.
func (w *CancellationWorker) Running() int { return w.pool.active() }

// offerSwept starts a pass for each of a sweep's page of ids, as Resume does. The pool refuses
// none: it waits for a slot, and an id whose pass runs has that pass run once more. So it
// reports false only when a pass could not be started (ctx ended, the worker stopped),
// and the sweep then offers the page again.
func (w *CancellationWorker) offerSwept(ctx context.Context, ids []string) bool {
	if err := w.Resume(ctx, ids); err != nil {
		if ctx.Err() == nil && !errors.Is(err, ErrStopped) {
			w.log.Warn("sweep could not start every cancellation", "error", err)
		}
		return false
	}
	return true
}

// start runs a pass for id, or, when one runs already, has it followed by another (so that a
// callback that arrives while a pass reads the provider is not lost).
func (w *CancellationWorker) start(ctx context.Context, id string) error {
	return w.pool.start(ctx, id, func() { w.pass(id) })
}

// pass runs one pass over id and logs why it ended early.
func (w *CancellationWorker) pass(id string) {
	s := &cancellationSession{w: w, id: id, log: w.log.With("cancellation", id)}
	err := s.pass(w.pool.ctx)
	var se *storeError
	switch {
	case err == nil, errors.Is(err, errEnded), errors.Is(err, errDropped):
	case w.pool.ctx.Err() != nil:
	case errors.As(err, &se):
		s.log.Warn("event store unavailable; cancellation left for a later sweep", "error", err)
	case errors.Is(err, ErrProviderUnavailable), errors.Is(err, ErrProviderUnauthorized):
		s.log.Warn("signing provider not usable now; cancellation left for a later sweep", "error", err)
	default:
		s.log.Error("cancellation pass failed", "error", err)
	}
}

// arm schedules a pass at a pending cancellation's deadline; a timer armed before is replaced.
func (w *CancellationWorker) arm(id string, at time.Time) {
	w.pool.after(id, at, w.now(), func() {
		if err := w.start(w.pool.ctx, id); err != nil && !errors.Is(err, ErrStopped) {
			w.log.Warn("deadline of a pending cancellation not started; the next sweep finds it", "cancellation", id, "error", err)
		}
	})
}

func (w *CancellationWorker) disarm(id string) { w.pool.cancelTimer(id) }

func (w *CancellationWorker) now() time.Time { return w.cfg.Clock() }

// firstLoss tells whether id's process is found lost at the provider for the first time here.
// The set is bounded: past maxLostNoted ids it starts anew (and logs some losses again).
func (w *CancellationWorker) firstLoss(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lost[id] {
		return false
	}
	if len(w.lost) >= maxLostNoted {
		w.lost = map[string]bool{}
	}
	w.lost[id] = true
	return true
}

const maxLostNoted = 10_000

// Messages of the document errors the worker records.
const (
	messageRenderFailed    = "The power of attorney could not be rendered from the client's template."
	messageTemplateMissing = "The client's template of the recorded version is no longer there."
	messageDocumentRefused = "The signing provider refused the document."
)

// cancellationSession is one pass over one cancellation.
type cancellationSession struct {
	w   *CancellationWorker
	id  string
	log *slog.Logger
	c   *cancellation.Cancellation
	// recorded tells whether the last mutate recorded an event: a decision that found it made
	// already (another worker's pass, e.g. at a deadline both armed) records nothing.
	recorded bool
}

func (s *cancellationSession) pass(ctx context.Context) error {
	c, err := s.load(ctx)
	if err != nil {
		return err
	}
	if !c.Exists() {
		s.log.Warn("cancellation not found; nothing to drive")
		return nil
	}
	s.c = c
	s.log = s.log.With("company", c.Company())
	switch {
	case c.Status() == cancellation.StatusCanceled || c.Status() == cancellation.StatusTimedOut:
		s.w.disarm(s.id)
		return s.withdrawAtProvider(ctx)
	case !c.NeedsProvider():
		s.w.disarm(s.id)
		return nil
	}
	if erased, err := s.erased(ctx); err != nil {
		return err
	} else if erased {
		// The user was deleted: there is no holder to ask any more.
		if _, err := s.mutate(ctx, func(c *cancellation.Cancellation) error {
			return c.Cancel(cancellation.CanceledUserDeleted, s.w.now())
		}); err != nil {
			return err
		}
		s.outcome(cancellation.StatusCanceled, "USER_DELETED")
		return s.withdrawAtProvider(ctx)
	}
	switch c.Status() {
	case cancellation.StatusPreparation:
		return s.send(ctx)
	case cancellation.StatusPending:
		return s.follow(ctx)
	default: // CLOSED, not sealed yet
		return s.fetchSealed(ctx)
	}
}

// send renders the document and hands it to the provider: PREPARATION → PENDING, or
// DOCUMENT_ERROR when it cannot be made or the provider refuses it.
func (s *cancellationSession) send(ctx context.Context) error {
	c, err := s.mutate(ctx, func(c *cancellation.Cancellation) error {
		return c.Claim(s.w.cfg.WorkerID, s.w.now(), s.w.cfg.StaleClaimAfter)
	})
	if errors.Is(err, cancellation.ErrAlreadyClaimed) {
		return errDropped
	}
	if err != nil {
		return err
	}
	req := c.Requested()
	cl, err := s.w.cfg.Clients.Load(ctx, c.ClientID())
	if err != nil {
		return &storeError{fmt.Errorf("load client %s: %w", c.ClientID(), err)}
	}
	signing, ok := cl.Signing()
	if !ok {
		return fmt.Errorf("client %s has no usable signing configuration: %w", c.ClientID(), ErrProviderUnauthorized)
	}
	text, ok := cl.Template(req.TemplateVersion)
	if !ok {
		return s.failDocument(ctx, cancellation.DocumentTemplateMissing, messageTemplateMissing)
	}
	doc, err := s.render(text, req, cl, signing.Place)
	if err != nil {
		s.log.Error("rendering the power of attorney failed", "error", err)
		return s.failDocument(ctx, cancellation.DocumentRenderFailed, messageRenderFailed)
	}
	p := req.Personal
	if p == nil {
		return s.failDocument(ctx, cancellation.DocumentRenderFailed, messageRenderFailed)
	}
	sr := SigningRequest{Reference: c.DocumentID(), Title: documentTitle, Document: doc,
		DeliveryMethod: DeliveryMethod(req.DeliveryMethod), Email: p.Email, PhoneNumber: p.PhoneNumber,
		SignerName: p.HolderName, SignerPersonalNumber: p.PersonalNumber, ExpiresAt: s.w.now().Add(s.w.cfg.SigningTimeout)}
	if s.w.cfg.CallbackURL != nil {
		sr.CallbackURL = s.w.cfg.CallbackURL(c.ClientID())
	}
	process, err := s.w.cfg.Provider.StartSigning(ctx, signing.ProviderKey, sr)
	s.providerCall("start", err)
	switch {
	case errors.Is(err, ErrDocumentRefused):
		return s.failDocument(ctx, cancellation.DocumentRefused, messageDocumentRefused)
	case err != nil:
		return err
	}
	sum := sha256.Sum256(doc)
	c, err = s.mutate(ctx, func(c *cancellation.Cancellation) error {
		return c.MarkSent(process.ID, hex.EncodeToString(sum[:]), len(doc), s.w.cfg.SigningTimeout, s.w.now())
	})
	if err != nil {
		return err
	}
	s.outcome(cancellation.StatusPending, "")
	s.w.arm(s.id, c.Sent().Deadline)
	return nil
}

// documentTitle names the document at the provider and in the PDF's metadata.
const documentTitle = "Fullmakt – uppsägning av försäkring"

// render makes the power of attorney: the template of the recorded version, with the holder's
// data the request recorded. Unknown values render as blanks to fill in (poa.Blank).
func (s *cancellationSession) render(text string, req cancellation.Requested, cl *client.Client, place string) ([]byte, error) {
	t, err := poa.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parse template version %d: %w", req.TemplateVersion, err)
	}
	f := poa.Fields{Company: req.Company, InsuranceType: insuranceTypeName(req.InsuranceType), CancellationDate: req.CancellationDate,
		ClientName: cl.Name(), Place: place, Date: req.RequestedAt.Format(time.DateOnly)}
	if co, err := s.w.cfg.Catalog.Get(req.Company); err == nil && co.DisplayName != "" {
		f.Company = co.DisplayName
	}
	if p := req.Personal; p != nil {
		f.HolderName, f.InsuranceNumber = p.HolderName, p.InsuranceNumber
		f.PersonalNumber = p.PersonalNumber
		if len(f.PersonalNumber) == 12 { // as Swedes write it: YYYYMMDD-NNNN
			f.PersonalNumber = f.PersonalNumber[:8] + "-" + f.PersonalNumber[8:]
		}
	}
	var buf bytes.Buffer
	if err := poapdf.Render(&buf, t, f, poapdf.Meta{Title: documentTitle, Author: cl.Name(), CreatedAt: req.RequestedAt}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// insuranceTypeNames are the documents' names of Samla's insurance types (the example template
// and the sandbox's holders are Swedish); an unknown type prints as its code.
var insuranceTypeNames = map[string]string{
	"HOME": "Hemförsäkring", "HOUSE": "Villaförsäkring", "CAR": "Bilförsäkring", "ACCIDENT": "Olycksfallsförsäkring",
	"PET": "Djurförsäkring", "LIFE": "Livförsäkring", "HEALTH": "Sjukvårdsförsäkring", "TRAVEL": "Reseförsäkring",
}

func insuranceTypeName(code string) string {
	if name, ok := insuranceTypeNames[code]; ok {
		return name
	}
	return code
}

func (s *cancellationSession) failDocument(ctx context.Context, code, message string) error {
	if _, err := s.mutate(ctx, func(c *cancellation.Cancellation) error { return c.FailDocument(code, message, s.w.now()) }); err != nil {
		return err
	}
	s.outcome(cancellation.StatusDocumentError, code)
	return nil
}

// follow reads a pending cancellation's process once and records what changed; past the
// deadline unsigned it is TIMED_OUT and withdrawn. A pending one gets a timer at its deadline.
func (s *cancellationSession) follow(ctx context.Context) error {
	sent := s.c.Sent()
	key, err := s.providerKey(ctx)
	if err != nil {
		return err
	}
	process, err := s.w.cfg.Provider.SigningStatus(ctx, key, sent.ProcessID)
	s.providerCall("status", err)
	if err != nil && !errors.Is(err, ErrProcessNotFound) {
		if s.due() {
			// The provider is down at the deadline: the deadline is Samla's, not the provider's.
			return s.timeOut(ctx)
		}
		s.w.arm(s.id, sent.Deadline)
		return err
	}
	switch {
	case err == nil && process.State == SigningSigned:
		if _, err := s.mutate(ctx, func(c *cancellation.Cancellation) error {
			return c.Sign(process.SignedAt, process.SignatureMethod)
		}); err != nil {
			return err
		}
		s.w.disarm(s.id)
		s.outcome(cancellation.StatusClosed, "")
		if process.Sealed {
			return s.fetchSealed(ctx)
		}
		return nil
	case err == nil && process.State == SigningRejected:
		if _, err := s.mutate(ctx, func(c *cancellation.Cancellation) error { return c.Reject(s.w.now()) }); err != nil {
			return err
		}
		s.w.disarm(s.id)
		s.outcome(cancellation.StatusRejected, "")
		return nil
	case s.due():
		return s.timeOut(ctx)
	}
	if errors.Is(err, ErrProcessNotFound) && s.w.firstLoss(s.id) {
		// Said once per cancellation: every sweep finds it lost again until its deadline.
		s.log.Warn("the provider has no process for a pending cancellation; it times out at its deadline")
	}
	s.w.arm(s.id, sent.Deadline)
	return nil
}

func (s *cancellationSession) due() bool { return !s.w.now().Before(s.c.Sent().Deadline) }

func (s *cancellationSession) timeOut(ctx context.Context) error {
	// mutate keeps s.c, now TIMED_OUT, for the withdrawal.
	if _, err := s.mutate(ctx, func(c *cancellation.Cancellation) error { return c.TimeOut(s.w.now()) }); err != nil {
		return err
	}
	s.w.disarm(s.id)
	s.outcome(cancellation.StatusTimedOut, "")
	return s.withdrawAtProvider(ctx)
}

// fetchSealed downloads the signed, sealed PDF of a CLOSED cancellation and records it.
func (s *cancellationSession) fetchSealed(ctx context.Context) error {
	key, err := s.providerKey(ctx)
	if err != nil {
		return err
	}
	doc, err := s.w.cfg.Provider.SignedDocument(ctx, key, s.c.Sent().ProcessID)
	s.providerCall("document", err)
	if errors.Is(err, ErrNotSealed) {
		return nil // the provider's callback, or the next sweep, comes back for it
	}
	if err != nil {
		return err
	}
	sum := sha256.Sum256(doc)
	if _, err := s.mutate(ctx, func(c *cancellation.Cancellation) error {
		return c.Seal(doc, hex.EncodeToString(sum[:]), s.w.now())
	}); err != nil {
		return err
	}
	s.log.Info("signed power of attorney sealed and recorded", "size", len(doc))
	return nil
}

// withdrawAtProvider withdraws the process of a cancellation that ended without a signature
// (withdrawn by the client, timed out, its user deleted), so that the link stops working. It is
// best effort: a provider that refuses or is down leaves a link that Samla will not honour
// anyway (a signature after the end is not recorded).
func (s *cancellationSession) withdrawAtProvider(ctx context.Context) error {
	sent := s.c.Sent()
	if sent == nil {
		return nil // never reached the provider
	}
	key, err := s.providerKey(ctx)
	if err != nil {
		return nil
	}
	err = s.w.cfg.Provider.CancelSigning(ctx, key, sent.ProcessID)
	s.providerCall("cancel", err)
	if err != nil && !errors.Is(err, ErrProcessNotFound) && ctx.Err() == nil {
		s.log.Warn("withdrawing the signing process at the provider failed", "error", err)
		return nil
	}
	// The holder may have signed in the moment before the withdrawal (or while Samla was down):
	// the cancellation stays withdrawn, as the client asked, but nobody may learn it from a
	// successful withdrawal alone.
	if p, err := s.w.cfg.Provider.SigningStatus(ctx, key, sent.ProcessID); err == nil && p.State == SigningSigned {
		s.log.Warn("the holder signed at the provider before the withdrawal reached it; the cancellation stays "+string(s.c.Status()),
			"signedAt", p.SignedAt)
		if m := s.w.cfg.Metrics; m != nil {
			m.CancellationOutcomes.WithLabelValues(s.c.Company(), string(s.c.Status()), "SIGNED_AFTER_END").Inc()
		}
	}
	return nil
}

func (s *cancellationSession) providerKey(ctx context.Context) (string, error) {
	cl, err := s.w.cfg.Clients.Load(ctx, s.c.ClientID())
	if err != nil {
		return "", &storeError{fmt.Errorf("load client %s: %w", s.c.ClientID(), err)}
	}
	cfg, ok := cl.Signing()
	if !ok {
		return "", fmt.Errorf("client %s has no usable signing configuration: %w", s.c.ClientID(), ErrProviderUnauthorized)
	}
	return cfg.ProviderKey, nil
}

func (s *cancellationSession) erased(ctx context.Context) (bool, error) {
	if s.w.cfg.Erasures == nil {
		return false, nil
	}
	erased, err := s.w.cfg.Erasures.Erased(ctx, s.c.DataSubject())
	if err != nil {
		return false, &storeError{fmt.Errorf("read the erasure of the cancellation's subject: %w", err)}
	}
	return erased, nil
}

func (s *cancellationSession) load(ctx context.Context) (*cancellation.Cancellation, error) {
	c, err := s.w.cfg.Repo.Load(ctx, s.id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &storeError{fmt.Errorf("load cancellation %s: %w", s.id, err)}
	}
	return c, nil
}

// mutate runs decide through the repository, retrying the event store's transient failures. A
// decision the cancellation refuses because it ended meanwhile is errEnded.
func (s *cancellationSession) mutate(ctx context.Context, decide func(*cancellation.Cancellation) error) (*cancellation.Cancellation, error) {
	var lastErr error
	for attempt := 1; attempt <= maxStoreAttempts; attempt++ {
		if attempt > 1 {
			if err := retry.Sleep(ctx, storeBackoff.Delay(attempt-1)); err != nil {
				return nil, err
			}
		}
		var refused error
		s.recorded = false
		c, _, err := s.w.cfg.Repo.Update(ctx, s.id, s.meta(), func(c *cancellation.Cancellation) error {
			refused = decide(c)
			s.recorded = refused == nil && len(c.Recorded()) > 0
			return refused
		})
		switch {
		case err == nil:
			s.c = c
			return c, nil
		case errors.Is(refused, cancellation.ErrFinal), errors.Is(refused, cancellation.ErrIllegalTransition):
			return c, errEnded
		case refused != nil:
			return c, err
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		lastErr = &storeError{fmt.Errorf("update cancellation %s: %w", s.id, err)}
	}
	return nil, lastErr
}

func (s *cancellationSession) meta() repository.Meta {
	return repository.Meta{Tenant: s.c.ClientID(), CorrelationID: s.id, Actor: "connector:" + s.w.cfg.WorkerID}
}

// outcome counts a cancellation the connector moved, by company, status and code: only when
// this pass recorded the move, so that two workers' passes over one cancellation count it once.
func (s *cancellationSession) outcome(status cancellation.Status, code string) {
	if m := s.w.cfg.Metrics; m != nil && s.recorded {
		m.CancellationOutcomes.WithLabelValues(s.c.Company(), string(status), code).Inc()
	}
}

// providerCall counts a call of the signing provider by operation and outcome.
func (s *cancellationSession) providerCall(op string, err error) {
	m := s.w.cfg.Metrics
	if m == nil {
		return
	}
	outcome := "ok"
	switch {
	case err == nil:
	case errors.Is(err, ErrDocumentRefused):
		outcome = "refused"
	case errors.Is(err, ErrProviderUnauthorized):
		outcome = "unauthorized"
	case errors.Is(err, ErrProcessNotFound):
		outcome = "not_found"
	case errors.Is(err, ErrNotSealed):
		outcome = "not_sealed"
	default:
		outcome = "error"
	}
	m.SigningProviderCalls.WithLabelValues(op, outcome).Inc()
}
