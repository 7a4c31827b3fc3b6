// Package worker is the connector process manager: for each started collection it claims the
// collection with an optimistic append, drives the company session (login, the user's
// signature, data collection) and records every step as an event, each appended at the
// revision it was decided on.
//
// A worker is fed collection.started envelopes by a Kafka consumer (HandleBatch) and, so that
// no collection stays non-final when an event was missed or a worker died, sweeps the
// collections a read model lists as non-final (Run, Resume).
//
// A session runs as short steps (sched.go): a step takes one of MaxSessions slots only while it
// works, and a session that waits (for the user's signature or input, the client, the company)
// is parked between its looks, with no slot and no goroutine, until its timer (the next look,
// never past its deadline) or its collection.input-supplied envelope wakes it. Its company
// login stays in memory meanwhile; a restart takes the collection over with a new login, as
// before. Ready steps queue per client and the clients are served in turn, so that one
// client's burst or thousands of its waiting sessions do not delay another's new collection. A shutdown leaves sessions where
// they are, without a final status; the same worker id claims them again after a restart and
// another worker takes them over once the claim has gone stale.
//
// A collection whose user was deleted (its data subject erased) is never driven: a session that
// finds it so, at its start or at any step, ends it FAILED (collection.EndForErasedUser),
// whichever worker holds its claim. The user's erasure ends the collections the status read
// model lists; this covers the rest (one it does not list yet, one started while the user was
// being deleted).
//
// The session (session.go) maps the company's login states to collection statuses (the table
// is in status.go), forwards the input and client responses the command side appends
// (supplement-info) and reads every data product (collect.go). The user's deadlines are
// recorded with the status that waits (collection.Deadline): every poll re-reads the
// aggregate and enforces a passed deadline, and a session that starts on a collection whose
// deadline passed, e.g. while the service was down, ends it at once without a claim or a call
// to the company.
package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/metrics"
)

// Defaults of Config. The binary's flags take their defaults from here, so a worker built in a
// test and one started by `samla connect` behave alike.
const (
	DefaultStaleClaimAfter        = 90 * time.Second
	DefaultMaxSessions            = 512
	DefaultPollInterval           = time.Second
	DefaultSweepInterval          = 15 * time.Second
	DefaultSweepLimit             = 1000
	DefaultMaxSessionDuration     = 10 * time.Minute
	DefaultContactFormTimeout     = 2 * time.Minute
	DefaultInputTimeout           = 2 * time.Minute
	DefaultMethodSelectionTimeout = time.Minute
	DefaultEIDOrderTimeout        = 30 * time.Second
	// DefaultInputPollInterval is the service's look at a login waiting for the client's input
	// (the worker's own default is PollInterval): the input's event wakes the session at once,
	// so the look only catches what came without one.
	DefaultInputPollInterval = 5 * time.Second
	// DefaultClientQueueLimit bounds the new collections of one client waiting for a slot;
	// beyond it they wait in the event store for the sweep.
	DefaultClientQueueLimit = 10000
)

// Config configures a Worker. Zero durations and limits take the Default* values.
type Config struct {
	// WorkerID names this worker in claims. It must be unique among live workers and stable
	// across restarts of the same one, which is how a restarted worker resumes its sessions.
	WorkerID  string
	Repo      Repository
	Catalog   Catalog
	Companies Companies
	// Consents tells the bank consent a collection at a company with consents reads its PSD2
	// products under (checking and savings accounts, credit cards); nil, or no grant for the
	// collection, leaves them unread (unknown), while the company's other products are read as
	// usual.
	Consents CollectionConsents
	// AccountInformation reads PSD2 products under a grant; required with Consents.
	AccountInformation AccountInformation
	// Active, when set, is swept at Run's start and every SweepInterval.
	Active ActiveCollections
	// Erasures ends the collections of erased data subjects (deleted users) at the session's
	// first look and at every step after; nil treats no subject as erased, which only tests
	// whose collections have no user may want.
	Erasures Erasures
	// Metrics records outcomes and active sessions; nil records nothing.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Clock is used for every decision (claims, status times, deadlines); nil is time.Now.
	Clock func() time.Time
	// StaleClaimAfter is how long another worker's claim blocks this one after that worker's
	// last event. A live session renews its claim at half this period.
	StaleClaimAfter time.Duration
	// MaxSessions bounds the steps this worker runs at once (its slots). A step is the work
	// of a session between two waits; a session waiting for the user, the client or the company
	// is parked and takes no slot (see scheduler).
	MaxSessions int
	// MinSessions, when positive and below MaxSessions, is the least the slots go to while the
	// CPU is saturated: between it and MaxSessions the worker adapts its slots to how long
	// runnable goroutines wait for a CPU (slots.go). 0 keeps MaxSessions slots throughout; the
	// service gives DefaultMinSessions when the companies run in process.
	MinSessions int
	// MaxSessionsPerClient, when positive, caps the slots one client's sessions take at once,
	// even while others are free; 0 leaves only the round robin between clients.
	MaxSessionsPerClient int
	// ClientQueueLimit bounds the new collections of one client waiting for a slot here; one
	// beyond it is left to the sweep, which finds it in the event store.
	ClientQueueLimit int
	// PollInterval is the wait between looks at a company login.
	PollInterval time.Duration
	// InputPollInterval is the wait between looks at a login that waits for the client's input
	// (contact form, collection input), whose supplement-info event wakes the session at once;
	// the look also catches input that arrives without the event. 0 is PollInterval. The
	// deadline always wakes the session in time.
	InputPollInterval time.Duration
	// SweepInterval is the period of the non-final sweep.
	SweepInterval time.Duration
	// SweepLimit caps the collections one sweep looks at: a page of the non-final ones, each
	// sweep after the page before, so that every one is looked at within ceil(open/SweepLimit)+1
	// sweeps (the round ends at a page shorter than the limit; Run's first sweep reads every
	// page). At most ClientQueueLimit.
	SweepLimit int
	// MaxSessionDuration ends a collection that has not finished this long after it started.
	// It is measured from the collection.started event, so it holds across
	// restarts: a collection resumed after its deadline ends at once. It is a backstop; the
	// deadlines below are what the user sees.
	MaxSessionDuration time.Duration

	// The user's deadlines (SANDBOX.md's SAMLA_* timeouts). Each is recorded with the status
	// that waits (collection.Deadline), so that it survives restarts and any worker can enforce
	// it.
	//
	// ContactFormTimeout: CONTACT_FORM_PENDING without input turns CONTACT_FORM.
	ContactFormTimeout time.Duration
	// InputTimeout: COLLECTION_INPUT_PENDING without input turns COLLECTION_INPUT_TIMEOUT.
	InputTimeout time.Duration
	// MethodSelectionTimeout: a two-factor method not chosen in time turns
	// TWO_FACTOR_METHOD_SELECTION_TIMEOUT.
	MethodSelectionTimeout time.Duration
	// EIDOrderTimeout: an electronic-ID order not signed this long after it started turns
	// AUTHENTICATION_TIMEOUT. The client-side method's instructions get twice as
	// long: one period for the client to start the order on the device, one for the order.
	EIDOrderTimeout time.Duration
}

// Worker runs company sessions. It is safe for concurrent use.
type Worker struct {
	cfg Config
	log *slog.Logger

	// sched runs the sessions' steps, parks the waiting ones and shares the slots between
	// clients.
	sched *scheduler
	// sweeper pages the sweep through Active; nil without Active.
	sweeper *sweepCursor
}

// ErrStopped is returned by HandleBatch and Resume once the worker has stopped, so that a
// consumer does not commit events no session was started for.
var ErrStopped = errors.New("connector worker stopped")

// New builds a worker. It panics when WorkerID, Repo, Catalog or Companies is missing, or
// Consents without AccountInformation: that is a wiring mistake, not a runtime condition.
func New(cfg Config) *Worker {
	if cfg.WorkerID == "" || cfg.Repo == nil || cfg.Catalog == nil || cfg.Companies == nil {
		panic("worker.New: WorkerID, Repo, Catalog and Companies are required")
	}
	if cfg.Consents != nil && cfg.AccountInformation == nil {
		panic("worker.New: Consents needs AccountInformation")
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
	def(&cfg.MaxSessionDuration, DefaultMaxSessionDuration)
	def(&cfg.ContactFormTimeout, DefaultContactFormTimeout)
	def(&cfg.InputTimeout, DefaultInputTimeout)
	def(&cfg.MethodSelectionTimeout, DefaultMethodSelectionTimeout)
	def(&cfg.EIDOrderTimeout, DefaultEIDOrderTimeout)
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.SweepLimit <= 0 {
		cfg.SweepLimit = DefaultSweepLimit
	}
	if cfg.ClientQueueLimit <= 0 {
		cfg.ClientQueueLimit = DefaultClientQueueLimit
	}
	// The sweep's sessions queue as one client's: a page larger than its queue could never be
	// taken in full, and the sweep would offer it again for good.
	cfg.SweepLimit = min(cfg.SweepLimit, cfg.ClientQueueLimit)
	def(&cfg.InputPollInterval, cfg.PollInterval)
	w := &Worker{cfg: cfg, log: cfg.Logger.With("worker", cfg.WorkerID)}
	var observe func(active, queued, parked int)
	if m := cfg.Metrics; m != nil {
		observe = func(_, queued, parked int) {
			m.ConnectorQueued.Set(float64(queued))
			m.ConnectorParked.Set(float64(parked))
		}
	}
	w.sched = newScheduler(cfg.MaxSessions, cfg.MaxSessionsPerClient, cfg.ClientQueueLimit, observe)
	if m := cfg.Metrics; m != nil {
		m.ConnectorSlotLimit.Set(float64(cfg.MaxSessions))
		w.sched.limitChanged = func(limit int) { m.ConnectorSlotLimit.Set(float64(limit)) }
	}
	if cfg.Active != nil {
		w.sweeper = &sweepCursor{list: cfg.Active.ListNonFinal, limit: cfg.SweepLimit, offer: w.offerSwept,
			log: w.log, what: "collections"}
	}
	return w
}

// HandleBatch queues a session for every collection.started envelope whose collection has no
// session here yet, in its client's queue, and wakes the parked session of every
// collection.input-supplied envelope (the client's input continues it); other envelopes are
// ignored. It returns at once, without waiting for a slot. It fails only when the worker
// stopped, so that the consumer redelivers the batch.
func (w *Worker) HandleBatch(ctx context.Context, batch []eventschema.Envelope) error {
	left := map[string]int{} // by client: new collections a full queue left to the sweep
	defer func() {
		for client, n := range left {
			w.log.Warn("client's queue full; new collections left for the sweep", "client", client, "collections", n)
		}
	}()
	for _, env := range batch {
		if env.Type != collection.EventStarted && env.Type != collection.EventInputSupplied {
			continue
		}
		id, ok := strings.CutPrefix(env.Stream, collection.StreamPrefix)
		if !ok || id == "" {
			w.log.Warn("collection event on an unexpected stream; skipped", "type", env.Type, "stream", env.Stream, "event", env.EventID)
			continue
		}
		if env.Type == collection.EventInputSupplied {
			w.sched.wake(id)
			continue
		}
		accepted, err := w.start(id, env.Tenant, env.EventID)
		if err != nil {
			return err
		}
		if !accepted {
			left[env.Tenant]++
		}
	}
	return ctx.Err()
}

// Resume re-drives collections, e.g. the non-final ones after a restart. A collection that is
// final, or claimed by another live worker, is left alone by its session at once.
func (w *Worker) Resume(ctx context.Context, ids []string) error {
	if _, err := w.resume(ids); err != nil {
		return err
	}
	return ctx.Err()
}

// resume submits the sessions of ids and counts those their queue refused (it was full).
func (w *Worker) resume(ids []string) (refused int, err error) {
	for _, id := range ids {
		// The client is not known before the session's first look; until then the id queues
		// with the others of unknown client (a sweep's), served in turn like a client.
		accepted, err := w.start(id, "", "")
		if err != nil {
			return refused, err
		}
		if !accepted {
			refused++
		}
	}
	return refused, nil
}

// Run sweeps the non-final collections (when Active is set), all of them at start and a page
// of SweepLimit every SweepInterval, and blocks until ctx ends; then it stops every session and
// waits for them. A stopped session records no final status: it is resumed later.
func (w *Worker) Run(ctx context.Context) error {
	// The slots adapt while the worker runs: the loop ends with the scheduler, which Run's end
	// stops.
	w.sched.adaptSlots(w.cfg.MinSessions, slotAdaptEvery, cpuSaturated())
	runSweeps(ctx, w.sched.ctx, w.cfg.SweepInterval, sweepFollowUp, w.sweeper.sweepFunc(), w.Stop)
	return nil
}

// Stop cancels every running step and waits until they have returned, and forgets the parked
// and queued sessions (a restart resumes them from their events). It is idempotent.
func (w *Worker) Stop() {
	if parked := w.sched.stop(); parked > 0 {
		w.log.Info("every parked session paused by shutdown; a restart resumes them", "sessions", parked)
	}
}

// Running reports how many sessions run a step now, i.e. the slots taken.
func (w *Worker) Running() int {
	active, _, _ := w.sched.counts()
	return active
}

// Parked reports how many sessions wait here without a slot (for the user, the client's input
// or the company's next state).
func (w *Worker) Parked() int {
	_, _, parked := w.sched.counts()
	return parked
}

// start submits id's session to its client's queue; accepted is false when that queue is full.
func (w *Worker) start(id, client, causation string) (accepted bool, err error) {
	var s *session
	return w.sched.submit(id, client, func(ctx context.Context) stepResult {
		if s == nil {
			s = &session{w: w, id: id, causation: causation, log: w.log.With("collection", id)}
		}
		return w.runStep(ctx, s)
	})
}

// offerSwept submits a sweep's page of ids, as Resume does. It reports false when one was
// refused, its client's queue being full, so that the sweep offers the page again rather than
// pass over it for a whole round, or when the worker stopped.
func (w *Worker) offerSwept(ctx context.Context, ids []string) bool {
	refused, err := w.resume(ids)
	if err != nil {
		return false // stopped: nothing to log
	}
	if refused > 0 {
		w.log.Warn("sweep's queue full; the next sweep offers the page again", "collections", refused)
		return false
	}
	return ctx.Err() == nil
}

func (w *Worker) now() time.Time { return w.cfg.Clock() }
