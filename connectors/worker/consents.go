package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/metrics"
	"github.com/samla/samla/platform/retry"
)

// The consent process manager: for each PSD2 consent a client created, a ConsentWorker claims it
// with an optimistic append (consent.claimed, as a collection's worker does), opens the bank's
// consent with its electronic-ID order (consent.authorization-started, whose deadline is when the
// order times out), polls the bank until the person signed or the order failed, and records
// the outcome: consent.authorized, with expiresAt = the authorization + the validity, or
// consent.failed with its code. An authorized consent is expired (consent.expired) at expiresAt,
// a durable deadline in its events: a worker that starts after it fires it at once. A consent
// that ends while its bank consent may still be live (revoked, expired, timed out by Samla,
// signed by someone else) is withdrawn at the bank, best effort.
//
// Like collections, consents are fed by a Kafka consumer (HandleBatch, on samla.consent.events)
// and swept from a read model's list of the non-final ones (Run), so that a consent whose event
// was missed, or whose worker died, still ends. Deadlines and claims are in the events, so any
// worker enforces them and a restarted one resumes its own sessions at once.

// DefaultConsentValidity is how long an authorized consent stays usable: PSD2's 180 days before
// the person must authenticate again (SAMLA_CONSENT_VALIDITY).
const DefaultConsentValidity = 180 * 24 * time.Hour

// ConsentRepository is the part of the command repository the consent worker needs;
// *repository.Repository[*consent.Consent] satisfies it. Every change goes through Update.
type ConsentRepository interface {
	Load(ctx context.Context, consentID string) (*consent.Consent, error)
	Update(ctx context.Context, consentID string, meta repository.Meta, decide func(*consent.Consent) error,
		opts ...repository.UpdateOption) (*consent.Consent, eventstore.AppendResult, error)
}

// ActiveConsents lists the consents that have not reached a final status, AUTHORIZED ones
// included (their expiry is still to be recorded): the consents read model's Reader satisfies it.
// The sweep pages through them (sweepCursor).
type ActiveConsents interface {
	// ListNonFinal returns the ids of up to limit non-final consents (limit <= 0: all), oldest
	// first (by creation, then id), starting after the consent afterID created at afterCreatedAt
	// (afterID "": from the oldest), and the creation time of the last id it returns, where with
	// that id the next page starts.
	ListNonFinal(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) (ids []string, lastCreatedAt time.Time, err error)
}

// ConsentConfig configures a ConsentWorker. Zero durations and limits take the defaults of
// Config (and DefaultConsentValidity).
type ConsentConfig struct {
	// WorkerID names this worker in claims; unique among live workers, stable across restarts.
	WorkerID string
	Repo     ConsentRepository
	// Bank opens, reads and withdraws consents at the banks.
	Bank ConsentBank
	// Active, when set, is swept at Run's start and every SweepInterval.
	Active ActiveConsents
	// Erasures tells the consents of deleted users, which are never driven; nil treats no
	// subject as erased.
	Erasures Erasures
	// Metrics records outcomes, bank revocations and active sessions; nil records nothing.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Clock is used for every decision; nil is time.Now.
	Clock func() time.Time

	StaleClaimAfter time.Duration
	MaxSessions     int
	PollInterval    time.Duration
	SweepInterval   time.Duration
	// SweepLimit caps the consents one sweep lists; 0 lists them all at every sweep. Capped, a
	// sweep lists a page, after the page of the sweep before, so that the authorized consents,
	// non-final for months and listed oldest first, do not hide a newer consent behind them
	// (Run's first sweep reads every page). Either way the sweep does not load again the
	// authorized consents whose expiry it has armed.
	SweepLimit int
	// EIDOrderTimeout is how long the person has to sign the bank's EID order
	// (SAMLA_EID_ORDER_TIMEOUT): the consent's authorization deadline.
	EIDOrderTimeout time.Duration
	// Validity is how long an authorized consent lasts (SAMLA_CONSENT_VALIDITY).
	Validity time.Duration
	// RevokeAttempts bounds the tries of withdrawing one consent at the bank (default 6, over
	// about a minute); a bank that stays down keeps a consent Samla no longer uses until the
	// bank's own validity ends it.
	RevokeAttempts int
}

// ConsentWorker drives consents' bank sessions. It is safe for concurrent use.
type ConsentWorker struct {
	cfg ConsentConfig
	log *slog.Logger

	// mu guards pool's state and revoking, so that nothing is withdrawn after Stop.
	mu sync.Mutex
	// pool holds the sessions and the expiry timers of authorized consents, by consent id; a
	// sweep does not load a consent that has one.
	pool *pool
	// revoking are the bank consents being withdrawn here, so that the Kafka feed and a session
	// do not withdraw the same one twice at once.
	revoking map[string]bool
	// sweeper pages the sweep through Active; nil without Active.
	sweeper *sweepCursor
}

// revokeBackoff spaces the tries of withdrawing a consent at the bank (the bank adapter retries
// each try's transient failures itself).
var revokeBackoff = retry.Backoff{Base: time.Second, Max: 20 * time.Second, Jitter: true}

const defaultRevokeAttempts = 6

// NewConsentWorker builds a consent worker. It panics when WorkerID, Repo or Bank is missing: a
// wiring mistake, not a runtime condition.
func NewConsentWorker(cfg ConsentConfig) *ConsentWorker {
	if cfg.WorkerID == "" || cfg.Repo == nil || cfg.Bank == nil {
		panic("worker.NewConsentWorker: WorkerID, Repo and Bank are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.StaleClaimAfter, DefaultStaleClaimAfter)
	def(&cfg.PollInterval, DefaultPollInterval)
	def(&cfg.SweepInterval, DefaultSweepInterval)
	def(&cfg.EIDOrderTimeout, DefaultEIDOrderTimeout)
	def(&cfg.Validity, DefaultConsentValidity)
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.RevokeAttempts <= 0 {
		cfg.RevokeAttempts = defaultRevokeAttempts
	}
	w := &ConsentWorker{
		cfg: cfg, log: cfg.Logger.With("worker", cfg.WorkerID),
		revoking: map[string]bool{},
	}
	w.pool = newPool(&w.mu, cfg.MaxSessions, false)
	if cfg.Active != nil {
		w.sweeper = &sweepCursor{list: cfg.Active.ListNonFinal, limit: cfg.SweepLimit, offer: w.offerSwept,
			log: w.log, what: "consents"}
	}
	return w
}

// HandleBatch acts on consent events: a created or authorized consent gets a session (the
// first drives its authorization, the second arms its expiry), a revoked one is withdrawn at
// the bank. It waits for the bank's answer to each withdrawal's first try, so that the consumer
// commits the event only after the bank was asked; a bank that failed is tried again in the
// background. Other events are ignored. It fails only when ctx ends or the worker stopped.
func (w *ConsentWorker) HandleBatch(ctx context.Context, batch []eventschema.Envelope) error {
	var revocations []string
	for _, env := range batch {
		id, ok := strings.CutPrefix(env.Stream, consent.StreamPrefix)
		if !ok || id == "" {
			continue
		}
		switch env.Type {
		case consent.EventCreated, consent.EventAuthorized:
			if err := w.start(ctx, id, env.EventID); err != nil {
				return err
			}
		case consent.EventRevoked:
			w.disarm(id)
			revocations = append(revocations, id)
		}
	}
	if len(revocations) == 0 {
		return nil
	}
	var wg sync.WaitGroup
	for _, id := range revocations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.withdrawRecorded(ctx, id)
		}()
	}
	wg.Wait()
	if w.isStopped() {
		return ErrStopped
	}
	return ctx.Err()
}

// Resume re-drives consents, e.g. the non-final ones after a restart. A final consent, or one
// another live worker holds, is left alone by its session at once.
func (w *ConsentWorker) Resume(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := w.start(ctx, id, ""); err != nil {
			return err
		}
	}
	return nil
}

// Run sweeps the non-final consents (when Active is set), all of them at start and a page of
// SweepLimit every SweepInterval, and blocks until ctx ends; then it stops every session and
// timer and waits for them.
func (w *ConsentWorker) Run(ctx context.Context) error {
	w.pool.run(ctx, w.cfg.SweepInterval, w.sweeper.sweepFunc(), w.Stop)
	return nil
}

// Stop cancels every session, timer and withdrawal, and waits until they have returned. A
// stopped session records nothing more: it is resumed later. It is idempotent.
func (w *ConsentWorker) Stop() {
	w.pool.stop()
}

// Running reports how many consent sessions this worker drives now.
func (w *ConsentWorker) Running() int { return w.pool.active() }

// Armed reports how many authorized consents wait for their expiry here.
func (w *ConsentWorker) Armed() int {
	return w.pool.armedCount()
}

func (w *ConsentWorker) isStopped() bool { return w.pool.isStopped() }

func (w *ConsentWorker) start(ctx context.Context, id, causation string) error {
	return w.pool.start(ctx, id, func() { w.runConsent(id, causation) })
}

// offerSwept starts a session for each of a sweep's page of ids that has none, waiting for a
// slot; false when one could not be started (ctx ended, the worker stopped), so that the sweep
// offers the page again.
func (w *ConsentWorker) offerSwept(ctx context.Context, ids []string) bool {
	for _, id := range ids {
		if w.pool.armed(id) {
			continue // authorized, its expiry timer runs here
		}
		if err := w.start(ctx, id, ""); err != nil {
			if ctx.Err() == nil && !errors.Is(err, ErrStopped) {
				w.log.Warn("sweep could not resume every consent", "error", err)
			}
			return false
		}
	}
	return true
}

// arm schedules the expiry of an authorized consent: at expiresAt a session records
// consent.expired. A timer armed before is replaced.
func (w *ConsentWorker) arm(id string, expiresAt time.Time) {
	w.pool.after(id, expiresAt, w.now(), func() {
		if err := w.start(w.pool.ctx, id, ""); err != nil && !errors.Is(err, ErrStopped) {
			// The next sweep finds the consent again (it has no timer any more).
			w.log.Warn("expiry of an authorized consent not started", "consent", id, "error", err)
		}
	})
}

// disarm drops the expiry timer of a consent that ended otherwise (revoked).
func (w *ConsentWorker) disarm(id string) { w.pool.cancelTimer(id) }

func (w *ConsentWorker) now() time.Time { return w.cfg.Clock() }
